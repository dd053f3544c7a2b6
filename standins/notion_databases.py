"""Databases and data sources of the Notion stand-in (mixed into
:class:`standins.notion_api.FakeNotion`): :meth:`NotionDatabases.add_database` builds a
database object with its ``data_sources`` (https://developers.notion.com/reference/database)
and the data source with its property schema
(https://developers.notion.com/reference/data-source), as Notion-Version 2025-09-03 answers
them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from standins.notion_blocks import RichTextInput, rich_text
from standins.notion_http import DEFAULT_TIME, DEFAULT_USER, compact, norm_id

__all__ = ["NotionDatabases"]


def _user(user_id: str) -> dict[str, Any]:
    return {"object": "user", "id": user_id}


class NotionDatabases:
    """:meth:`add_database` of :class:`~standins.notion_api.FakeNotion` (which provides the
    state, ids and ownership)."""

    databases: dict[str, dict[str, Any]]
    data_sources: dict[str, dict[str, Any]]
    _owners: dict[str, str]

    if TYPE_CHECKING:

        def _new_id(self, hint: str) -> str: ...
        def _workspace_for(self, workspace_id: str | None, parent: Mapping[str, Any] | None) -> str: ...

    def add_database(
        self,
        database_id: str | None = None,
        *,
        title: RichTextInput = "Untitled database",
        schema: Mapping[str, str] | None = None,
        options: Mapping[str, Sequence[str]] | None = None,
        description: RichTextInput = "",
        parent: Mapping[str, Any] | None = None,
        data_source_id: str | None = None,
        data_source_name: str | None = None,
        last_edited_time: str = DEFAULT_TIME,
        workspace_id: str | None = None,
    ) -> str:
        """Add a database with one data source; returns the database id.

        ``schema`` maps property names to Notion property types (default ``{"Name":
        "title"}``); ``options`` gives option names of select/multi_select/status properties.
        The data source's id is ``data_source_id`` or derived from the database id.
        ``workspace_id`` as for :meth:`add_page`.
        """
        did = norm_id(database_id) if database_id else self._new_id("database")
        if did is None:
            raise ValueError(f"not a Notion id: {database_id!r}")
        dsid = norm_id(data_source_id) if data_source_id else self._new_id(f"ds/{did}")
        assert dsid is not None
        self._owners[did] = self._owners[dsid] = self._workspace_for(workspace_id, parent)
        title_rt = rich_text(title)
        plain = "".join(i["plain_text"] for i in title_rt)
        db_parent = dict(parent) if parent else {"type": "workspace", "workspace": True}
        self.databases[did] = {
            "object": "database",
            "id": did,
            "title": title_rt,
            "description": rich_text(description),
            "parent": db_parent,
            "is_inline": False,
            "in_trash": False,
            "is_locked": False,
            "created_time": DEFAULT_TIME,
            "last_edited_time": last_edited_time,
            "created_by": _user(DEFAULT_USER),
            "last_edited_by": _user(DEFAULT_USER),
            "data_sources": [{"id": dsid, "name": data_source_name or plain}],
            "icon": None,
            "cover": None,
            "url": f"https://www.notion.so/{compact(did)}",
            "public_url": None,
        }
        props: dict[str, Any] = {}
        for n, (name, ptype) in enumerate((schema or {"Name": "title"}).items()):
            config: dict[str, Any] = {}
            if ptype in ("select", "multi_select", "status"):
                config["options"] = [
                    {"id": f"opt-{o}", "name": o, "color": "default"} for o in (options or {}).get(name, ())
                ]
            prop_id = "title" if ptype == "title" else f"p{n}"
            props[name] = {"id": prop_id, "name": name, "type": ptype, ptype: config}
        self.data_sources[dsid] = {
            "object": "data_source",
            "id": dsid,
            "title": copy.deepcopy(title_rt),
            "description": rich_text(description),
            "parent": {"type": "database_id", "database_id": did},
            "database_parent": db_parent,
            "properties": props,
            "is_inline": False,
            "in_trash": False,
            "created_time": DEFAULT_TIME,
            "last_edited_time": last_edited_time,
            "created_by": _user(DEFAULT_USER),
            "last_edited_by": _user(DEFAULT_USER),
            "icon": None,
            "cover": None,
            "url": f"https://www.notion.so/{compact(dsid)}",
            "public_url": None,
        }
        return did
