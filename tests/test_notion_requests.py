"""Every Notion request counts (issue 31): a backfilled page costs one request (its listing's
page object travels with the bulk job), a live sync asks for what its events said changed
(kinds merged by the enqueue), and the markdown endpoint's refusal is remembered per workspace.

The real ``notion-client`` against the stand-in on loopback, the real enqueue statement and a
real Postgres; requests are counted by the stand-in (``FakeNotion.calls``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from one_job import mark_completed
from psycopg.rows import dict_row

from debounce import queue
from debounce.contract import SyncContext
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent, SyncJob
from integrations.notion import NotionSettings, NotionSyncer
from integrations.notion.refusals import EndpointRefusals
from integrations.notion.webhook import EVENT_KINDS
from standins.notion_api import FakeNotion, paragraph, status_property
from standins.server import BackgroundServer

TOKEN = "secret_test_notion_requests"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "notion"
Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
def fake() -> FakeNotion:
    return FakeNotion(token=TOKEN)


@pytest.fixture
def server(fake: FakeNotion) -> Iterator[BackgroundServer]:
    with BackgroundServer(fake.app()) as srv:
        yield srv


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
def context(store: DocumentStore) -> SyncContext:
    return SyncContext(store=store)


@pytest.fixture
def settings(server: BackgroundServer) -> NotionSettings:
    return NotionSettings(notion_token=TOKEN, notion_base_url=server.url)


@pytest.fixture
async def notion(settings: NotionSettings) -> AsyncIterator[NotionSyncer]:
    syncer = NotionSyncer(settings, retry_delays=(0.0, 0.0))
    yield syncer
    await syncer.aclose()


def event(event_type: str, page: str, timestamp: str, event_id: str | None = None) -> dict[str, Any]:
    """A Notion webhook event of ``event_type`` for ``page`` (the example's shape)."""
    return {
        "id": event_id or str(uuid.uuid4()),
        "timestamp": timestamp,
        "type": event_type,
        "workspace_id": "13950b26-c203-4f3b-b97d-93ec06319565",
        "entity": {"id": page, "type": "page"},
        "data": {},
    }


async def enqueue(conn: Conn, page: str, *events: dict[str, Any], priority: int = 0) -> SyncJob:
    """Enqueue ``events`` for ``page`` through the real statement (one batch); returns the
    page's active job as a claim would hand it to the sync."""
    await queue.enqueue(
        conn,
        [
            JobEvent(
                "notion",
                page,
                e,
                e.get("id"),
                0,
                0,
                priority=priority,
                kinds=EVENT_KINDS.get(str(e.get("type")), ()),
            )
            for e in events
        ],
    )
    return await active_job(conn, page)


async def active_job(conn: Conn, page: str) -> SyncJob:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select * from sync_jobs where source_page_id = %s and status in ('pending', 'processing')",
            (page,),
        )
        row = await cur.fetchone()
    assert row is not None
    return SyncJob.from_row(row)


def requests(fake: FakeNotion) -> dict[str, int]:
    return {k: v for k, v in fake.calls.items() if v}


async def full_sync(notion: NotionSyncer, conn: Conn, context: SyncContext, page: str) -> None:
    """A first sync of ``page`` (no stored document: both halves), its job finished."""
    job = await enqueue(
        conn, page, event("page.created", page, "2026-11-20T23:55:00.000Z", event_id=f"created-{page}")
    )
    await notion.sync(job, context)
    await mark_completed(conn, job.id)


# -- the enqueue merges what the events said ---------------------------------------------


async def test_the_enqueue_merges_the_kinds_of_a_burst(conn: Conn) -> None:
    page = "0a000000-0000-4000-8000-000000000001"
    t = "2026-11-21T08:00:00.000Z"
    job = await enqueue(conn, page, event("page.content_updated", page, t, "a"))
    assert job.change_kinds == ("content",) and job.to_json()["change_kinds"] == ["content"]
    job = await enqueue(conn, page, event("page.content_updated", page, t, "b"))
    assert job.change_kinds == ("content",)
    job = await enqueue(conn, page, event("page.properties_updated", page, t, "c"))
    assert job.change_kinds == ("content", "properties")
    # one batch mixing both, on a fresh page
    other = "0a000000-0000-4000-8000-000000000002"
    job = await enqueue(
        conn,
        other,
        event("page.properties_updated", other, t, "d"),
        event("page.content_updated", other, t, "e"),
    )
    assert job.change_kinds == ("content", "properties") and job.event_count == 2
    # an event that says nothing (page.moved: structural) absorbs: everything
    job = await enqueue(conn, page, event("page.moved", page, t, "f"))
    assert job.change_kinds == ()
    job = await enqueue(conn, page, event("page.content_updated", page, t, "g"))
    assert job.change_kinds == ()


# -- a live sync asks for what changed ----------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "asked"),
    [
        ("page.content_updated", {"pages.markdown": 1}),
        ("page.properties_updated", {"pages.retrieve": 1}),
        ("page.locked", {"pages.retrieve": 1}),
        ("page.created", {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}),
        ("page.moved", {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}),
        ("page.undeleted", {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}),
        ("comment.created", {"comments.list": 1}),
    ],
)
async def test_each_event_kind_asks_for_what_it_changed(
    fake: FakeNotion,
    notion: NotionSyncer,
    conn: Conn,
    context: SyncContext,
    store: DocumentStore,
    event_type: str,
    asked: dict[str, int],
) -> None:
    page = fake.add_page(
        title="Plan", blocks=[paragraph("First body.")], properties={"Status": status_property("Draft")}
    )
    await full_sync(notion, conn, context, page)
    fake.calls.clear()
    # The page changes both halves silently; the event says which one it reports.
    fake.edit_page(page, text="Second body.", title="Plan v2", edited_at="2026-11-21T08:00:00.000Z")
    payload = event(event_type, page, "2026-11-21T08:00:31.500Z")
    if event_type.startswith("comment."):
        payload["data"] = {"page_id": page}
    job = await enqueue(conn, page, payload)
    await notion.sync(job, context)
    assert requests(fake) == asked
    doc = await store.get("notion", page)
    assert doc is not None
    content_fetched = "pages.markdown" in asked
    page_fetched = "pages.retrieve" in asked
    assert doc["content"] == ("Second body.\n" if content_fetched else "First body.\n")
    assert doc["title"] == ("Plan v2" if page_fetched else "Plan")
    if page_fetched:
        assert doc["source_updated_at"] == datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    elif not content_fetched:
        # comments only: neither half of the page read, its edit time kept
        assert doc["source_updated_at"] == datetime(2026, 11, 20, 23, 55, tzinfo=UTC)
    else:
        # content only: the recorded edit time is the event's, so a reconciliation
        # (which compares last_edited_time) does not see the document as stale
        assert doc["source_updated_at"] == datetime(2026, 11, 21, 8, 0, 31, 500000, tzinfo=UTC)
        assert doc["source_updated_at"] >= datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


async def test_a_deleted_page_costs_its_page_object_only(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(title="Gone soon", blocks=[paragraph("Body.")])
    await full_sync(notion, conn, context, page)
    fake.calls.clear()
    fake.set_trashed(page)
    job = await enqueue(conn, page, event("page.deleted", page, "2026-11-21T08:00:00.000Z"))
    result = await notion.sync(job, context)
    assert result.deleted == 1 and requests(fake) == {"pages.retrieve": 1}


async def test_content_only_of_a_page_gone_marks_it_deleted(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext
) -> None:
    page = fake.add_page(title="Unshared soon", blocks=[paragraph("Body.")])
    await full_sync(notion, conn, context, page)
    fake.unshare(page)
    job = await enqueue(conn, page, event("page.content_updated", page, "2026-11-21T08:00:00.000Z"))
    assert (await notion.sync(job, context)).deleted == 1


async def test_a_burst_mixing_kinds_syncs_the_union(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(title="Plan", blocks=[paragraph("First body.")])
    await full_sync(notion, conn, context, page)
    fake.calls.clear()
    fake.edit_page(page, text="Second body.", title="Plan v2", edited_at="2026-11-21T08:00:00.000Z")
    job = await enqueue(
        conn,
        page,
        event("page.content_updated", page, "2026-11-21T08:00:10.000Z", "a"),
        event("page.content_updated", page, "2026-11-21T08:00:20.000Z", "b"),
        event("page.properties_updated", page, "2026-11-21T08:00:30.000Z", "c"),
    )
    assert job.change_kinds == ("content", "properties") and job.event_count == 3
    await notion.sync(job, context)
    assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1}
    doc = await store.get("notion", page)
    assert doc is not None and (doc["title"], doc["content"]) == ("Plan v2", "Second body.\n")


async def test_a_resync_and_a_page_without_a_document_ask_for_both(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext
) -> None:
    page = fake.add_page(title="Plan", blocks=[paragraph("Body.")])
    # no stored document: the page object cannot be kept from it
    job = await enqueue(conn, page, event("page.content_updated", page, "2026-11-21T08:00:00.000Z", "a"))
    await notion.sync(job, context)
    assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1}
    await mark_completed(conn, None)
    fake.calls.clear()
    # a re-sync raised the job above a webhook's priority: everything, whatever was said
    job = await enqueue(
        conn, page, event("page.content_updated", page, "2026-11-21T08:01:00.000Z", "b"), priority=100
    )
    await notion.sync(job, context)
    # ... the comments too (a re-sync reads them)
    assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}


# -- backfill and reconciliation: the listing's page object -------------------------------


async def listed(notion: NotionSyncer, page: str) -> dict[str, Any]:
    """The bulk job payload the listing (search) gives ``page``."""
    found = await notion.backfill_page(None, SyncContext())
    return next(i.payload for i in found.items if i.source_page_id == page)


async def bulk_job(conn: Conn, page: str, payload: dict[str, Any]) -> SyncJob:
    """The bulk job a backfill enqueues (sql/queries/backfills.sql: priority < 0, no kinds)."""
    await queue.enqueue(conn, [JobEvent("notion", page, payload, None, 0, 0, priority=-10)])
    return await active_job(conn, page)


async def test_a_backfilled_page_costs_its_content_and_comments(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(
        title="Listed",
        blocks=[paragraph("Body.")],
        properties={"Status": status_property("Done")},
        last_edited_time="2026-11-21T07:00:00.000Z",
    )
    payload = await listed(notion, page)
    fake.calls.clear()
    await notion.sync(await bulk_job(conn, page, payload), context)
    # the listing's page object spares pages.retrieve; a backfill reads the comments
    assert requests(fake) == {"pages.markdown": 1, "comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and doc["title"] == "Listed" and doc["content"] == "Body.\n"
    assert doc["metadata"]["properties"] == {"Status": "Done"}
    assert doc["source_updated_at"] == datetime(2026, 11, 21, 7, 0, tzinfo=UTC)
    # the same document the two-request path writes
    fake.calls.clear()
    before = NotionSyncer(notion.settings, ask_what_changed=False)
    try:
        outcome = await before.sync(await active_job(conn, page), context)
    finally:
        await before.aclose()
    assert outcome.unchanged == 1 and requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1}


async def test_a_listing_object_overtaken_by_a_webhook(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(
        title="Listed", blocks=[paragraph("Body.")], last_edited_time="2026-11-21T07:00:00.000Z"
    )
    payload = await listed(notion, page)
    await bulk_job(conn, page, payload)
    # the page is edited and its webhook joins the pending bulk job: its payload replaces the
    # listing's, and the bulk job's "everything" absorbs the event's kind
    fake.edit_page(page, text="Edited.", title="Renamed", edited_at="2026-11-21T08:00:00.000Z")
    job = await enqueue(conn, page, event("page.content_updated", page, "2026-11-21T08:00:05.000Z"))
    assert "listing" not in job.payload and job.change_kinds == ()
    fake.calls.clear()
    await notion.sync(job, context)
    assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and (doc["title"], doc["content"]) == ("Renamed", "Edited.\n")


async def test_a_stale_listing_object_never_takes_a_document_back(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(
        title="Old title", blocks=[paragraph("Old body.")], last_edited_time="2026-11-21T07:00:00.000Z"
    )
    payload = await listed(notion, page)
    # a live sync wrote a newer state after the listing was taken
    fake.edit_page(page, text="New body.", title="New title", edited_at="2026-11-21T08:00:00.000Z")
    await full_sync(notion, conn, context, page)
    fake.calls.clear()
    await notion.sync(await bulk_job(conn, page, payload), context)
    # the listing is older than the document: the page object is asked for again
    assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and (doc["title"], doc["content"]) == ("New title", "New body.\n")
    assert doc["source_updated_at"] == datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


async def test_a_page_edited_after_its_listing_ends_at_its_latest_state(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(
        title="Old title", blocks=[paragraph("Old body.")], last_edited_time="2026-11-21T07:00:00.000Z"
    )
    payload = await listed(notion, page)
    # edited between the listing and the bulk job's sync, and its webhook was lost
    fake.edit_page(page, text="New body.", title="New title", edited_at="2026-11-21T08:00:00.000Z")
    job = await bulk_job(conn, page, payload)
    await notion.sync(job, context)
    doc = await store.get("notion", page)
    assert doc is not None and doc["content"] == "New body.\n"
    # the document records the listing's edit time, so the next reconciliation sees the page as stale
    # (sql/queries/backfills.sql judges by last_edited_time) and its bulk job syncs the rest
    assert doc["source_updated_at"] == datetime(2026, 11, 21, 7, 0, tzinfo=UTC)
    await mark_completed(conn, job.id)
    reconciliation = await notion.backfill_page(None, SyncContext(), newest_first=True)
    item = next(i for i in reconciliation.items if i.source_page_id == page)
    assert item.edited_at is not None and item.edited_at > doc["source_updated_at"]
    fake.calls.clear()
    await notion.sync(await bulk_job(conn, page, item.payload), context)
    assert requests(fake) == {"pages.markdown": 1, "comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and (doc["title"], doc["content"]) == ("New title", "New body.\n")
    assert doc["source_updated_at"] == datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


# -- the markdown endpoint's refusal is remembered per workspace ---------------------------


async def test_a_refused_markdown_endpoint_is_remembered_per_workspace(
    fake: FakeNotion, settings: NotionSettings, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    fake.deny_read_content()
    pages = [fake.add_page(title=f"P{i}", blocks=[paragraph(f"Body {i}.")]) for i in range(3)]
    now = [datetime(2026, 11, 21, 8, 0, tzinfo=UTC)]
    syncer = NotionSyncer(settings, retry_delays=(0.0, 0.0), refusals=EndpointRefusals(clock=lambda: now[0]))
    try:
        await syncer.sync(await enqueue(conn, pages[0], event("page.created", pages[0], "t")), context)
        # (page.created says nothing: everything, the comments too)
        assert requests(fake) == {
            "pages.retrieve": 1,
            "pages.markdown": 1,
            "blocks.children.list": 1,
            "comments.list": 1,
        }
        fake.calls.clear()
        await syncer.sync(await enqueue(conn, pages[1], event("page.created", pages[1], "t")), context)
        assert requests(fake) == {"pages.retrieve": 1, "blocks.children.list": 1, "comments.list": 1}
    finally:
        await syncer.aclose()
    # another worker process learns it from the database
    fake.calls.clear()
    other = NotionSyncer(settings, retry_delays=(0.0, 0.0), refusals=EndpointRefusals(clock=lambda: now[0]))
    try:
        job = await enqueue(conn, pages[2], event("page.created", pages[2], "t"))
        await other.sync(job, context)
        assert requests(fake) == {"pages.retrieve": 1, "blocks.children.list": 1, "comments.list": 1}
        # a day later the endpoint is asked again; granted meanwhile, it serves, and the
        # refusal is forgotten
        fake.deny_read_content(denied=False)
        now[0] += timedelta(days=1, seconds=1)
        fake.calls.clear()
        await other.sync(job, context)
        assert requests(fake) == {"pages.retrieve": 1, "pages.markdown": 1, "comments.list": 1}
        assert await store.get_state("notion", "~workspace/env/markdown-endpoint") == {}
    finally:
        await other.aclose()


async def test_a_new_token_asks_the_markdown_endpoint_again(
    fake: FakeNotion, settings: NotionSettings, conn: Conn, store: DocumentStore
) -> None:
    fake.deny_read_content()
    page = fake.add_page(title="P", blocks=[paragraph("Body.")])
    refusals = EndpointRefusals()
    syncer = NotionSyncer(settings, retry_delays=(0.0, 0.0), refusals=refusals)
    try:
        job = await enqueue(conn, page, event("page.created", page, "t"))
        await syncer.sync(job, SyncContext(store=store))
        assert await refusals.refused(SyncContext(store=store), None, TOKEN)
        assert not await refusals.refused(SyncContext(store=store), None, "secret_second_token")
    finally:
        await syncer.aclose()


def test_every_event_kind_is_in_the_table_of_docs_notion() -> None:
    documented = (Path(__file__).resolve().parent.parent / "docs" / "notion.md").read_text()
    table = documented[documented.index("### Which event asks for what") :]
    table = table[: table.index("\n\n- ")]
    for name in EVENT_KINDS:
        assert f"`{name}`" in table, name
    for path in EXAMPLES.glob("page.*.json"):
        assert f"`{json.loads(path.read_text())['type']}`" in table, path.name


# -- API version 2026-03-11: the shapes the stand-in answers --------------------------------


async def test_the_stand_in_answers_as_api_2026_03_11(
    fake: FakeNotion, server: BackgroundServer, notion: NotionSyncer
) -> None:
    import httpx

    from integrations.notion import NOTION_VERSION
    from standins.notion_content import EVERY_BLOCK_IDS, every_block_type

    assert NOTION_VERSION == "2026-03-11"
    assert notion.client.api(TOKEN).options.notion_version == "2026-03-11"
    page = fake.add_page(title="Shapes", blocks=every_block_type())
    fake.set_trashed(page)
    headers = {"Authorization": f"Bearer {TOKEN}", "Notion-Version": NOTION_VERSION}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as http:
        got = (await http.get(f"/v1/pages/{page}")).json()
        assert got["in_trash"] is True and "archived" not in got  # renamed in 2026-03-11
        fake.set_trashed(page, False)
        kids = (await http.get(f"/v1/blocks/{page}/children", params={"page_size": 100})).json()
        assert all("archived" not in b and "in_trash" in b for b in kids["results"])
        types = {b["type"] for b in kids["results"]}
        assert "meeting_notes" in types and "transcription" not in types
        meeting = next(b for b in kids["results"] if b["type"] == "meeting_notes")
        assert (
            meeting["meeting_notes"]["children"]["transcript_block_id"]
            == EVERY_BLOCK_IDS["meeting_transcript"]
        )
        plain = (await http.get(f"/v1/pages/{page}/markdown")).json()["markdown"]
        full = (await http.get(f"/v1/pages/{page}/markdown", params={"include_transcript": "true"})).json()[
            "markdown"
        ]
    assert "Notes taken during it." in plain and "good morning" not in plain
    assert "good morning, everyone" in full
