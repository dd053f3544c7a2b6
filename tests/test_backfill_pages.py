"""Backfill (``debounce.contract.backfill.Backfillable.backfill_page``) of both integrations, through
the real ``notion-client`` and ``slack_sdk`` against the stand-ins on loopback: complete
listings in pages, cursors that resume on another syncer object, ordering, what is left
out, errors, and that a discovered item's payload makes the sync fetch the right thing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from debounce.contract import (
    AuthRevoked,
    Backfillable,
    BackfillItem,
    BackfillPage,
    PermanentError,
    RateLimited,
    SyncContext,
)
from debounce.documents.store import DocumentStore
from debounce.types import JobStatus, SyncJob
from integrations.notion import NotionSettings, NotionSyncer
from integrations.slack import SlackSettings, SlackSyncer
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

N_TOKEN = "secret_discover_notion"
S_TOKEN = "xoxb-discover-slack"
OTHER_WORKSPACE = "7d3e1f0a-2b4c-4d6e-8f0a-1b2c3d4e5f60"


def job(source_type: str, item: BackfillItem) -> SyncJob:
    """The bulk job a backfill enqueues for ``item`` (its key and payload)."""
    now = datetime.now(UTC)
    return SyncJob(
        id=1,
        source_type=source_type,
        source_page_id=item.source_page_id,
        status=JobStatus.PROCESSING,
        payload=item.payload,
        event_id=None,
        event_count=1,
        priority=-10,
        attempts=1,
        max_attempts=5,
        scheduled_at=now,
        first_event_at=now,
        max_wait_until=now,
        retry_at=None,
        lease_expires_at=now,
        locked_by="test",
        lease_token="lease",
        revision=1,
        claimed_revision=1,
        last_error=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


async def walk(
    backfillable: Backfillable, cursor: str | None = None, *, newest_first: bool = False
) -> list[BackfillPage]:
    pages: list[BackfillPage] = []
    while True:
        page = await backfillable.backfill_page(cursor, SyncContext(), newest_first=newest_first)
        pages.append(page)
        cursor = page.cursor
        if cursor is None:
            return pages


@pytest.fixture
def context() -> SyncContext:
    """What the worker hands a backfill page (here no workspace, no meter; no store)."""
    return SyncContext()


# --------------------------------------------------------------------------------------------
# Notion
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> FakeNotion:
    fake = FakeNotion(token=N_TOKEN)
    fake.add_workspace(OTHER_WORKSPACE, "Other", "secret_other_workspace")
    return fake


@pytest.fixture
def notion_url(fake: FakeNotion) -> Iterator[str]:
    with BackgroundServer(fake.app()) as server:
        yield server.url


@pytest.fixture
def notion_settings(notion_url: str) -> NotionSettings:
    return NotionSettings(notion_token=N_TOKEN, notion_base_url=notion_url)


@pytest.fixture
async def notion(notion_settings: NotionSettings) -> AsyncIterator[NotionSyncer]:
    syncer = NotionSyncer(notion_settings, retry_delays=(0.0, 0.0))
    yield syncer
    await syncer.aclose()


def data_sources(fake: FakeNotion, n: int) -> list[str]:
    dbs = [
        fake.add_database(title=f"Tracker {i}", last_edited_time=f"2026-06-0{i + 1}T12:00:00.000Z")
        for i in range(n)
    ]
    return [fake.databases[d]["data_sources"][0]["id"] for d in dbs]


async def test_notion_lists_pages_and_data_sources_in_pages_of_100_resumable_elsewhere(
    fake: FakeNotion, notion: NotionSyncer, notion_settings: NotionSettings, context: SyncContext
) -> None:
    assert isinstance(notion, Backfillable)
    pages = fake.add_pages(250)
    sources = data_sources(fake, 3)
    fake.add_pages(5, OTHER_WORKSPACE)  # another workspace: never listed
    first = await notion.backfill_page(None, context)
    assert len(first.items) == 100 and first.cursor is not None
    # The backfill stops; another syncer object (another worker) goes on from the
    # stored cursor.
    other = NotionSyncer(notion_settings)
    try:
        rest = await walk(other, first.cursor)
    finally:
        await other.aclose()
    assert [len(p.items) for p in rest] == [100, 53] and rest[-1].cursor is None
    items = [*first.items, *rest[0].items, *rest[1].items]
    assert fake.calls["search"] == 3
    assert len({i.source_page_id for i in items}) == 253
    assert {i.source_page_id for i in items} == {*pages, *sources}
    # Ascending by last edit (the data sources were edited before every page).
    edits = [i.edited_at for i in items if i.edited_at is not None]
    assert len(edits) == 253 and all(e.utcoffset() == timedelta(0) for e in edits)
    assert edits == sorted(edits)
    kinds = {i.source_page_id: i.payload for i in items}
    assert kinds[pages[0]]["entity"] == {"id": pages[0], "type": "page"}
    # the listing's page object travels with the page's bulk job (issue 31): what its sync reads
    listing = kinds[pages[0]]["listing"]
    assert listing["id"] == pages[0] and listing["object"] == "page"
    assert {"properties", "last_edited_time", "parent", "url", "in_trash"} <= set(listing)
    assert kinds[sources[0]] == {"entity": {"id": sources[0], "type": "data_source"}}
    assert next(i for i in items if i.source_page_id == pages[7]).title == "Page 7"
    assert next(i for i in items if i.source_page_id == sources[2]).title == "Tracker 2"


async def test_notion_newest_first_follows_silent_edits(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    pages = fake.add_pages(120)
    listing = await walk(notion, newest_first=True)
    ids = [i.source_page_id for p in listing for i in p.items]
    assert ids == pages[::-1]
    stamp = fake.edit_page(pages[3])  # no webhook: only a reconciliation can see it
    head = (await notion.backfill_page(None, context, newest_first=True)).items
    assert head[0].source_page_id == pages[3]
    assert head[0].edited_at == datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert head[1].source_page_id == pages[-1]


async def test_notion_an_ascending_listing_edited_midway_misses_nothing(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    pages = fake.add_pages(150)
    first = await notion.backfill_page(None, context)
    fake.edit_page(pages[10])  # already listed: listed again at the end
    fake.edit_page(pages[140])  # not reached yet: moves to the end
    rest = await walk(notion, first.cursor)
    later = [i.source_page_id for p in rest for i in p.items]
    assert set(pages) == {i.source_page_id for i in first.items} | set(later)
    assert later[-2:] == [pages[10], pages[140]]


async def test_notion_trashed_and_unshared_pages_are_not_listed(
    fake: FakeNotion, notion: NotionSyncer
) -> None:
    pages = fake.add_pages(6)
    [source] = data_sources(fake, 1)
    fake.set_trashed(pages[1])
    fake.unshare(pages[2])
    fake.set_trashed(source)
    ids = {i.source_page_id for p in await walk(notion) for i in p.items}
    assert ids == {pages[0], *pages[3:]}


async def test_notion_a_429_during_discover_is_rate_limited(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_pages(3)
    fake.fail("search", 429, retry_after=45)
    with pytest.raises(RateLimited) as caught:
        await notion.backfill_page(None, context)
    assert caught.value.retry_after == 45.0
    fake.fail("search", 429, retry_after=0)  # short: retried in process
    assert len((await notion.backfill_page(None, context)).items) == 3
    assert fake.calls["search"] == 3


async def test_notion_a_revoked_token_or_a_bad_request_is_permanent(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.fail("search", 400, code="validation_error")
    with pytest.raises(PermanentError):
        await notion.backfill_page(None, context)
    fake.revoke(N_TOKEN)
    with pytest.raises(AuthRevoked):
        await notion.backfill_page(None, context)


async def test_notion_a_discovered_item_syncs_the_right_kind(
    fake: FakeNotion, notion_settings: NotionSettings, conn: psycopg.AsyncConnection[Any]
) -> None:
    [page] = fake.add_pages(1, blocks=2)
    [source] = data_sources(fake, 1)
    store = DocumentStore(conn)
    syncer = NotionSyncer(notion_settings)
    try:
        items = {i.source_page_id: i for p in await walk(syncer) for i in p.items}
        before = dict(fake.calls)
        context = SyncContext(store=store)
        assert (await syncer.sync(job("notion", items[source]), context)).written == 1
        assert fake.calls["data_sources.retrieve"] - before.get("data_sources.retrieve", 0) == 1
        assert fake.calls["pages.retrieve"] == before.get("pages.retrieve", 0)  # no probing
        assert (await syncer.sync(job("notion", items[page]), context)).written == 1
    finally:
        await syncer.aclose()
    doc = await store.get("notion", page)
    assert doc is not None and "Page 0, paragraph 2." in doc["content"]


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


@pytest.fixture
def slack() -> FakeSlack:
    fake = FakeSlack(token=S_TOKEN)
    fake.add_team("T0OTHER01", "Other", "xoxb-other-team", "U0OTHERBOT")
    return fake


@pytest.fixture
def slack_settings(slack: FakeSlack) -> Iterator[SlackSettings]:
    with BackgroundServer(slack.app()) as server:
        yield SlackSettings(slack_bot_token=S_TOKEN, slack_api_url=f"{server.url}/api/")


@pytest.fixture
async def slack_syncer(slack_settings: SlackSettings) -> AsyncIterator[SlackSyncer]:
    syncer = SlackSyncer(slack_settings)
    syncer.backfill.list_limit = 7
    yield syncer
    await syncer.aclose()


async def test_slack_lists_the_bots_conversations_with_limit_paging(
    slack: FakeSlack, slack_syncer: SlackSyncer, slack_settings: SlackSettings, context: SyncContext
) -> None:
    assert isinstance(slack_syncer, Backfillable)
    channels = slack.add_channels(20, messages=1)
    outside = slack.add_channels(3, member=False, name="outside")
    slack.add_channels(2, team_id="T0OTHER01", name="other")
    first = await slack_syncer.backfill_page(None, context)
    assert len(first.items) == 7 and first.cursor
    other = SlackSyncer(slack_settings)
    other.backfill.list_limit = 7
    try:
        rest = await walk(other, first.cursor)
    finally:
        await other.aclose()
    # then the canvases (files.list types=canvas): none here
    assert [len(p.items) for p in rest] == [7, 6, 0] and rest[1].cursor == "canvases:1"
    items = [*first.items, *rest[0].items, *rest[1].items]
    assert [i.source_page_id for i in items] == channels
    assert not set(outside) & {i.source_page_id for i in items}
    assert items[0] == BackfillItem(channels[0], None, {}, "bulk-0")
    sent = [p for m, p in slack.requests if m == "users.conversations"]
    assert len(sent) == 3
    assert sent[0]["types"] == "public_channel,private_channel,mpim,im"
    assert (sent[0]["exclude_archived"], sent[0]["limit"]) == ("1", "7")


async def test_slack_archived_and_left_conversations_are_not_listed(
    slack: FakeSlack, slack_syncer: SlackSyncer
) -> None:
    kept = slack.add_channels(2)
    private = slack.add_channels(1, kind="private_channel")
    dm = slack.add_channels(1, kind="im")
    slack.describe_channel(kept[1], archived=True)
    slack.set_member(private[0], False)
    ids = [i.source_page_id for p in await walk(slack_syncer) for i in p.items]
    assert ids == [kept[0], dm[0]]


async def test_slack_errors_during_discover(
    slack: FakeSlack, slack_syncer: SlackSyncer, context: SyncContext
) -> None:
    slack.add_channels(2)
    slack.rate_limit("users.conversations", retry_after=33)
    with pytest.raises(RateLimited) as caught:
        await slack_syncer.backfill_page(None, context)
    assert caught.value.retry_after == 33.0
    assert caught.value.reason == "ratelimited:users.conversations"
    slack.fail("users.conversations", "missing_scope")
    with pytest.raises(PermanentError) as perm:
        await slack_syncer.backfill_page(None, context)
    assert "groups:read" in str(perm.value)
    slack.revoke(S_TOKEN)
    with pytest.raises(AuthRevoked):
        await slack_syncer.backfill_page(None, context)


async def test_slack_a_discovered_channel_syncs_without_an_event(
    slack: FakeSlack, slack_settings: SlackSettings, conn: psycopg.AsyncConnection[Any], context: SyncContext
) -> None:
    [channel] = slack.add_channels(1, messages=3)
    store = DocumentStore(conn)
    syncer = SlackSyncer(slack_settings)
    try:
        [item] = (await syncer.backfill_page(None, context)).items
        assert item.source_page_id == channel
        result = await syncer.sync(job("slack", item), SyncContext(store=store))
    finally:
        await syncer.aclose()
    assert result.written == 3
    assert slack.calls["conversations.history"] == 1
