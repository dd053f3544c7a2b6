"""A local stand-in of the Notion API, for the tests and ``debounce serve --demo``.

It speaks the documented JSON shapes (Notion-Version 2025-09-03) of the few endpoints the
Notion integration calls through ``notion-client``:

- ``GET /v1/pages/{page_id}`` — a page object (https://developers.notion.com/reference/page,
  "Retrieve a page");
- ``GET /v1/blocks/{block_id}/children`` — a paginated list of block objects
  (https://developers.notion.com/reference/get-block-children): ``page_size`` (default 100,
  at most 100), ``start_cursor``; answers ``{"object": "list", "results": [...],
  "next_cursor": str | null, "has_more": bool, "type": "block", "block": {}}``;
- ``GET /v1/pages/{page_id}/markdown`` — the page as enhanced Markdown
  (:mod:`standins.notion_markdown`);
- ``GET /v1/blocks/{block_id}`` — one block object (https://developers.notion.com/reference/block);
- ``GET /v1/databases/{database_id}`` — a database object with its ``data_sources``
  (https://developers.notion.com/reference/database);
- ``GET /v1/data_sources/{data_source_id}`` — a data source with its property schema
  (https://developers.notion.com/reference/data-source);
- ``POST /v1/data_sources/{id}/query`` and ``GET /v1/comments`` (:mod:`standins.notion_rows`);
- ``GET /v1/users/me`` and ``POST /v1/oauth/token`` (:mod:`standins.notion_workspaces`);
- ``POST /v1/search`` — what a token can see, and bulk fixtures (:mod:`standins.notion_search`).

Errors are ``{"object": "error", "status": int, "code": str, "message": str}``
(https://developers.notion.com/reference/status-codes). Every request needs
``Authorization: Bearer <token>`` with a token of one of the fake's workspaces (else 401
``unauthorized``): :attr:`FakeNotion.token` for the default workspace, the token given to
:meth:`~FakeNotion.add_workspace` or one an OAuth exchange answered for another; an object of
another workspace than the token's answers 404 ``object_not_found``. Nothing else is checked
(not even ``Notion-Version``).

Build content with the block helpers (:func:`paragraph`, :func:`heading`, :func:`bulleted`, …;
more in :mod:`standins.notion_content`) and :meth:`FakeNotion.add_page`; Notion-hosted files
(``type: "file"``) are answered with a new signed URL and ``expiry_time`` every time; inject
faults with :meth:`FakeNotion.fail`; count requests with :attr:`FakeNotion.calls`; limit and count
a workspace's requests with :meth:`~FakeNotion.set_budget` and :meth:`~FakeNotion.usage`
(:mod:`standins.notion_budgets`). Serve it with
:class:`standins.server.BackgroundServer`::

    fake = FakeNotion(token="secret_test")
    page_id = fake.add_page(title="Hello", blocks=[paragraph("world")])
    with BackgroundServer(fake.app()) as server:
        ...  # AsyncClient(auth="secret_test", base_url=server.url)
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from standins.notion_blocks import (
    BlockSpec,
    RichTextInput,
    block,
    bookmark,
    bulleted,
    callout,
    child_database,
    child_page,
    code,
    date_property,
    divider,
    embed,
    equation,
    file,
    heading,
    image,
    numbered,
    paragraph,
    people_property,
    quote,
    rich_text,
    select_property,
    status_property,
    table,
    text,
    title_property,
    to_do,
    toggle,
)
from standins.notion_budgets import NotionBudgets
from standins.notion_content import resign_files
from standins.notion_databases import NotionDatabases
from standins.notion_demo import (
    DEMO_DATABASE_ID,
    DEMO_PAGE_ID,
    DEMO_SECOND_PAGE_ID,
    DEMO_SECOND_TOKEN,
    DEMO_SECOND_WORKSPACE_ID,
    DEMO_SECOND_WORKSPACE_NAME,
    DEMO_TOKEN,
    seed_demo,
)
from standins.notion_http import (
    DEFAULT_TIME,
    DEFAULT_USER,
    Fault,
    compact,
    error_response,
    norm_id,
    not_found,
    take_fault,
)
from standins.notion_markdown import NotionMarkdown
from standins.notion_rows import NotionRows
from standins.notion_search import NotionSearch
from standins.notion_workspaces import Grant, NotionWorkspaces

__all__ = [
    "DEMO_DATABASE_ID",
    "DEMO_PAGE_ID",
    "DEMO_SECOND_PAGE_ID",
    "DEMO_SECOND_TOKEN",
    "DEMO_SECOND_WORKSPACE_ID",
    "DEMO_SECOND_WORKSPACE_NAME",
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
#: (named after the ``notion-client`` methods that call them). ``POST /v1/oauth/token`` is
#: counted as ``calls["oauth.token"]`` but takes no injected faults.
ENDPOINTS = (
    "pages.retrieve",
    "pages.markdown",
    "blocks.retrieve",
    "blocks.children.list",
    "databases.retrieve",
    "data_sources.retrieve",
    "data_sources.query",
    "comments.list",
    "users.me",
    "search",
)

_ID_NAMESPACE = uuid.UUID("6f1d3c2a-8b7e-4f5a-9c0d-1e2f3a4b5c6d")

# --------------------------------------------------------------------------------------------
# The fake
# --------------------------------------------------------------------------------------------


def _user(user_id: str) -> dict[str, Any]:
    return {"object": "user", "id": user_id}


def _slug(title: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return "-".join(words)


class FakeNotion(NotionSearch, NotionBudgets, NotionDatabases, NotionMarkdown, NotionRows, NotionWorkspaces):
    """State of fake Notion workspaces plus the Starlette app that serves them.

    ``token`` is the token of the default workspace (:attr:`workspace_id`), which holds every
    object added without a ``workspace_id``; add more workspaces with :meth:`add_workspace`
    (see :class:`~standins.notion_workspaces.NotionWorkspaces` for them, OAuth and
    revocation). ``page_size_cap`` caps every block-children page below Notion's 100 so tests
    can exercise pagination with few blocks. ``clock`` (seconds, monotonic) times the API
    budgets and usage counts (:mod:`standins.notion_budgets`); tests pass a
    :class:`standins.budgets.ManualClock`.

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
        self,
        token: str = "secret_fake_notion_token",
        *,
        page_size_cap: int = 100,
        clock: Callable[[], float] = time.monotonic,
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
        #: Comment objects (:meth:`add_comment`), resolved ones included.
        self.comments: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._seq = 0
        self._init_workspaces(token)
        self._init_budgets(clock)

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
        created_by: str = DEFAULT_USER,
        last_edited_by: str = DEFAULT_USER,
        created_time: str = DEFAULT_TIME,
        last_edited_time: str = DEFAULT_TIME,
        in_trash: bool = False,
        icon: str | None = None,
        workspace_id: str | None = None,
    ) -> str:
        """Add (or replace) a page and its content; returns its id.

        ``parent`` is a Notion parent object (default ``{"type": "workspace", "workspace":
        true}``); ``properties`` extra property values besides the title property named
        ``title_name`` ("title" for pages outside databases, e.g. "Name" inside one).
        ``workspace_id``: the workspace it belongs to (default: its parent's if the fake holds
        the parent, else the default workspace).
        """
        pid = norm_id(page_id) if page_id else self._new_id("page")
        if pid is None:
            raise ValueError(f"not a Notion id: {page_id!r}")
        self._owners[pid] = self._workspace_for(workspace_id, parent)
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
            "in_trash": in_trash,  # 2026-03-11: `archived` is gone (renamed in_trash)
            "is_locked": False,
            "properties": props,
            "url": f"https://www.notion.so/{_slug(plain)}-{compact(pid)}".replace("/-", "/"),
            "public_url": None,
        }
        self.set_blocks(pid, blocks)
        return pid

    def set_blocks(self, parent_id: str, specs: Iterable[BlockSpec]) -> list[str]:
        """Replace the children of page or block ``parent_id`` with ``specs`` (recursively);
        returns the new top-level block ids."""
        pid = norm_id(parent_id) or parent_id
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
            self._owners[bid] = self._owners.get(pid, self.workspace_id)
            self.blocks[bid] = {
                "object": "block",
                "id": bid,
                "parent": parent,
                "created_time": DEFAULT_TIME,
                "last_edited_time": DEFAULT_TIME,
                "created_by": _user(DEFAULT_USER),
                "last_edited_by": _user(DEFAULT_USER),
                "has_children": bool(kids),
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
        self._owners.pop(block_id, None)

    def set_trashed(self, object_id: str, in_trash: bool = True) -> None:
        """Move a page or database to the trash (``in_trash`` true) or back."""
        oid = norm_id(object_id) or object_id
        target = self.pages.get(oid) or self.databases.get(oid) or self.data_sources.get(oid)
        if target is None:
            raise KeyError(object_id)
        target["in_trash"] = in_trash

    def touch(self, page_id: str, last_edited_time: str) -> None:
        """Set a page's ``last_edited_time`` (ISO 8601, e.g. ``2026-11-21T08:00:00.000Z``)."""
        self.pages[norm_id(page_id) or page_id]["last_edited_time"] = last_edited_time

    def remove(self, object_id: str) -> None:
        """Delete a page, block, database or data source outright: it answers 404 from now."""
        oid = norm_id(object_id) or object_id
        self.pages.pop(oid, None)
        self.databases.pop(oid, None)
        self.data_sources.pop(oid, None)
        self._owners.pop(oid, None)
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
        fault = Fault.build(endpoint, status, times, code, message, retry_after, norm_id(object_id or ""))
        with self._lock:
            self.faults.append(fault)
        return fault

    def _take_fault(self, endpoint: str, object_id: str) -> Fault | None:
        with self._lock:
            return take_fault(self.faults, endpoint, object_id)

    # -- HTTP ------------------------------------------------------------------------------

    _error = staticmethod(error_response)
    _not_found = staticmethod(not_found)

    def _admit(self, request: Request, endpoint: str, raw_id: str | None) -> Response | tuple[Grant, str]:
        """Count, authenticate, charge the workspace's budget, validate the id (``None``:
        none), apply faults; returns the token's grant and the id, or an answer."""
        with self._lock:
            self.calls[endpoint] += 1
        grant = self._grant_for(request.headers.get("authorization"))
        if grant is None:
            return self._error(401, "unauthorized", "API token is invalid.")
        refused = self._spend(grant.workspace_id, endpoint)  # the workspace's budget
        if refused is not None:
            return refused
        object_id = norm_id(raw_id) if raw_id is not None else ""
        if object_id is None:
            return self._error(
                400, "validation_error", f"path failed validation: {raw_id!r} is not a valid uuid."
            )
        fault = self._take_fault(endpoint, object_id)
        if fault is not None:
            if fault.status == 502:
                return PlainTextResponse("<html>502 Bad Gateway</html>", status_code=502)
            return self._error(fault.status, fault.code, fault.message, fault.headers)
        return grant, object_id

    def _guard(self, request: Request, endpoint: str, raw_id: str) -> Response | str:
        """:meth:`_admit`, then 404 for an object of another workspace; returns the id or an
        answer."""
        got = self._admit(request, endpoint, raw_id)
        if isinstance(got, Response):
            return got
        grant, object_id = got
        return object_id if self._visible(grant, object_id) else self._not_found(object_id)

    @staticmethod
    def _json(body: dict[str, Any]) -> Response:
        """A JSON answer in which Notion-hosted files carry a freshly signed URL and
        ``expiry_time``, different on every response, as Notion's do."""
        return JSONResponse(resign_files(body))

    async def _users_me(self, request: Request) -> Response:
        got = self._admit(request, "users.me", None)
        return got if isinstance(got, Response) else JSONResponse(self._bot_user(got[0]))

    async def _pages_retrieve(self, request: Request) -> Response:
        got = self._guard(request, "pages.retrieve", request.path_params["page_id"])
        if isinstance(got, Response):
            return got
        if got in self.databases:
            return self._error(
                400,
                "validation_error",
                f"Provided ID {got} is a database, not a page. Use the retrieve database API instead.",
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
                f"body failed validation: page_size should be between 1 and 100, instead was `{raw_size}`.",
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
                Route("/v1/pages/{page_id}/markdown", self._pages_markdown, methods=["GET"]),
                Route("/v1/blocks/{block_id}/children", self._blocks_children, methods=["GET"]),
                Route("/v1/blocks/{block_id}", self._blocks_retrieve, methods=["GET"]),
                Route("/v1/databases/{database_id}", self._databases_retrieve, methods=["GET"]),
                Route("/v1/data_sources/{data_source_id}", self._data_sources_retrieve, methods=["GET"]),
                *self._routes_rows(),
                Route("/v1/users/me", self._users_me, methods=["GET"]),
                Route("/v1/search", self._search, methods=["POST"]),
                Route("/v1/oauth/token", self._oauth_token, methods=["POST"]),
                Route("/{path:path}", self._unknown, methods=["GET", "POST", "PATCH", "PUT", "DELETE"]),
            ]
        )

    # -- demo content ----------------------------------------------------------------------

    @classmethod
    def demo(cls, token: str = DEMO_TOKEN) -> FakeNotion:
        """A fake seeded with realistic content (:mod:`standins.notion_demo`): in the default
        workspace (``token``), page :data:`DEMO_PAGE_ID` (the page of
        ``examples/notion/page.*.json``) with headings, lists, a to-do list, code, a table and
        a child database, and database :data:`DEMO_DATABASE_ID` (with one row page); in a
        second workspace, :data:`DEMO_SECOND_WORKSPACE_ID` (token
        :data:`DEMO_SECOND_TOKEN`), page :data:`DEMO_SECOND_PAGE_ID`."""
        fake = cls(token=token)
        seed_demo(fake)
        return fake
