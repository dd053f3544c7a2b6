"""Budget charging (``debounce.contract.metering``) of both sources — Notion ``NotionCall.call``,
Slack's session trace under ``call_api`` — through the real SDKs against the stand-ins:
every request sent is charged once (retries of every layer too), a listing is never served from the
checkpoint, a dry budget stops a sync with :class:`BudgetExhausted`, and the resumed sync with
the same checkpoint sends only what was not answered yet (counted on the stand-in)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from debounce.contract import BudgetExhausted, Checkpoint, SyncContext
from debounce.documents.store import DocumentStore
from debounce.types import JobStatus, SyncJob
from integrations.notion import NotionSettings, NotionSyncer
from integrations.slack import SlackSettings, SlackSyncer
from standins.notion_api import FakeNotion, paragraph, toggle
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

N_TOKEN = "secret_metering_notion"
S_TOKEN = "xoxb-metering-slack"
C = "C0METERED1"

Conn = psycopg.AsyncConnection[Any]


class CountingMeter:
    """A :class:`debounce.contract.metering.Meter` that grants ``allowance`` requests (``None``:
    any number) and counts them."""

    def __init__(self, allowance: int | None = None) -> None:
        self.allowance = allowance
        self.taken = 0

    async def take(self) -> None:
        if self.allowance is not None and self.taken >= self.allowance:
            raise BudgetExhausted(2.5)
        self.taken += 1


def metered(
    meter: CountingMeter, store: DocumentStore | None = None, checkpoint: Checkpoint | None = None
) -> SyncContext:
    """The context the worker hands a sync or a listing: ``meter`` charging its requests and
    ``checkpoint`` (default: a new one) recording and serving its responses."""
    return SyncContext(
        store=store, meter=meter, checkpoint=checkpoint if checkpoint is not None else Checkpoint()
    )


def job(source_type: str, page: str, payload: dict[str, Any]) -> SyncJob:
    now = datetime.now(UTC)
    return SyncJob(
        id=1,
        source_type=source_type,
        source_page_id=page,
        status=JobStatus.PROCESSING,
        payload=payload,
        event_id=None,
        event_count=1,
        priority=0,
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


def page_job(page: str) -> SyncJob:
    return job("notion", page, {"entity": {"id": page, "type": "page"}})


# --------------------------------------------------------------------------------------------
# Notion
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fake() -> FakeNotion:
    return FakeNotion(token=N_TOKEN, page_size_cap=2)


@pytest.fixture
def settings(fake: FakeNotion) -> Iterator[NotionSettings]:
    with BackgroundServer(fake.app()) as server:
        yield NotionSettings(notion_token=N_TOKEN, notion_base_url=server.url)


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


def new_notion(settings: NotionSettings) -> NotionSyncer:
    return NotionSyncer(settings, retry_delays=(0.0, 0.0))


async def test_a_notion_sync_charges_every_request_sent_retries_included(
    fake: FakeNotion, settings: NotionSettings, store: DocumentStore
) -> None:
    fake.deny_read_content()  # the block walk: many requests
    page = fake.add_page(
        title="Walked",
        blocks=[
            paragraph("one"),
            toggle("more", paragraph("a"), paragraph("b"), paragraph("c")),
            paragraph("two"),
            paragraph("three"),
            paragraph("four"),
        ],
    )
    fake.fail("pages.retrieve", 500)  # retried in process after 0 s
    fake.fail("blocks.children.list", 429, retry_after=0)  # a short Retry-After: retried too
    meter = CountingMeter()
    syncer = new_notion(settings)
    context = metered(meter, store)
    checkpoint = context.checkpoint
    assert checkpoint is not None
    try:
        assert (await syncer.sync(page_job(page), context)).written == 1
    finally:
        await syncer.aclose()
    sent = sum(fake.calls.values())
    # pages.retrieve 500 + again, markdown 403, the page's 5 blocks in 3 pages (one 429 and
    # again), the toggle's 3 children in 2, and its comments (a sync that was told nothing of
    # what changed reads them: docs/notion.md, "Comments").
    assert sent == fake.usage().requests == 10
    assert meter.taken == sent
    # Every read answered is in the checkpoint (not the errors, not the 403).
    assert len(checkpoint.responses) == sent - 3
    assert all(
        k.startswith(("pages.retrieve ", "blocks.children.list ", "CommentsEndpoint.list "))
        for k in checkpoint.responses
    )


async def test_notion_discover_charges_each_listing_and_never_serves_it_from_the_checkpoint(
    fake: FakeNotion, settings: NotionSettings
) -> None:
    fake.add_pages(150)
    meter = CountingMeter()
    syncer = new_notion(settings)
    context = metered(meter)
    checkpoint = context.checkpoint
    assert checkpoint is not None
    try:
        first = await syncer.backfill_page(None, context)
        again = await syncer.backfill_page(None, context)
        await syncer.backfill_page(first.cursor, context)
    finally:
        await syncer.aclose()
    assert first == again
    assert meter.taken == fake.calls["search"] == 3
    assert checkpoint.responses == {}


async def test_a_dry_budget_stops_a_notion_sync_and_the_resumed_one_sends_only_the_rest(
    fake: FakeNotion, settings: NotionSettings, store: DocumentStore
) -> None:
    fake.markdown_block_limit = 2  # 6 blocks: the page + 4 unknown blocks
    page = fake.add_page(title="Big", blocks=[paragraph(f"part {i}") for i in range(6)])
    first = new_notion(settings)
    context = metered(CountingMeter(allowance=3), store)
    checkpoint = context.checkpoint
    assert checkpoint is not None
    try:
        with pytest.raises(BudgetExhausted) as caught:
            await first.sync(page_job(page), context)
    finally:
        await first.aclose()
    assert caught.value.retry_after == 2.5
    assert sum(fake.calls.values()) == 3  # nothing sent past the budget
    assert await store.get("notion", page) is None  # nothing written
    # The job comes back (another worker, a new syncer object) with its checkpoint,
    # round-tripped through JSON as the queue stores it.
    saved = Checkpoint.from_json(json.loads(json.dumps(checkpoint.to_json())))
    meter = CountingMeter()
    second = new_notion(settings)
    try:
        assert (await second.sync(page_job(page), metered(meter, store, saved))).written == 1
    finally:
        await second.aclose()
    # The rest: the 3 markdown requests the budget stopped, and the comments (read last).
    assert meter.taken == 4 and sum(fake.calls.values()) == 7
    assert fake.calls == {"pages.retrieve": 1, "pages.markdown": 5, "comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and all(f"part {i}" in doc["content"] for i in range(6))


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


@pytest.fixture
def slack() -> FakeSlack:
    fake = FakeSlack(token=S_TOKEN)
    for n in range(3):
        root = fake.post(C, f"thread {n}")
        fake.reply(C, root, f"reply {n}")
    fake.post(C, "alone")
    return fake


@pytest.fixture
def slack_settings(slack: FakeSlack) -> Iterator[SlackSettings]:
    with BackgroundServer(slack.app()) as server:
        yield SlackSettings(slack_bot_token=S_TOKEN, slack_api_url=f"{server.url}/api/")


@pytest.fixture
async def slack_syncer(slack_settings: SlackSettings) -> AsyncIterator[SlackSyncer]:
    syncer = SlackSyncer(slack_settings, page_limit=2)
    yield syncer
    await syncer.aclose()


async def test_slack_sync_and_discover_charge_every_request(
    slack: FakeSlack, slack_syncer: SlackSyncer, store: DocumentStore
) -> None:
    slack.add_channels(5)
    slack.server_error("conversations.history", 503)  # an error answer is charged too
    meter = CountingMeter()
    with pytest.raises(Exception, match="503"):
        await slack_syncer.sync(job("slack", C, {}), metered(meter, store))
    result = await slack_syncer.sync(job("slack", C, {}), metered(meter, store))
    slack_syncer.backfill.list_limit = 4
    listed = [await slack_syncer.backfill_page(None, metered(meter))]
    listed.append(await slack_syncer.backfill_page(listed[0].cursor, metered(meter)))
    assert result.written == 4
    assert sum(len(p.items) for p in listed) == 6 and listed[1].cursor == "canvases:1"
    listed.append(await slack_syncer.backfill_page(listed[1].cursor, metered(meter)))  # canvases
    assert listed[2].items == [] and listed[2].cursor is None
    assert meter.taken == sum(slack.calls.values()) == slack.usage().requests
    assert slack.calls["users.conversations"] == 2 and slack.calls["files.list"] == 1


async def test_a_dry_budget_stops_a_slack_sync_and_the_resumed_one_sends_only_the_rest(
    slack: FakeSlack, slack_settings: SlackSettings, store: DocumentStore
) -> None:
    syncer = SlackSyncer(slack_settings)  # history in one page
    try:
        # The first request learns the channel's audience (kind: conversations.info).
        context = metered(CountingMeter(allowance=3), store)
        with pytest.raises(BudgetExhausted):
            await syncer.sync(job("slack", C, {}), context)
        assert dict(slack.calls) == {
            "conversations.info": 1,
            "conversations.history": 1,
            "conversations.replies": 1,
        }
        meter = CountingMeter()
        await syncer.sync(job("slack", C, {}), metered(meter, store, context.checkpoint))
    finally:
        await syncer.aclose()
    # Info and history came from the checkpoint; the thread already written was not asked again.
    assert meter.taken == 2
    assert dict(slack.calls) == {
        "conversations.info": 1,
        "conversations.history": 1,
        "conversations.replies": 3,
    }
    assert len({p["ts"] for m, p in slack.requests if m == "conversations.replies"}) == 3


class DroppingServer:
    """A stand-in that drops the first ``drops`` connections without answering (the
    connection resets an HTTP client sees behind a proxy), then answers one empty
    ``users.conversations`` page per request."""

    def __init__(self, drops: int = 1) -> None:
        self.drops = drops
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if self.requests <= self.drops:
            writer.close()
            return
        body = json.dumps(
            {
                "ok": True,
                "channels": [{"id": "C0ONLY", "name": "only"}],
                "response_metadata": {"next_cursor": ""},
            }
        ).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/api/"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def test_every_retry_below_call_api_is_charged() -> None:
    """A dropped connection is retried by aiohttp itself (an idempotent GET), a second drop
    by slack_sdk's connection-error handler: three attempts, three charges."""
    stub = DroppingServer(drops=1)
    async with stub as url:
        syncer = SlackSyncer(SlackSettings(slack_bot_token=S_TOKEN, slack_api_url=url))
        try:
            meter = CountingMeter()
            page = await syncer.backfill_page(None, metered(meter))
            assert [i.source_page_id for i in page.items] == ["C0ONLY"]
            assert stub.requests == 2 and meter.taken == 2  # aiohttp's silent retry
            stub.drops, stub.requests = 2, 0
            meter = CountingMeter()
            await syncer.backfill_page(None, metered(meter))
            assert stub.requests == 3 and meter.taken == 3  # and the SDK's retry handler
            stub.drops, stub.requests = 1, 0
            with pytest.raises(BudgetExhausted):
                await syncer.backfill_page(None, metered(CountingMeter(allowance=1)))
            assert stub.requests == 1  # the retry was not sent
        finally:
            await syncer.aclose()
