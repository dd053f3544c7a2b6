"""Rows and comments of the Notion stand-in (mixed into
:class:`standins.notion_api.FakeNotion`):

- ``POST /v1/data_sources/{id}/query`` (https://developers.notion.com/reference/query-a-data-source):
  the pages whose parent is the data source (not in the trash, visible to the token), with
  ``filter`` (a timestamp filter: ``{"timestamp": "created_time" | "last_edited_time",
  "<timestamp>": {"on_or_after" | "after" | "on_or_before" | "before" | "equals": ISO}}``,
  or an ``and`` of them), ``sorts`` (``{"timestamp", "direction"}`` or ``{"property",
  "direction"}``), ``start_cursor``, ``page_size`` (1–100; default 100); answers
  ``{"object": "list", "results": [pages], "next_cursor", "has_more", "type":
  "page_or_data_source", "page_or_data_source": {}}``. Any other filter is a 400
  ``validation_error`` naming what the stand-in supports. Counted as
  ``calls["data_sources.query"]``.
- ``GET /v1/comments?block_id=&start_cursor=&page_size=``
  (https://developers.notion.com/reference/list-comments): the **un-resolved** comments whose
  parent is that page or block, oldest first, as comment objects
  (https://developers.notion.com/reference/comment-object: ``parent``, ``discussion_id``,
  ``created_time``, ``last_edited_time``, ``created_by``, ``rich_text``, ``display_name``);
  ``{"object": "list", "results", "next_cursor", "has_more", "type": "comment", "comment": {}}``.
  Counted as ``calls["comments.list"]``. Build them with :meth:`NotionRows.add_comment`
  (a reply: the same ``discussion_id``) and :meth:`NotionRows.resolve`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import Response

from standins.notion_blocks import RichTextInput, rich_text
from standins.notion_http import DEFAULT_TIME, DEFAULT_USER, norm_id

if TYPE_CHECKING:
    from standins.notion_workspaces import Grant

__all__ = ["NotionRows"]

_OPERATORS: dict[str, Callable[[datetime, datetime], bool]] = {
    "on_or_after": lambda a, b: a >= b,
    "after": lambda a, b: a > b,
    "on_or_before": lambda a, b: a <= b,
    "before": lambda a, b: a < b,
    "equals": lambda a, b: a == b,
}


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _sort_value(page: dict[str, Any], prop: str) -> str:
    value = (page.get("properties") or {}).get(prop) or {}
    inner = value.get(value.get("type", ""))
    if isinstance(inner, list):
        return "".join(str(i.get("plain_text") or i.get("name") or "") for i in inner if isinstance(i, dict))
    if isinstance(inner, dict):
        return str(inner.get("name") or inner.get("start") or "")
    return "" if inner is None else f"{inner:>20}" if isinstance(inner, (int, float)) else str(inner)


class NotionRows:
    """Data source queries and comments of :class:`~standins.notion_api.FakeNotion`."""

    pages: dict[str, dict[str, Any]]
    data_sources: dict[str, dict[str, Any]]
    _owners: dict[str, str]
    comments: list[dict[str, Any]]

    if TYPE_CHECKING:

        def _new_id(self, hint: str) -> str: ...
        def _guard(self, request: Request, endpoint: str, raw_id: str) -> Response | str: ...
        def _admit(
            self, request: Request, endpoint: str, raw_id: str | None
        ) -> Response | tuple[Grant, str]: ...
        def _visible(self, grant: Grant, object_id: str) -> bool: ...
        def _not_found(self, object_id: str) -> Response: ...
        def _error(
            self, status: int, code: str, message: str, headers: dict[str, str] | None = None
        ) -> Response: ...
        def _json(self, body: dict[str, Any]) -> Response: ...

    # -- comments --------------------------------------------------------------------------

    def add_comment(
        self,
        parent_id: str,
        text: RichTextInput,
        *,
        discussion_id: str | None = None,
        author: str = DEFAULT_USER,
        name: str | None = None,
        created_time: str = DEFAULT_TIME,
    ) -> tuple[str, str]:
        """Add a comment on page or block ``parent_id`` (a reply when ``discussion_id`` names
        an existing discussion, else a new one); returns ``(comment id, discussion id)``.
        ``name``: the author's ``display_name.resolved_name``."""
        pid = norm_id(parent_id) or parent_id
        cid = self._new_id("comment")
        did = discussion_id or self._new_id("discussion")
        kind = "page_id" if pid in self.pages else "block_id"
        comment: dict[str, Any] = {
            "object": "comment",
            "id": cid,
            "parent": {"type": kind, kind: pid},
            "discussion_id": did,
            "created_time": created_time,
            "last_edited_time": created_time,
            "created_by": {"object": "user", "id": author},
            "rich_text": rich_text(text),
            "attachments": [],
        }
        if name:
            comment["display_name"] = {"type": "user", "resolved_name": name}
        self.comments.append(comment)
        return cid, did

    def resolve(self, discussion_id: str) -> None:
        """Resolve a discussion: its comments are no longer listed (as Notion's API lists
        un-resolved comments only)."""
        for comment in self.comments:
            if comment["discussion_id"] == discussion_id:
                comment["resolved"] = True

    async def _comments_list(self, request: Request) -> Response:
        raw = request.query_params.get("block_id")
        if not raw:
            got = self._admit(request, "comments.list", None)
            return (
                got
                if isinstance(got, Response)
                else self._error(
                    400, "validation_error", "body failed validation: block_id should be defined."
                )
            )
        guarded = self._guard(request, "comments.list", raw)
        if isinstance(guarded, Response):
            return guarded
        found = [
            c
            for c in self.comments
            if not c.get("resolved") and guarded in (c["parent"].get("page_id"), c["parent"].get("block_id"))
        ]
        found.sort(key=lambda c: (c["created_time"], c["id"]))
        return self._paged(
            request.query_params.get("start_cursor"),
            request.query_params.get("page_size", "100"),
            found,
            "comment",
        )

    # -- data source queries ---------------------------------------------------------------

    def _paged(self, cursor: str | None, raw_size: Any, items: list[dict[str, Any]], kind: str) -> Response:
        try:
            size = int(raw_size)
        except (TypeError, ValueError):
            size = 0
        if not 1 <= size <= 100:
            return self._error(
                400,
                "validation_error",
                f"body failed validation: page_size should be between 1 and 100, instead was `{raw_size}`.",
            )
        ids = [i["id"] for i in items]
        start = 0
        if cursor:
            if cursor not in ids:
                return self._error(400, "validation_error", f"Invalid start_cursor: {cursor}")
            start = ids.index(cursor)
        chunk = items[start : start + size]
        more = start + size < len(items)
        return self._json(
            {
                "object": "list",
                "results": chunk,
                "next_cursor": ids[start + size] if more else None,
                "has_more": more,
                "type": kind,
                kind: {},
                "request_id": str(uuid.uuid4()),
            }
        )

    @staticmethod
    def _matches(page: dict[str, Any], rule: Any) -> bool | str:
        """Whether ``page`` passes filter ``rule``; a string: the rule is not supported."""
        if not isinstance(rule, dict):
            return "filter must be an object"
        if isinstance(rule.get("and"), list):
            results = [NotionRows._matches(page, r) for r in rule["and"]]
            bad = next((r for r in results if isinstance(r, str)), None)
            return bad if bad is not None else all(results)
        stamp = rule.get("timestamp")
        if stamp not in ("created_time", "last_edited_time") or not isinstance(rule.get(stamp), dict):
            return (
                "the stand-in supports timestamp filters (created_time, last_edited_time) "
                "and their `and` only"
            )
        ((op, value),) = rule[stamp].items() if len(rule[stamp]) == 1 else ((None, None),)
        if op not in _OPERATORS:
            return f"unsupported timestamp condition {sorted(rule[stamp])}"
        return _OPERATORS[op](_time(page[stamp]), _time(value))

    async def _data_sources_query(self, request: Request) -> Response:
        guarded = self._guard(request, "data_sources.query", request.path_params["data_source_id"])
        if isinstance(guarded, Response):
            return guarded
        if guarded not in self.data_sources:
            return self._not_found(guarded)
        try:
            body = await request.json() if await request.body() else {}
        except ValueError:
            return self._error(400, "invalid_json", "Error parsing JSON body.")
        rows = [
            p
            for p in self.pages.values()
            if not p.get("in_trash")
            and (p.get("parent") or {}).get("data_source_id") == guarded
            and self._owners.get(p["id"]) == self._owners.get(guarded)
        ]
        if body.get("filter") is not None:
            kept = []
            for page in rows:
                ok = self._matches(page, body["filter"])
                if isinstance(ok, str):
                    return self._error(400, "validation_error", ok)
                if ok:
                    kept.append(page)
            rows = kept
        rows.sort(key=lambda p: (p["created_time"], p["id"]))
        for sort in reversed(body.get("sorts") or []):
            reverse = sort.get("direction") == "descending"
            stamp, prop = sort.get("timestamp"), sort.get("property")
            if stamp in ("created_time", "last_edited_time"):
                rows.sort(key=lambda p: _time(p[str(stamp)]), reverse=reverse)
            elif isinstance(prop, str):
                rows.sort(key=lambda p: _sort_value(p, str(prop)), reverse=reverse)
            else:
                return self._error(400, "validation_error", f"invalid sort {sort!r}")
        return self._paged(body.get("start_cursor"), body.get("page_size", 100), rows, "page_or_data_source")

    def add_rows(
        self,
        data_source_id: str,
        count: int,
        *,
        properties: Callable[[int], dict[str, Any]] | None = None,
        title_name: str = "Name",
        created: Callable[[int], str] | None = None,
    ) -> list[str]:
        """Add ``count`` row pages to a data source (fast: no blocks); ``properties(n)`` the
        non-title property values of row ``n``, ``created(n)`` its ``created_time`` (and first
        ``last_edited_time``). Returns their ids in order."""
        dsid = norm_id(data_source_id) or data_source_id
        ds = self.data_sources[dsid]
        add_page: Any = cast(Any, self).add_page  # FakeNotion.add_page
        ids = []
        for n in range(count):
            stamp = created(n) if created else DEFAULT_TIME
            ids.append(
                add_page(
                    title=f"Row {n + 1}",
                    title_name=title_name,
                    parent={
                        "type": "data_source_id",
                        "data_source_id": dsid,
                        "database_id": ds["parent"].get("database_id"),
                    },
                    properties=properties(n) if properties else None,
                    created_time=stamp,
                    last_edited_time=stamp,
                )
            )
        return ids

    def _routes_rows(self) -> list[Any]:
        from starlette.routing import Route

        return [
            Route("/v1/data_sources/{data_source_id}/query", self._data_sources_query, methods=["POST"]),
            Route("/v1/comments", self._comments_list, methods=["GET"]),
        ]
