"""A local stand-in of the Notion API, for the tests and ``debounce serve --demo``.

It speaks the documented JSON shapes (Notion-Version 2025-09-03) of the few endpoints the
Notion integration calls through ``notion-client``:

- ``GET /v1/pages/{page_id}`` — a page object (https://developers.notion.com/reference/page,
  "Retrieve a page");
- ``GET /v1/blocks/{block_id}/children`` — a paginated list of block objects
  (https://developers.notion.com/reference/get-block-children): ``page_size`` (default 100,
  at most 100), ``start_cursor``; answers ``{"object": "list", "results": [...],
  "next_cursor": str | null, "has_more": bool, "type": "block", "block": {}}``;
- ``GET /v1/blocks/{block_id}`` — one block object (https://developers.notion.com/reference/block);
- ``GET /v1/databases/{database_id}`` — a database object with its ``data_sources``
  (https://developers.notion.com/reference/database);
- ``GET /v1/data_sources/{data_source_id}`` — a data source with its property schema
  (https://developers.notion.com/reference/data-source).

Errors are ``{"object": "error", "status": int, "code": str, "message": str}``
(https://developers.notion.com/reference/status-codes). Every request needs
``Authorization: Bearer <token>`` equal to :attr:`FakeNotion.token` (else 401
``unauthorized``); nothing else is checked (not even ``Notion-Version``).

Build content with the block helpers (:func:`paragraph`, :func:`heading`, :func:`bulleted`, …;
more in :mod:`standins.notion_content`) and :meth:`FakeNotion.add_page`; Notion-hosted files
(``type: "file"``) are answered with a new signed URL and ``expiry_time`` every time; inject
faults with :meth:`FakeNotion.fail`; count requests with :attr:`FakeNotion.calls`. Serve it with
:class:`standins.server.BackgroundServer`::

    fake = FakeNotion(token="secret_test")
    page_id = fake.add_page(title="Hello", blocks=[paragraph("world")])
    with BackgroundServer(fake.app()) as server:
        ...  # AsyncClient(auth="secret_test", base_url=server.url)
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = [
    "DEMO_DATABASE_ID",
    "DEMO_PAGE_ID",
    "DEMO_TOKEN",
    "ENDPOINTS",
    "BlockSpec",
    "FakeNotion",
    "Fault",
    "block",
    "bookmark",
    "bulleted",
    "callout",
    "child_database",
    "child_page",
    "code",
    "date_property",
    "divider",
    "embed",
    "equation",
    "file",
    "heading",
    "image",
    "numbered",
    "paragraph",
    "people_property",
    "quote",
    "rich_text",
    "select_property",
    "status_property",
    "table",
    "text",
    "title_property",
    "to_do",
    "toggle",
]

#: The endpoint names used by :attr:`FakeNotion.calls` and :meth:`FakeNotion.fail`
#: (named after the ``notion-client`` methods that call them).
ENDPOINTS = (
    "pages.retrieve",
    "blocks.retrieve",
    "blocks.children.list",
    "databases.retrieve",
    "data_sources.retrieve",
)

#: The page of ``examples/notion/page.*.json`` and the database of
#: ``examples/notion/database.schema_updated.json``; :meth:`FakeNotion.demo` seeds both.
DEMO_PAGE_ID = "153104cd-477e-809d-8dc4-ff2d96ae3090"
DEMO_DATABASE_ID = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"
#: The token :meth:`FakeNotion.demo` accepts (set ``NOTION_TOKEN`` to it).
DEMO_TOKEN = "secret_debounce_demo_token"

_DEFAULT_USER = "c7c11cca-1d73-471d-9b6e-bdef51470190"
_DEFAULT_TIME = "2026-11-20T23:55:00.000Z"
_ID_NAMESPACE = uuid.UUID("6f1d3c2a-8b7e-4f5a-9c0d-1e2f3a4b5c6d")

#: Default ``code`` of an injected fault per HTTP status
#: (https://developers.notion.com/reference/status-codes).
_DEFAULT_CODES: dict[int, str] = {
    400: "validation_error",
    401: "unauthorized",
    403: "restricted_resource",
    404: "object_not_found",
    409: "conflict_error",
    429: "rate_limited",
    500: "internal_server_error",
    503: "service_unavailable",
    504: "gateway_timeout",
}
_DEFAULT_MESSAGES: dict[str, str] = {
    "validation_error": "body failed validation.",
    "unauthorized": "API token is invalid.",
    "restricted_resource": "Insufficient permissions for this endpoint.",
    "object_not_found": (
        "Could not find object. Make sure the relevant pages and databases are shared with "
        "your integration."
    ),
    "conflict_error": "Conflict occurred while saving. Please try again.",
    "rate_limited": "You have been rate limited. Please try again in a few minutes.",
    "internal_server_error": "Unexpected error occurred.",
    "service_unavailable": "Notion is unavailable, please try again later.",
    "gateway_timeout": "Notion timed out while processing the request.",
}

#: A block as the helpers build it: the Notion block body (``{"type": t, t: {...}}``) plus an
#: optional ``"children"`` list of more specs. :meth:`FakeNotion.add_page` turns specs into
#: full block objects with ids, parents, timestamps and ``has_children``.
BlockSpec = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Rich text and block builders (shapes: https://developers.notion.com/reference/rich-text and
# https://developers.notion.com/reference/block)
# --------------------------------------------------------------------------------------------


def text(
    content: str,
    *,
    bold: bool = False,
    italic: bool = False,
    strikethrough: bool = False,
    underline: bool = False,
    code: bool = False,
    link: str | None = None,
) -> dict[str, Any]:
    """One rich text object of type ``text`` with the given annotations and optional link."""
    return {
        "type": "text",
        "text": {"content": content, "link": {"url": link} if link else None},
        "annotations": {
            "bold": bold,
            "italic": italic,
            "strikethrough": strikethrough,
            "underline": underline,
            "code": code,
            "color": "default",
        },
        "plain_text": content,
        "href": link,
    }


def rich_text(value: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rich text array: a plain string becomes one unannotated ``text`` item; a sequence of
    rich text objects (from :func:`text`) is copied as is."""
    if isinstance(value, str):
        return [text(value)] if value else []
    return [copy.deepcopy(item) for item in value]


RichTextInput = str | Sequence[dict[str, Any]]


def block(
    block_type: str, data: Mapping[str, Any], children: Iterable[BlockSpec] = ()
) -> BlockSpec:
    """A block spec of any ``block_type`` with body ``data`` (use it for types without a
    helper, or for unknown types to test placeholders)."""
    spec: BlockSpec = {"type": block_type, block_type: dict(data)}
    kids = list(children)
    if kids:
        spec["children"] = kids
    return spec


def _text_block(
    block_type: str, value: RichTextInput, children: Iterable[BlockSpec], **extra: Any
) -> BlockSpec:
    return block(block_type, {"rich_text": rich_text(value), "color": "default", **extra}, children)


def paragraph(value: RichTextInput = "", *children: BlockSpec) -> BlockSpec:
    """A ``paragraph`` block (nested ``children`` are allowed, as in Notion)."""
    return _text_block("paragraph", value, children)


def heading(level: int, value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``heading_1`` … ``heading_4`` block; children make it a toggle heading."""
    if level not in (1, 2, 3, 4):
        raise ValueError(f"heading level must be 1, 2, 3 or 4, got {level}")
    return _text_block(f"heading_{level}", value, children, is_toggleable=bool(children))


def bulleted(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``bulleted_list_item`` block with optional nested children."""
    return _text_block("bulleted_list_item", value, children)


def numbered(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``numbered_list_item`` block with optional nested children."""
    return _text_block("numbered_list_item", value, children)


def to_do(value: RichTextInput, checked: bool = False, *children: BlockSpec) -> BlockSpec:
    """A ``to_do`` block."""
    return _text_block("to_do", value, children, checked=checked)


def toggle(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``toggle`` block; its content is its children."""
    return _text_block("toggle", value, children)


def quote(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``quote`` block."""
    return _text_block("quote", value, children)


def callout(value: RichTextInput, emoji: str | None = "💡", *children: BlockSpec) -> BlockSpec:
    """A ``callout`` block with an emoji icon (``None``: no icon)."""
    icon = {"type": "emoji", "emoji": emoji} if emoji else None
    return _text_block("callout", value, children, icon=icon)


def code(source: str, language: str = "plain text", caption: RichTextInput = "") -> BlockSpec:
    """A ``code`` block; ``language`` is one of Notion's names ("python", "plain text", …)."""
    return block(
        "code",
        {"rich_text": rich_text(source), "language": language, "caption": rich_text(caption)},
    )


def divider() -> BlockSpec:
    """A ``divider`` block."""
    return block("divider", {})


def equation(expression: str) -> BlockSpec:
    """An ``equation`` block holding a KaTeX ``expression``."""
    return block("equation", {"expression": expression})


def table(
    rows: Sequence[Sequence[RichTextInput]], *, column_header: bool = True, row_header: bool = False
) -> BlockSpec:
    """A ``table`` block whose children are ``table_row`` blocks, one per row of cells."""
    width = max((len(r) for r in rows), default=0)
    row_specs = [
        block("table_row", {"cells": [rich_text(c) for c in row] + [[]] * (width - len(row))})
        for row in rows
    ]
    return block(
        "table",
        {"table_width": width, "has_column_header": column_header, "has_row_header": row_header},
        row_specs,
    )


def _file_body(url: str, caption: RichTextInput, *, hosted: bool) -> dict[str, Any]:
    if hosted:
        return {
            "type": "file",
            "file": {"url": url, "expiry_time": "2026-11-21T00:55:00.000Z"},
            "caption": rich_text(caption),
        }
    return {"type": "external", "external": {"url": url}, "caption": rich_text(caption)}


def image(url: str, caption: RichTextInput = "", *, hosted: bool = False) -> BlockSpec:
    """An ``image`` block (``hosted``: a Notion-hosted file with an expiring URL)."""
    return block("image", _file_body(url, caption, hosted=hosted))


def file(
    url: str, name: str = "", caption: RichTextInput = "", *, hosted: bool = True
) -> BlockSpec:
    """A ``file`` block (an attachment) with an optional file ``name``."""
    body = _file_body(url, caption, hosted=hosted)
    if name:
        body["name"] = name
    return block("file", body)


def bookmark(url: str, caption: RichTextInput = "") -> BlockSpec:
    """A ``bookmark`` block."""
    return block("bookmark", {"url": url, "caption": rich_text(caption)})


def embed(url: str, caption: RichTextInput = "") -> BlockSpec:
    """An ``embed`` block."""
    return block("embed", {"url": url, "caption": rich_text(caption)})


def child_page(title: str, page_id: str | None = None) -> BlockSpec:
    """A ``child_page`` block (``page_id``: the id it gets, so it can match a page you add)."""
    spec = block("child_page", {"title": title})
    if page_id:
        spec["id"] = page_id
    return spec


def child_database(title: str, database_id: str | None = None) -> BlockSpec:
    """A ``child_database`` block (``database_id``: the id it gets)."""
    spec = block("child_database", {"title": title})
    if database_id:
        spec["id"] = database_id
    return spec


# Page property values (https://developers.notion.com/reference/page-property-values).


def title_property(value: RichTextInput) -> dict[str, Any]:
    """A ``title`` property value."""
    return {"id": "title", "type": "title", "title": rich_text(value)}


def select_property(name: str | None, prop_id: str = "sel") -> dict[str, Any]:
    """A ``select`` property value (``None``: empty)."""
    value = {"id": f"opt-{name}", "name": name, "color": "default"} if name else None
    return {"id": prop_id, "type": "select", "select": value}


def status_property(name: str, prop_id: str = "XGe%40") -> dict[str, Any]:
    """A ``status`` property value."""
    return {
        "id": prop_id,
        "type": "status",
        "status": {"id": f"opt-{name}", "name": name, "color": "default"},
    }


def date_property(start: str, end: str | None = None, prop_id: str = "dat") -> dict[str, Any]:
    """A ``date`` property value (ISO 8601 ``start``/``end``)."""
    return {
        "id": prop_id,
        "type": "date",
        "date": {"start": start, "end": end, "time_zone": None},
    }


def people_property(*user_ids: str, prop_id: str = "ppl") -> dict[str, Any]:
    """A ``people`` property value of partial users."""
    return {
        "id": prop_id,
        "type": "people",
        "people": [{"object": "user", "id": u} for u in user_ids],
    }


# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """An injected answer for the next ``remaining`` requests to ``endpoint`` (``"*"``: any)
    about ``object_id`` (``None``: any object).

    ``status`` is the HTTP status; ``code``/``message`` the Notion error body; ``headers``
    extra response headers (``Retry-After`` for a 429). A status of 502 answers a non-JSON
    gateway page, as a proxy in front of Notion does.
    """

    endpoint: str
    status: int
    code: str
    message: str
    remaining: int
    object_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def _norm_id(raw: str) -> str | None:
    """Canonical dashed lower-case form of a Notion id (dashed or compact), or ``None``."""
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def _compact(object_id: str) -> str:
    return object_id.replace("-", "")


def _user(user_id: str) -> dict[str, Any]:
    return {"object": "user", "id": user_id}


def _slug(title: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return "-".join(words)


class FakeNotion:
    """State of a fake Notion workspace plus the Starlette app that serves it.

    ``token`` is the only bearer token accepted. ``page_size_cap`` caps every block-children
    page below Notion's 100 so tests can exercise pagination with few blocks.

    Attributes:
        pages: page objects by id (as ``GET /v1/pages/{id}`` answers them).
        blocks: block objects by id.
        children: ordered child block ids by parent id (a page or a block).
        databases: database objects by id; data_sources: data source objects by id.
        calls: requests received per endpoint name (see :data:`ENDPOINTS`), counted before
            authentication and fault injection.
        faults: pending injected faults, matched in order.
    """

    def __init__(
        self, token: str = "secret_fake_notion_token", *, page_size_cap: int = 100
    ) -> None:
        if not 1 <= page_size_cap <= 100:
            raise ValueError("page_size_cap must be between 1 and 100")
        self.token = token
        self.page_size_cap = page_size_cap
        self.pages: dict[str, dict[str, Any]] = {}
        self.blocks: dict[str, dict[str, Any]] = {}
        self.children: dict[str, list[str]] = {}
        self.databases: dict[str, dict[str, Any]] = {}
        self.data_sources: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._seq = 0

    # -- building content ----------------------------------------------------------------

    def _new_id(self, hint: str) -> str:
        self._seq += 1
        return str(uuid.uuid5(_ID_NAMESPACE, f"{hint}/{self._seq}"))

    def add_page(
        self,
        page_id: str | None = None,
        *,
        title: RichTextInput = "Untitled",
        blocks: Iterable[BlockSpec] = (),
        parent: Mapping[str, Any] | None = None,
        properties: Mapping[str, dict[str, Any]] | None = None,
        title_name: str = "title",
        created_by: str = _DEFAULT_USER,
        last_edited_by: str = _DEFAULT_USER,
        created_time: str = _DEFAULT_TIME,
        last_edited_time: str = _DEFAULT_TIME,
        in_trash: bool = False,
        icon: str | None = None,
    ) -> str:
        """Add (or replace) a page and its content; returns its id.

        ``parent`` is a Notion parent object (default ``{"type": "workspace", "workspace":
        true}``); ``properties`` extra property values besides the title property named
        ``title_name`` ("title" for pages outside databases, e.g. "Name" inside one).
        """
        pid = _norm_id(page_id) if page_id else self._new_id("page")
        if pid is None:
            raise ValueError(f"not a Notion id: {page_id!r}")
        props: dict[str, Any] = {title_name: title_property(title)}
        props.update(copy.deepcopy(dict(properties or {})))
        plain = "".join(i["plain_text"] for i in props[title_name]["title"])
        self.pages[pid] = {
            "object": "page",
            "id": pid,
            "created_time": created_time,
            "last_edited_time": last_edited_time,
            "created_by": _user(created_by),
            "last_edited_by": _user(last_edited_by),
            "cover": None,
            "icon": {"type": "emoji", "emoji": icon} if icon else None,
            "parent": dict(parent) if parent else {"type": "workspace", "workspace": True},
            "archived": in_trash,
            "in_trash": in_trash,
            "is_locked": False,
            "properties": props,
            "url": f"https://www.notion.so/{_slug(plain)}-{_compact(pid)}".replace("/-", "/"),
            "public_url": None,
        }
        self.set_blocks(pid, blocks)
        return pid

    def set_blocks(self, parent_id: str, specs: Iterable[BlockSpec]) -> list[str]:
        """Replace the children of page or block ``parent_id`` with ``specs`` (recursively);
        returns the new top-level block ids."""
        pid = _norm_id(parent_id) or parent_id
        for old in self.children.pop(pid, []):
            self._drop_block(old)
        parent = (
            {"type": "page_id", "page_id": pid}
            if pid in self.pages
            else {"type": "block_id", "block_id": pid}
        )
        ids: list[str] = []
        for spec in specs:
            spec = copy.deepcopy(spec)
            kids = spec.pop("children", [])
            bid = spec.pop("id", None) or self._new_id(f"block/{pid}")
            btype = spec["type"]
            self.blocks[bid] = {
                "object": "block",
                "id": bid,
                "parent": parent,
                "created_time": _DEFAULT_TIME,
                "last_edited_time": _DEFAULT_TIME,
                "created_by": _user(_DEFAULT_USER),
                "last_edited_by": _user(_DEFAULT_USER),
                "has_children": bool(kids),
                "archived": False,
                "in_trash": False,
                "type": btype,
                btype: spec.get(btype, {}),
            }
            ids.append(bid)
            if kids:
                self.set_blocks(bid, kids)
        self.children[pid] = ids
        return ids

    def _drop_block(self, block_id: str) -> None:
        for kid in self.children.pop(block_id, []):
            self._drop_block(kid)
        self.blocks.pop(block_id, None)

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
        last_edited_time: str = _DEFAULT_TIME,
    ) -> str:
        """Add a database with one data source; returns the database id.

        ``schema`` maps property names to Notion property types (default ``{"Name":
        "title"}``); ``options`` gives option names of select/multi_select/status properties.
        The data source's id is ``data_source_id`` or derived from the database id.
        """
        did = _norm_id(database_id) if database_id else self._new_id("database")
        if did is None:
            raise ValueError(f"not a Notion id: {database_id!r}")
        dsid = _norm_id(data_source_id) if data_source_id else self._new_id(f"ds/{did}")
        assert dsid is not None
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
            "archived": False,
            "is_locked": False,
            "created_time": _DEFAULT_TIME,
            "last_edited_time": last_edited_time,
            "created_by": _user(_DEFAULT_USER),
            "last_edited_by": _user(_DEFAULT_USER),
            "data_sources": [{"id": dsid, "name": data_source_name or plain}],
            "icon": None,
            "cover": None,
            "url": f"https://www.notion.so/{_compact(did)}",
            "public_url": None,
        }
        props: dict[str, Any] = {}
        for n, (name, ptype) in enumerate((schema or {"Name": "title"}).items()):
            config: dict[str, Any] = {}
            if ptype in ("select", "multi_select", "status"):
                config["options"] = [
                    {"id": f"opt-{o}", "name": o, "color": "default"}
                    for o in (options or {}).get(name, ())
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
            "archived": False,
            "created_time": _DEFAULT_TIME,
            "last_edited_time": last_edited_time,
            "created_by": _user(_DEFAULT_USER),
            "last_edited_by": _user(_DEFAULT_USER),
            "icon": None,
            "cover": None,
            "url": f"https://www.notion.so/{_compact(dsid)}",
            "public_url": None,
        }
        return did

    def set_trashed(self, object_id: str, in_trash: bool = True) -> None:
        """Move a page or database to the trash (``in_trash``/``archived`` true) or back."""
        oid = _norm_id(object_id) or object_id
        target = self.pages.get(oid) or self.databases.get(oid) or self.data_sources.get(oid)
        if target is None:
            raise KeyError(object_id)
        target["in_trash"] = in_trash
        target["archived"] = in_trash

    def touch(self, page_id: str, last_edited_time: str) -> None:
        """Set a page's ``last_edited_time`` (ISO 8601, e.g. ``2026-11-21T08:00:00.000Z``)."""
        self.pages[_norm_id(page_id) or page_id]["last_edited_time"] = last_edited_time

    def remove(self, object_id: str) -> None:
        """Delete a page, block, database or data source outright: it answers 404 from now."""
        oid = _norm_id(object_id) or object_id
        self.pages.pop(oid, None)
        self.databases.pop(oid, None)
        self.data_sources.pop(oid, None)
        self._drop_block(oid)

    # -- faults ----------------------------------------------------------------------------

    def fail(
        self,
        endpoint: str = "*",
        status: int = 500,
        *,
        times: int = 1,
        code: str | None = None,
        message: str | None = None,
        retry_after: float | str | None = None,
        object_id: str | None = None,
    ) -> Fault:
        """Answer the next ``times`` requests to ``endpoint`` (one of :data:`ENDPOINTS` or
        ``"*"``), optionally only those about ``object_id``, with an error.

        ``code`` defaults from ``status`` (429 → ``rate_limited``, 404 → ``object_not_found``,
        401 → ``unauthorized``, 500 → ``internal_server_error``, 503 → ``service_unavailable``,
        …); ``retry_after`` (seconds, or an HTTP date string) becomes the ``Retry-After`` header.
        """
        if endpoint != "*" and endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}; one of {ENDPOINTS} or '*'")
        resolved = code or _DEFAULT_CODES.get(status, "internal_server_error")
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = (
                retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
            )
        fault = Fault(
            endpoint=endpoint,
            status=status,
            code=resolved,
            message=message or _DEFAULT_MESSAGES.get(resolved, "Unexpected error occurred."),
            remaining=times,
            object_id=_norm_id(object_id) if object_id else None,
            headers=headers,
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def _take_fault(self, endpoint: str, object_id: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.endpoint not in ("*", endpoint):
                    continue
                if fault.object_id is not None and fault.object_id != object_id:
                    continue
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    # -- HTTP ------------------------------------------------------------------------------

    @staticmethod
    def _error(
        status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> Response:
        body = {
            "object": "error",
            "status": status,
            "code": code,
            "message": message,
            "request_id": str(uuid.uuid4()),
        }
        return JSONResponse(body, status_code=status, headers=dict(headers or {}))

    def _guard(self, request: Request, endpoint: str, raw_id: str) -> Response | str:
        """Count, authenticate, validate the id, apply faults; returns the id or an answer."""
        with self._lock:
            self.calls[endpoint] += 1
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return self._error(401, "unauthorized", "API token is invalid.")
        object_id = _norm_id(raw_id)
        if object_id is None:
            return self._error(
                400, "validation_error", f"path failed validation: {raw_id!r} is not a valid uuid."
            )
        fault = self._take_fault(endpoint, object_id)
        if fault is not None:
            if fault.status == 502:
                return PlainTextResponse("<html>502 Bad Gateway</html>", status_code=502)
            return self._error(fault.status, fault.code, fault.message, fault.headers)
        return object_id

    @staticmethod
    def _json(body: dict[str, Any]) -> Response:
        """A JSON answer in which Notion-hosted files carry a freshly signed URL and
        ``expiry_time``, different on every response, as Notion's do."""
        from standins.notion_content import resign_files  # it builds on this module

        return JSONResponse(resign_files(body))

    def _not_found(self, object_id: str) -> Response:
        return self._error(
            404,
            "object_not_found",
            f"Could not find object with ID: {object_id}. Make sure the relevant pages and "
            "databases are shared with your integration.",
        )

    async def _pages_retrieve(self, request: Request) -> Response:
        got = self._guard(request, "pages.retrieve", request.path_params["page_id"])
        if isinstance(got, Response):
            return got
        if got in self.databases:
            return self._error(
                400,
                "validation_error",
                f"Provided ID {got} is a database, not a page. Use the retrieve database API "
                "instead.",
            )
        page = self.pages.get(got)
        return self._json(page) if page is not None else self._not_found(got)

    async def _blocks_retrieve(self, request: Request) -> Response:
        got = self._guard(request, "blocks.retrieve", request.path_params["block_id"])
        if isinstance(got, Response):
            return got
        found = self.blocks.get(got)
        return self._json(found) if found is not None else self._not_found(got)

    async def _blocks_children(self, request: Request) -> Response:
        got = self._guard(request, "blocks.children.list", request.path_params["block_id"])
        if isinstance(got, Response):
            return got
        if got not in self.pages and got not in self.blocks:
            return self._not_found(got)
        raw_size = request.query_params.get("page_size", "100")
        try:
            page_size = int(raw_size)
        except ValueError:
            page_size = 0
        if not 1 <= page_size <= 100:
            return self._error(
                400,
                "validation_error",
                f"body failed validation: page_size should be between 1 and 100, "
                f"instead was `{raw_size}`.",
            )
        ids = self.children.get(got, [])
        start = 0
        cursor = request.query_params.get("start_cursor")
        if cursor:
            if cursor not in ids:
                return self._error(400, "validation_error", f"Invalid start_cursor: {cursor}")
            start = ids.index(cursor)
        size = min(page_size, self.page_size_cap)
        chunk = ids[start : start + size]
        has_more = start + size < len(ids)
        return self._json(
            {
                "object": "list",
                "results": [self.blocks[i] for i in chunk],
                "next_cursor": ids[start + size] if has_more else None,
                "has_more": has_more,
                "type": "block",
                "block": {},
                "request_id": str(uuid.uuid4()),
            }
        )

    async def _databases_retrieve(self, request: Request) -> Response:
        got = self._guard(request, "databases.retrieve", request.path_params["database_id"])
        if isinstance(got, Response):
            return got
        if got in self.pages:
            return self._error(
                400,
                "validation_error",
                f"Provided ID {got} is a page, not a database. Use the retrieve page API instead.",
            )
        found = self.databases.get(got)
        return JSONResponse(found) if found is not None else self._not_found(got)

    async def _data_sources_retrieve(self, request: Request) -> Response:
        got = self._guard(request, "data_sources.retrieve", request.path_params["data_source_id"])
        if isinstance(got, Response):
            return got
        found = self.data_sources.get(got)
        return JSONResponse(found) if found is not None else self._not_found(got)

    async def _unknown(self, request: Request) -> Response:
        return self._error(400, "invalid_request_url", "Invalid request URL.")

    def app(self) -> Starlette:
        """The Starlette app serving this state under ``/v1/`` (state changes show at once)."""
        return Starlette(
            routes=[
                Route("/v1/pages/{page_id}", self._pages_retrieve, methods=["GET"]),
                Route("/v1/blocks/{block_id}/children", self._blocks_children, methods=["GET"]),
                Route("/v1/blocks/{block_id}", self._blocks_retrieve, methods=["GET"]),
                Route("/v1/databases/{database_id}", self._databases_retrieve, methods=["GET"]),
                Route(
                    "/v1/data_sources/{data_source_id}",
                    self._data_sources_retrieve,
                    methods=["GET"],
                ),
                Route(
                    "/{path:path}",
                    self._unknown,
                    methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
                ),
            ]
        )

    # -- demo content ----------------------------------------------------------------------

    @classmethod
    def demo(cls, token: str = DEMO_TOKEN) -> FakeNotion:
        """A fake seeded with realistic content: page :data:`DEMO_PAGE_ID` (the page of
        ``examples/notion/page.*.json``) with headings, lists, a to-do list, code, a table and
        a child database, and database :data:`DEMO_DATABASE_ID` (with one row page)."""
        fake = cls(token=token)
        fake.add_database(
            DEMO_DATABASE_ID,
            title="Launch tasks",
            description="Everything that has to happen before the public launch.",
            schema={
                "Name": "title",
                "Status": "status",
                "Owner": "people",
                "Due": "date",
                "Area": "multi_select",
            },
            options={
                "Status": ["Not started", "In progress", "Done"],
                "Area": ["Backend", "Docs", "Ops"],
            },
            parent={"type": "page_id", "page_id": DEMO_PAGE_ID},
            data_source_id="2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20",
            data_source_name="Launch tasks",
        )
        fake.add_page(
            "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
            title="Ship webhook debouncing",
            title_name="Name",
            parent={
                "type": "data_source_id",
                "data_source_id": "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20",
                "database_id": DEMO_DATABASE_ID,
            },
            properties={
                "Status": status_property("In progress"),
                "Owner": people_property(_DEFAULT_USER),
                "Due": date_property("2026-12-01"),
            },
            blocks=[paragraph("One sync per page per burst of edits.")],
        )
        fake.add_page(
            DEMO_PAGE_ID,
            title="Launch plan",
            icon="🚀",
            last_edited_time="2026-11-20T23:55:00.000Z",
            blocks=[
                callout("This page is served by debounce's local Notion stand-in.", "💡"),
                heading(1, "Goals"),
                paragraph(
                    [
                        text("Sync every edited page "),
                        text("once", bold=True),
                        text(" per burst of edits, not "),
                        text("fifty times", italic=True),
                        text(". See the "),
                        text("design notes", link="https://example.com/design"),
                        text(" and "),
                        text("debounce_seconds", code=True),
                        text("."),
                    ]
                ),
                heading(2, "Checklist"),
                to_do("Verify the webhook signature", True),
                to_do("Debounce events per page", True),
                to_do("Render Markdown", False),
                heading(2, "How a sync works"),
                numbered("Retrieve the page"),
                numbered(
                    "Walk its blocks",
                    bulleted("follow pagination", bulleted("100 blocks per request")),
                    bulleted("recurse into children"),
                ),
                numbered("Write one document"),
                code('print("hello from debounce")', "python"),
                quote("Latest payload wins."),
                toggle("Details", paragraph("Retries back off exponentially with jitter.")),
                divider(),
                heading(3, "Limits"),
                table(
                    [
                        ["Source", "Debounce", "Max wait"],
                        ["Notion", "300 s", "3600 s"],
                        ["Slack", "30 s", "300 s"],
                    ]
                ),
                equation("t_{sync} = \\min(t_{last} + w, t_{first} + m)"),
                bookmark("https://developers.notion.com/reference/webhooks", "Notion webhooks"),
                child_database("Launch tasks", DEMO_DATABASE_ID),
            ],
        )
        return fake
