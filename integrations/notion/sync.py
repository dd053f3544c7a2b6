"""The Notion syncer: sync one page, database or data source into ``documents``.

One ``pages.retrieve`` (https://developers.notion.com/reference/retrieve-a-page), then the
content through ``pages.retrieve_markdown`` (:mod:`.markdown`: one request, plus one per
unknown block of a truncated page); where that endpoint does not serve (403 without the
read-content capability, 404/400, other 4xx), the block tree through ``blocks.children.list``
(https://developers.notion.com/reference/get-block-children, 100 per request, paged with the
SDK's ``async_collect_paginated_api``), rendered to Markdown by :mod:`.render`; or
``databases.retrieve`` + ``data_sources.retrieve``
(https://developers.notion.com/reference/database, .../data-source) for a database.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from notion_client.errors import APIErrorCode, APIResponseError
from notion_client.helpers import async_collect_paginated_api

from debounce.contract import BackfillPage, Document, FileRef, SyncContext, SyncJob, SyncResult, WriteOutcome
from debounce.contract.markdown import enhanced_tags, might_have_enhanced_tags
from integrations.notion.audience import audience_of_event
from integrations.notion.backfill import NotionBackfill
from integrations.notion.client import _WRONG_KIND_CODES, NotionCall, NotionClient, _code, api_error
from integrations.notion.comments import comments_markdown, list_comments, split_comments, with_comments
from integrations.notion.datasource import sync_data_source
from integrations.notion.files import (
    MARKDOWN_LOCATOR,
    files_of_blocks,
    files_of_markdown,
    files_of_properties,
    fresh_url,
    hosted_files,
    refresh_file,
)
from integrations.notion.markdown import converted, is_signed_url, raw_page_markdown
from integrations.notion.properties import (
    page_properties,
    parent_summary,
    parse_time,
    schema_markdown,
    schema_summary,
    title_of,
    user_id,
)
from integrations.notion.refusals import EndpointRefusals
from integrations.notion.render import _NO_RECURSE, BlockNode, render_blocks
from integrations.notion.richtext import plain_text, render_rich_text
from integrations.notion.settings import NotionSettings
from integrations.notion.webhook import _COMMENT_PREFIX, _ENTITY_PREFIXES

log = logging.getLogger("integrations.notion")

__all__ = ["SOURCE_TYPE", "NotionSyncer", "create"]

SOURCE_TYPE = "notion"


class NotionSyncer:
    """The Notion syncer (worker): sync one page, database or data source into the context's
    store; also the source's :class:`~debounce.contract.Backfillable` (``search``).

    Built from its typed settings, it composes what it needs: the SDK clients and the retry
    policy (:class:`~integrations.notion.client.NotionClient`: ``retry_delays``,
    ``max_inline_wait``, ``timeout_seconds``), the listing
    (:class:`~integrations.notion.backfill.NotionBackfill`) and the markdown path
    (:func:`~integrations.notion.markdown.page_markdown`). ``page_size`` is the block-children
    page size (Notion's maximum, 100).

    What a page sync asks for (:meth:`_plan`, docs/notion.md "Which event asks for what"): a
    bulk job still carrying its listing's page object costs the markdown request and the
    comments (:mod:`.comments`); a live job whose events all said ``content`` costs the
    markdown request (title, properties and comments kept from the stored document),
    ``properties`` the page object alone, ``comments`` the comments alone, ``audience`` (a
    ``page.permissions_updated`` carrying ``accessible_by``) nothing; a re-sync or a job whose
    events said nothing or something structural: the page object, the content and the
    comments; a page without a stored document: the page object and the content.
    A data source syncs with the table of its rows (:mod:`.datasource`).

    ``object_not_found`` for the page/database itself, or ``in_trash``: success, the document
    is marked deleted. Every request, the in-process retries included, is charged to the
    workspace's budget and every read is kept in the sync's checkpoint (its
    :class:`~debounce.contract.SyncContext`).
    """

    source_type = SOURCE_TYPE

    def __init__(
        self,
        settings: NotionSettings,
        *,
        retry_delays: Sequence[float] = (0.5, 2.0),
        max_inline_wait: float = 1.0,
        timeout_seconds: float = 30.0,
        page_size: int = 100,
        ask_what_changed: bool = True,
        refusals: EndpointRefusals | None = None,
    ) -> None:
        self.settings = settings
        self.client = NotionClient(
            settings,
            retry_delays=retry_delays,
            max_inline_wait=max_inline_wait,
            timeout_seconds=timeout_seconds,
        )
        self.backfill = NotionBackfill(self.client)
        self.page_size = page_size
        #: Use the listing's page object and the job's change kinds (issue 31); ``False``:
        #: every page sync asks for both halves (the behaviour before, kept for the
        #: benchmarks' "before").
        self.ask_what_changed = ask_what_changed
        #: Workspaces whose token the markdown endpoint refused (:mod:`.refusals`).
        self.refusals = refusals if refusals is not None else EndpointRefusals()
        #: Workspaces whose token the comments endpoint refused (no read-comments capability).
        self.comment_refusals = EndpointRefusals(endpoint="comments-endpoint")
        #: Pages whose stored content was found holding enhanced-Markdown tags (warned once).
        self._warned_dialect: set[str] = set()

    async def backfill_page(
        self, cursor: str | None, context: SyncContext, *, newest_first: bool = False
    ) -> BackfillPage:
        """One page of what the context's token can see
        (:meth:`~integrations.notion.backfill.NotionBackfill.backfill_page`)."""
        return await self.backfill.backfill_page(cursor, context, newest_first=newest_first)

    async def aclose(self) -> None:
        """Close the SDK clients' HTTP connection pools (idempotent)."""
        await self.client.aclose()

    async def _walk(self, call: NotionCall, block_id: str, depth: int = 0) -> list[BlockNode]:
        """All children of ``block_id``, recursively (``has_children``), in order; the pages
        are collected with ``async_collect_paginated_api``. A nested block that vanished
        mid-walk (404) becomes a childless node rather than failing the sync."""
        bound = call.bound(call.api.blocks.children.list)
        try:
            results = await async_collect_paginated_api(bound, block_id=block_id, page_size=self.page_size)
        except APIResponseError as exc:
            if depth > 0 and _code(exc) == APIErrorCode.ObjectNotFound.value:
                return []
            raise
        nodes: list[BlockNode] = []
        for item in results:
            if not isinstance(item, dict):
                continue
            node = BlockNode(item)
            if item.get("has_children") and node.type not in _NO_RECURSE and depth < 64:
                node.children = await self._walk(call, str(item["id"]), depth + 1)
            nodes.append(node)
        return nodes

    def _check_dialect(self, page_id: str, content: str) -> None:
        """Log a warning, once per page for the life of this instance, when ``content`` still
        holds raw tags of Notion's enhanced Markdown (:func:`enhanced_tags`; a regular
        expression first, so a clean page costs no parse). The content is stored anyway."""
        if page_id in self._warned_dialect or not might_have_enhanced_tags(content):
            return
        tags = enhanced_tags(content)
        if tags:
            self._warned_dialect.add(page_id)
            log.warning(
                "notion: page %s: its Markdown keeps enhanced-Markdown tags %s "
                "(stored as is; see docs/notion.md, One Markdown)",
                page_id,
                ", ".join(f"<{t}>" for t in tags),
            )

    # -- sync ----------------------------------------------------------------------------

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        """Fetch the job's page (or database / data source) and write its document to
        ``context.store``, with the context's token, meter and checkpoint.

        The kind comes from the payload's ``entity.type`` (``comment.*`` events → page); a
        payload without one (a manual re-sync) tries the page, then the database, then the
        data source. One ``pages.retrieve`` per page sync.

        Raises:
            RateLimited: Notion answered 429 with a long ``Retry-After``.
            PermanentError: no ``NOTION_TOKEN``; ``unauthorized``/``restricted_resource``;
                the request itself is invalid.
            Exception: 5xx after in-process retries, timeouts, connection errors (retry).
        """
        context.writer()  # a sync needs a store (RuntimeError otherwise)
        call = self.client.bind(context)
        api = call.api
        object_id = job.source_page_id
        kind = _entity_kind(job.payload)
        try:
            if kind == "page":
                return await self._sync_page_job(call, job)
            if kind == "database":
                db = await call.fetch(api.databases.retrieve, database_id=object_id)
                return await self._sync_database(call, job, db)
            if kind == "data_source":
                return await self._sync_data_source(call, job, None)
            return await self._sync_unknown(call, job)
        except APIResponseError as exc:
            mapped = api_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise

    async def _sync_unknown(self, call: NotionCall, job: SyncJob) -> SyncResult:
        """Manual re-sync of an id of unknown kind: page, else database, else data source."""
        api = call.api
        object_id = job.source_page_id
        attempts: list[tuple[str, Callable[..., Any], str]] = [
            ("page", api.pages.retrieve, "page_id"),
            ("database", api.databases.retrieve, "database_id"),
            ("data_source", api.data_sources.retrieve, "data_source_id"),
        ]
        for kind, fn, arg in attempts:
            try:
                params: dict[str, Any] = {arg: object_id}
                found = await call.call(fn, **params)
            except APIResponseError as exc:
                if _code(exc) in _WRONG_KIND_CODES:
                    continue
                raise
            if kind == "page":
                return await self._sync_page(call, job, found)
            if kind == "database":
                return await self._sync_database(call, job, found)
            return await self._sync_data_source(call, job, found)
        return await self._deleted(call, job)  # not found as a page, database or data source

    @staticmethod
    async def _deleted(
        call: NotionCall, job: SyncJob, *, why: str = "answered object_not_found"
    ) -> SyncResult:
        """Mark the page's documents deleted (the service may hold the deletion: then it
        stays live and is not counted as deleted). ``why``: what Notion answered."""
        marked = await call.context.writer().mark_page_deleted(SOURCE_TYPE, job.source_page_id, why=why)
        return SyncResult(deleted=len(marked))

    @staticmethod
    async def _write(
        call: NotionCall, job: SyncJob, doc: Document, files: tuple[FileRef, ...] | None = None
    ) -> SyncResult:
        """Write ``doc`` with its audience: the workspace, and the ``accessible_by`` of the
        job's latest event (:mod:`integrations.notion.audience`); ``files``: the files it
        shows (``None``: not reported)."""
        doc = dataclasses.replace(doc, audience=audience_of_event(job.payload))
        outcome = await call.context.writer().upsert(doc)
        if outcome is WriteOutcome.UNCHANGED:
            return SyncResult(unchanged=1, files=files)
        return SyncResult(written=1, files=files)

    async def _plan(self, call: NotionCall, job: SyncJob) -> _Plan:
        """What this page sync asks for (the class docstring; docs/notion.md)."""
        kinds = frozenset(job.change_kinds)
        # The comments are read by a bulk job (backfill, reconciliation: priority < 0), a
        # re-sync (> 0), an event that said a comment changed, or events that said nothing
        # (page.created, page.moved, …: "everything", which absorbs a comment event of the same
        # burst); else the stored ones are kept.
        comments = not kinds or job.priority != 0 or "comments" in kinds
        everything = _Plan(
            page=None,
            stored=None,
            fetch_page=True,
            fetch_content=True,
            fetch_comments=comments and self.ask_what_changed,
        )
        if not self.ask_what_changed:
            return everything
        listing = _listing(job.payload)
        if listing is None and (not kinds or not kinds <= _PARTIAL_KINDS or job.priority > 0):
            return everything  # nothing (or something structural) said, or a re-sync
        stored = await call.context.writer().current(SOURCE_TYPE, job.source_page_id)
        if listing is not None:
            listed = parse_time(listing.get("last_edited_time"))
            known = stored.source_updated_at if stored is not None else None
            if known is not None and (listed is None or listed < known):
                # The stored document is newer than the listing (a sync since): the listing
                # would take its properties back in time.
                return everything
            return _Plan(
                page=listing, stored=stored, fetch_page=False, fetch_content=True, fetch_comments=True
            )
        if stored is None:
            return everything  # nothing stored to keep the other half from
        return _Plan(
            page=None,
            stored=stored,
            fetch_page="properties" in kinds,
            fetch_content="content" in kinds,
            fetch_comments="comments" in kinds,
        )

    async def _comments(self, call: NotionCall, job: SyncJob, page_id: str) -> tuple[str, int]:
        """The page's ``## Comments`` section (:mod:`.comments`) and its comment count; the
        connection without the read-comments capability (403, remembered per workspace as the
        markdown endpoint's refusals are): ``("", 0)``."""
        refusals = self.comment_refusals
        if await refusals.refused(call.context, job.workspace_id, call.token):
            return "", 0
        try:
            found = await list_comments(call, page_id)
        except APIResponseError as exc:
            if exc.status != 403:
                raise
            await refusals.remember(call.context, job.workspace_id, call.token, f"{exc.status} {_code(exc)}")
            return "", 0
        await refusals.forget(call.context, job.workspace_id)
        return comments_markdown(found), len(found)

    async def _sync_page_job(self, call: NotionCall, job: SyncJob) -> SyncResult:
        """A page job: the requests :meth:`_plan` chose, then the document."""
        plan = await self._plan(call, job)
        page = plan.page
        if plan.fetch_page:
            page = await call.fetch(call.api.pages.retrieve, page_id=job.source_page_id)
            if page is None:
                return await self._deleted(call, job)  # not found (deleted or unshared)
        if page is not None:
            return await self._sync_page(call, job, page, plan)
        # Content, comments or audience only: the page object is the stored document's.
        assert plan.stored is not None
        stored = plan.stored
        try:
            body, section, counts, files = await self._body_and_comments(call, job, job.source_page_id, plan)
        except APIResponseError as exc:
            if _code(exc) == APIErrorCode.ObjectNotFound.value:
                return await self._deleted(call, job)
            raise
        content, chars = with_comments(body, section)
        known = stored.source_updated_at
        edited = parse_time(job.payload.get("timestamp")) if plan.fetch_content else None
        doc = dataclasses.replace(
            stored,
            source_page_id=job.source_page_id,
            content=content,
            metadata={**stored.metadata, "comments": {**counts, "chars": chars}},
            # A body edit: the event's time (Notion's own last_edited_time is the minute of
            # the last edit, so this is never older); never back in time.
            source_updated_at=max(t for t in (edited, known) if t is not None) if edited or known else None,
        )
        return await self._write(call, job, doc, files)

    async def _body_and_comments(
        self, call: NotionCall, job: SyncJob, page_id: str, plan: _Plan | None
    ) -> tuple[str, str, dict[str, int], tuple[FileRef, ...] | None]:
        """The body, the comments section, ``{"discussions", "comments"}`` counts and the
        body's files (as :meth:`_content` finds them; ``None`` when the body was not fetched):
        each fetched if the plan says so (no plan: both), else the stored document's."""
        stored = plan.stored if plan is not None else None
        if plan is not None and not plan.fetch_comments and stored is None:
            # A sync of everything but the comments keeps the stored ones.
            stored = await call.context.writer().current(SOURCE_TYPE, page_id)
        kept_body, kept_section = (
            split_comments(stored.content, stored.metadata) if stored is not None else ("", "")
        )
        kept = stored.metadata.get("comments") if stored is not None else None
        counts = (
            {k: int(v) for k, v in kept.items() if k in ("discussions", "comments") and isinstance(v, int)}
            if isinstance(kept, dict)
            else {}
        )
        fetch_content = plan is None or plan.fetch_content or stored is None
        fetch_comments = plan is None or plan.fetch_comments
        body, files = await self._content(call, job, page_id) if fetch_content else (kept_body, None)
        section = kept_section
        if fetch_comments:
            section, total = await self._comments(call, job, page_id)
            counts = {"discussions": section.count("\n### Discussion "), "comments": total}
        return body, section, counts, files

    async def _content(
        self, call: NotionCall, job: SyncJob, page_id: str
    ) -> tuple[str, tuple[FileRef, ...] | None]:
        """The page's body as stored Markdown: the markdown endpoint, else the block walk;
        and the files the body shows (:mod:`.files`: the endpoint's file tags, or the block
        walk's file and media blocks)."""
        raw = await raw_page_markdown(call, page_id, self.refusals, job.workspace_id)
        if raw is not None:
            content = await converted(raw, page_id)
            files = hosted_files(files_of_markdown(raw, page_id, is_signed_url))
        else:  # the markdown endpoint does not serve: the block walk
            nodes = await self._walk(call, page_id)
            content = render_blocks(nodes, page_id=page_id)
            files = hosted_files(files_of_blocks(nodes, page_id))
        self._check_dialect(page_id, content)
        return content, files

    async def refresh_file(self, ref: FileRef, context: SyncContext) -> FileRef:
        """``ref`` with a fresh URL (:class:`~debounce.contract.FileRefresher`), for a file job
        whose presigned URL expired: its block (:func:`.files.refresh_file`: one
        ``blocks.retrieve``), its page's ``files`` property (one ``pages.retrieve``), or the
        page's Markdown again (the markdown endpoint: one request, more for a page it
        truncates); ``url`` ``None`` when the page no longer shows it.

        Raises:
            As :meth:`sync`.
        """
        call = self.client.bind(context)
        try:
            if ref.locator and ref.locator.startswith(MARKDOWN_LOCATOR):
                page_id = ref.locator.removeprefix(MARKDOWN_LOCATOR)
                raw = await raw_page_markdown(call, page_id, self.refusals, cache=False)
                found = files_of_markdown(raw, ref.parent_document_id, is_signed_url) if raw else []
                return fresh_url(ref, found)
            return await refresh_file(call, ref)
        except APIResponseError as exc:
            mapped = api_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise

    async def _sync_page(
        self,
        call: NotionCall,
        job: SyncJob,
        page: dict[str, Any] | None,
        plan: _Plan | None = None,
    ) -> SyncResult:
        if page is None:
            return await self._deleted(call, job)  # page not found (deleted or no longer shared)
        if page.get("in_trash") or page.get("archived"):
            return await self._deleted(call, job, why="were in the trash")  # page is in the trash
        page_id = str(page.get("id") or job.source_page_id)
        body, section, counts, files = await self._body_and_comments(call, job, page_id, plan)
        content, chars = with_comments(body, section)
        raw_props = page.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        created_by = user_id(page.get("created_by"))
        edited_by = user_id(page.get("last_edited_by"))
        if files is not None:  # the body's files, then the files properties'
            files = hosted_files([*files, *files_of_properties(props, page_id)])
        metadata: dict[str, Any] = {
            "object": "page",
            "parent": parent_summary(page.get("parent")),
            "created_by": created_by,
            "last_edited_by": edited_by,
            "authors": sorted({i for i in (created_by, edited_by) if i}),
            "created_time": page.get("created_time"),
            "properties": page_properties(props),
            "comments": {**counts, "chars": chars},
        }
        doc = Document(
            source_type=SOURCE_TYPE,
            document_id=page_id,
            source_page_id=job.source_page_id,
            title=title_of(page) or "Untitled",
            content=content,
            url=page.get("url") if isinstance(page.get("url"), str) else None,
            metadata=metadata,
            source_updated_at=parse_time(page.get("last_edited_time")),
        )
        return await self._write(call, job, doc, files)

    async def _sync_database(self, call: NotionCall, job: SyncJob, db: dict[str, Any] | None) -> SyncResult:
        if db is None:
            return await self._deleted(call, job)  # database not found (deleted or no longer shared)
        if db.get("in_trash") or db.get("archived"):
            return await self._deleted(call, job, why="were in the trash")
        db_id = str(db.get("id") or job.source_page_id)
        title = plain_text(db.get("title")).strip() or "Untitled database"
        lines: list[str] = []
        description = render_rich_text(db.get("description"))
        if description:
            lines += [description, ""]
        refs = [r for r in db.get("data_sources") or [] if isinstance(r, dict) and r.get("id")]
        schemas: dict[str, dict[str, str]] = {}
        for ref in refs:
            ds = await call.fetch(call.api.data_sources.retrieve, data_source_id=str(ref["id"]))
            name = str(ref.get("name") or (plain_text(ds.get("title")) if ds else "") or ref["id"])
            lines += [f"## {name}", ""]
            if ds is None:
                lines += ["(data source not shared with the integration)", ""]
                continue
            lines += [*schema_markdown(ds), ""]
            schemas[name] = schema_summary(ds)
        if "properties" in db:  # databases retrieved with an API version before 2025-09-03
            lines += [*schema_markdown(db), ""]
            schemas[title] = schema_summary(db)
        metadata: dict[str, Any] = {
            "object": "database",
            "parent": parent_summary(db.get("parent")),
            "created_by": user_id(db.get("created_by")),
            "last_edited_by": user_id(db.get("last_edited_by")),
            "data_sources": [{"id": r["id"], "name": r.get("name")} for r in refs],
            "schema": schemas,
        }
        doc = Document(
            source_type=SOURCE_TYPE,
            document_id=db_id,
            source_page_id=job.source_page_id,
            title=title,
            content="\n".join(lines).strip("\n") + "\n" if lines else "",
            url=db.get("url") if isinstance(db.get("url"), str) else None,
            metadata=metadata,
            source_updated_at=parse_time(db.get("last_edited_time")),
        )
        return await self._write(call, job, doc)

    async def _sync_data_source(
        self, call: NotionCall, job: SyncJob, ds: dict[str, Any] | None
    ) -> SyncResult:
        """The data source's document with its table (:mod:`.datasource`); ``ds``: the object
        when already fetched (``None``: fetched there, unless a rows sync needs none)."""
        rows_only = self.ask_what_changed and job.priority <= 0 and frozenset(job.change_kinds) == {"rows"}

        async def write(doc: Document) -> SyncResult:
            return await self._write(call, job, doc)

        async def deleted() -> SyncResult:
            return await self._deleted(call, job)

        return await sync_data_source(call, job, ds, rows_only=rows_only, write=write, deleted=deleted)


#: The kinds a page sync can fetch on their own (the rest, or none, mean everything).
#: ``comments``: the page's open discussions (``comment.*``); ``audience``: who may see it,
#: carried by the event itself (``page.permissions_updated`` with ``accessible_by``).
_PARTIAL_KINDS = frozenset({"content", "properties", "comments", "audience"})


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What one page sync asks for: ``page`` the page object it already has (a listing's),
    ``stored`` the stored document (kept for the half not fetched), and whether it fetches the
    page object and the content."""

    page: dict[str, Any] | None
    stored: Document | None
    fetch_page: bool
    fetch_content: bool
    fetch_comments: bool


def _listing(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The page object a bulk job's payload carries from its listing (``search``), if any."""
    listing = payload.get("listing")
    if isinstance(listing, dict) and listing.get("object") == "page" and listing.get("id"):
        return listing
    return None


def _entity_kind(payload: Mapping[str, Any]) -> str | None:
    """``"page"``, ``"database"``, ``"data_source"`` or ``None`` (unknown: try each)."""
    event_type = payload.get("type")
    if isinstance(event_type, str) and event_type.startswith(_COMMENT_PREFIX):
        return "page"
    entity = payload.get("entity")
    kind = entity.get("type") if isinstance(entity, dict) else None
    if kind in ("page", "database", "data_source"):
        return str(kind)
    if isinstance(event_type, str):
        for prefix in _ENTITY_PREFIXES:
            if event_type.startswith(prefix):
                return prefix[:-1]
    return None


def create(settings: NotionSettings) -> NotionSyncer:
    """The source's syncer factory (``Source.create``)."""
    return NotionSyncer(settings)
