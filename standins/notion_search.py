"""``POST /v1/search`` of the Notion stand-in and its bulk fixtures (mixed into
:class:`standins.notion_api.FakeNotion`).

Search (https://developers.notion.com/reference/post-search), as Notion-Version 2025-09-03
answers it (https://developers.notion.com/docs/upgrade-guide-2025-09-03: search lists data
sources, not databases). The JSON body, every field optional:

- ``query``: a string; only objects whose plain-text title contains it (case-insensitively);
- ``filter``: ``{"property": "object", "value": "page" | "data_source"}``;
- ``sort``: ``{"direction": "ascending" | "descending", "timestamp": "last_edited_time"}``
  (the only sortable timestamp; the reference's own example leaves ``direction`` out, which
  the stand-in takes as descending); without it the order is stable but unspecified (here: by
  id);
- ``start_cursor``: a ``next_cursor`` of an earlier answer; ``page_size``: 1 to 100, default 100.

The answer is ``{"object": "list", "results": [...], "next_cursor": str | null, "has_more":
bool, "type": "page_or_data_source", "page_or_data_source": {}, "request_id"}``; each result
is the page or data source as ``GET /v1/pages/{id}`` / ``GET /v1/data_sources/{id}`` answer it.
Only objects of the token's workspace that are shared with it (not :meth:`unshare`\\ d) and not
in the trash are listed. A malformed field answers 400 ``validation_error``, as Notion does for
a body that fails validation (https://developers.notion.com/reference/status-codes). Requests
are counted as ``calls["search"]`` and take faults and the workspace's budget like every
endpoint.

A cursor names the position after the last result returned — the sort key (``last_edited_time``
and id) of the next object — so a listing resumed from it continues after what it already
returned even if objects were edited meanwhile: an object edited after it was listed moves to
the end (ascending) and is listed again; one edited before it was reached moves behind the
cursor (descending) and is missed, which is what Notion's search may do too ("the index may
change as your connection iterates",
https://developers.notion.com/reference/search-optimizations-and-limitations).

Bulk fixtures: :meth:`NotionSearch.add_pages` (thousands of pages at once, each with its own
``last_edited_time``), :meth:`~NotionSearch.edit_page` (a silent edit: a newer
``last_edited_time`` and new content, no webhook), :meth:`~NotionSearch.unshare`.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from standins.notion_blocks import RichTextInput, rich_text, title_property
from standins.notion_http import DEFAULT_TIME, DEFAULT_USER, norm_id

if TYPE_CHECKING:
    from standins.notion_workspaces import Grant

__all__ = ["MAX_PAGE_SIZE", "NotionSearch", "format_time"]

#: Results per answer at most (and by default), as Notion's reference says.
MAX_PAGE_SIZE = 100
_FILTER_VALUES = ("page", "data_source")
_DIRECTIONS = ("ascending", "descending")


def format_time(moment: datetime) -> str:
    """``moment`` as Notion spells times: ISO 8601 UTC with milliseconds and ``Z``
    (``2026-11-20T23:55:00.000Z``)."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _parse_time(value: Any) -> datetime:
    """A stored ``last_edited_time`` as aware UTC (the epoch when unreadable)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _plain_title(obj: Mapping[str, Any]) -> str:
    if obj.get("object") == "data_source":
        items = obj.get("title") or []
    else:
        items = next(
            (
                p.get("title") or []
                for p in (obj.get("properties") or {}).values()
                if isinstance(p, dict) and p.get("type") == "title"
            ),
            [],
        )
    return "".join(str(i.get("plain_text", "")) for i in items if isinstance(i, dict))


def _encode(key: tuple[str, str]) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: Any) -> tuple[str, str] | None:
    if not isinstance(cursor, str) or not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    return None


class NotionSearch:
    """Search and bulk fixtures of :class:`~standins.notion_api.FakeNotion` (see the module;
    the fake provides the state, ids, ownership and the request plumbing)."""

    pages: dict[str, dict[str, Any]]
    blocks: dict[str, dict[str, Any]]
    children: dict[str, list[str]]
    data_sources: dict[str, dict[str, Any]]
    calls: Counter[str]
    workspace_id: str
    _owners: dict[str, str]
    _unshared: set[str]
    _lock: threading.Lock

    if TYPE_CHECKING:

        def _new_id(self, hint: str) -> str: ...
        def _workspace_for(self, workspace_id: str | None, parent: Mapping[str, Any] | None) -> str: ...
        def _admit(
            self, request: Request, endpoint: str, raw_id: str | None
        ) -> Response | tuple[Grant, str]: ...
        def _error(
            self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
        ) -> Response: ...
        def _json(self, body: dict[str, Any]) -> Response: ...
        def add_page(
            self,
            page_id: str | None = None,
            *,
            title: RichTextInput = "Untitled",
            parent: Mapping[str, Any] | None = None,
            created_time: str = DEFAULT_TIME,
            last_edited_time: str = DEFAULT_TIME,
            workspace_id: str | None = None,
        ) -> str: ...

    # -- fixtures --------------------------------------------------------------------------

    def add_pages(
        self,
        n: int,
        workspace_id: str | None = None,
        *,
        blocks: int = 0,
        edited_at: datetime | str | None = None,
        title: str = "Page",
        parent: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Add ``n`` pages shared with ``workspace_id``'s integration (``None``: the default
        workspace), titled ``"<title> <i>"``, each with ``blocks`` paragraphs; returns their
        ids in order. Page ``i`` was created and last edited at ``edited_at`` (default
        :data:`~standins.notion_http.DEFAULT_TIME`) plus ``i`` seconds, so every
        ``last_edited_time`` differs and the last page is the newest. Fast: 2 000 pages of
        a few blocks take a fraction of a second."""
        start = _parse_time(edited_at if edited_at is not None else DEFAULT_TIME)
        ids: list[str] = []
        for i in range(n):
            stamp = format_time(start + timedelta(seconds=i))
            pid = self.add_page(
                title=f"{title} {i}",
                created_time=stamp,
                last_edited_time=stamp,
                parent=parent,
                workspace_id=workspace_id,
            )
            self._paragraphs(pid, [f"{title} {i}, paragraph {j + 1}." for j in range(blocks)])
            ids.append(pid)
        return ids

    def _paragraphs(self, page_id: str, lines: list[str]) -> None:
        """Replace a page's content by one paragraph per line (built directly, no copies)."""
        for old in self.children.pop(page_id, []):
            self.blocks.pop(old, None)
            self._owners.pop(old, None)
        owner = self._owners.get(page_id, self.workspace_id)
        parent = {"type": "page_id", "page_id": page_id}
        ids: list[str] = []
        for line in lines:
            bid = str(uuid.uuid4())
            self._owners[bid] = owner
            self.blocks[bid] = {
                "object": "block",
                "id": bid,
                "parent": parent,
                "created_time": DEFAULT_TIME,
                "last_edited_time": DEFAULT_TIME,
                "created_by": {"object": "user", "id": DEFAULT_USER},
                "last_edited_by": {"object": "user", "id": DEFAULT_USER},
                "has_children": False,
                "in_trash": False,
                "type": "paragraph",
                "paragraph": {"rich_text": rich_text(line), "color": "default"},
            }
            ids.append(bid)
        self.children[page_id] = ids

    def latest_edit(self) -> datetime:
        """The newest ``last_edited_time`` of any page or data source (UTC)."""
        times = [
            _parse_time(o.get("last_edited_time"))
            for o in (*self.pages.values(), *self.data_sources.values())
        ]
        return max(times, default=_parse_time(DEFAULT_TIME))

    def edit_page(
        self,
        page_id: str,
        *,
        edited_at: datetime | str | None = None,
        text: str | None = None,
        title: RichTextInput | None = None,
    ) -> str:
        """Edit a page silently (the stand-in sends no webhook): its ``last_edited_time``
        becomes ``edited_at`` (default: one second after :meth:`latest_edit`, so it is the
        newest object) and its content one paragraph ``text`` (default: ``"Edited at
        <time>."``); ``title`` replaces its title. Returns the new ``last_edited_time``.

        Raises:
            KeyError: no such page.
        """
        pid = norm_id(page_id) or page_id
        page = self.pages[pid]
        moment = (
            _parse_time(edited_at) if edited_at is not None else self.latest_edit() + timedelta(seconds=1)
        )
        stamp = format_time(moment)
        if title is not None:
            name = next(
                (
                    k
                    for k, v in page["properties"].items()
                    if isinstance(v, dict) and v.get("type") == "title"
                ),
                "title",
            )
            page["properties"][name] = title_property(title)
        self._paragraphs(pid, [text if text is not None else f"Edited at {stamp}."])
        page["last_edited_time"] = stamp
        return stamp

    def unshare(self, object_id: str, shared: bool = False) -> None:
        """Remove a page, database or data source from the integration's connections (or
        share it again with ``shared=True``): it then answers 404 ``object_not_found`` and
        search leaves it out, as for a page that exists but is not shared
        (https://developers.notion.com/reference/status-codes). Its blocks, asked for by
        their own ids, still answer."""
        oid = norm_id(object_id) or object_id
        with self._lock:
            if shared:
                self._unshared.discard(oid)
            else:
                self._unshared.add(oid)

    # -- HTTP ------------------------------------------------------------------------------

    def _invalid(self, detail: str) -> Response:
        return self._error(400, "validation_error", f"body failed validation: {detail}")

    async def _search(self, request: Request) -> Response:
        """``POST /v1/search`` (see the module)."""
        got = self._admit(request, "search", None)
        if isinstance(got, Response):
            return got
        grant = got[0]
        raw = await request.body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return self._error(400, "invalid_json", "Error parsing JSON body.")
        if not isinstance(body, dict):
            return self._invalid("body should be an object.")
        query = body.get("query")
        if query is not None and not isinstance(query, str):
            return self._invalid(f"body.query should be a string, instead was `{query!r}`.")
        kinds: tuple[str, ...] = ("page", "data_source")
        flt = body.get("filter")
        if flt is not None:
            value = flt.get("value") if isinstance(flt, dict) else None
            if not isinstance(flt, dict) or flt.get("property") != "object" or value not in _FILTER_VALUES:
                return self._invalid(
                    f'body.filter.value should be "page" or "data_source", instead was `{json.dumps(value)}`.'
                )
            kinds = (str(value),)
        sort = body.get("sort")
        direction: str | None = None
        if sort is not None:
            if (
                not isinstance(sort, dict)
                or sort.get("timestamp") != "last_edited_time"
                or sort.get("direction", "descending") not in _DIRECTIONS
            ):
                return self._invalid(
                    'body.sort should be {"timestamp": "last_edited_time", '
                    '"direction": "ascending" | "descending"}.'
                )
            direction = str(sort.get("direction", "descending"))
        size = body.get("page_size", MAX_PAGE_SIZE)
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE_SIZE:
            return self._invalid(
                f"body.page_size should be a number between 1 and 100, instead was `{json.dumps(size)}`."
            )
        start = body.get("start_cursor")
        after = _decode(start) if start is not None else None
        if start is not None and after is None:
            return self._invalid(
                f"body.start_cursor should be a valid cursor, instead was `{json.dumps(start)}`."
            )
        return self._json(self._listing(grant, query or "", kinds, direction, after, size))

    def _listing(
        self,
        grant: Grant,
        query: str,
        kinds: tuple[str, ...],
        direction: str | None,
        after: tuple[str, str] | None,
        size: int,
    ) -> dict[str, Any]:
        """One answer of search (the validated request)."""
        needle = query.casefold()
        with self._lock:
            unshared = set(self._unshared)
        found: list[tuple[tuple[str, str], dict[str, Any]]] = []
        pools = [(k, self.pages if k == "page" else self.data_sources) for k in kinds]
        for _, pool in pools:
            for oid, obj in list(pool.items()):
                if (
                    self._owners.get(oid) != grant.workspace_id
                    or oid in unshared
                    or obj.get("in_trash")
                    or obj.get("archived")
                ):
                    continue
                if needle and needle not in _plain_title(obj).casefold():
                    continue
                stamp = format_time(_parse_time(obj.get("last_edited_time")))
                found.append(((stamp if direction else "", oid), obj))
        descending = direction == "descending"
        found.sort(key=lambda item: item[0], reverse=descending)
        if after is not None:
            found = [f for f in found if (f[0] <= after if descending else f[0] >= after)]
        page, rest = found[:size], found[size:]
        return {
            "object": "list",
            "results": [obj for _, obj in page],
            "next_cursor": _encode(rest[0][0]) if rest else None,
            "has_more": bool(rest),
            "type": "page_or_data_source",
            "page_or_data_source": {},
            "request_id": str(uuid.uuid4()),
        }
