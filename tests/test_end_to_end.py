"""End to end: signed webhook → debounced job → worker → real SDK against the local API
stand-ins on loopback → Markdown in ``documents``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import one_job
import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool

from debounce import queue, registry
from debounce.cli import sign_request
from debounce.config import Settings, SourceWindow
from debounce.documents import feed
from debounce.documents.store import DocumentStore
from debounce.types import JobStatus
from debounce.web import create_app
from debounce.worker import Worker
from standins import notion_api as n
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTION_SECRET = "secret_e2e_notion"
SLACK_SECRET = "e2e-slack-secret"
PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
CHANNEL = "C2147483705"


@dataclass
class Stack:
    client: httpx.AsyncClient
    pool: AsyncConnectionPool[Any]
    notion: FakeNotion
    slack: FakeSlack
    worker: Worker
    store: DocumentStore


@pytest.fixture
def fakes() -> Iterator[tuple[FakeNotion, FakeSlack, str, str]]:
    notion = FakeNotion(token="secret_e2e_token", page_size_cap=3)
    # These tests pin the block walk's Markdown (paginated); the markdown path's twins are in
    # tests/test_notion_markdown.py.
    notion.deny_read_content()
    slack = FakeSlack(token="xoxb-e2e")
    with BackgroundServer(notion.app()) as ns, BackgroundServer(slack.app()) as ss:
        yield notion, slack, ns.url, ss.url + "/api/"


@pytest.fixture
async def stack(
    pool: AsyncConnectionPool[Any], database_url: str, fakes: tuple[FakeNotion, FakeSlack, str, str]
) -> AsyncIterator[Stack]:
    notion, slack, notion_url, slack_url = fakes
    settings = Settings(
        database_url=database_url,
        notion_token=notion.token,
        notion_base_url=notion_url,
        notion_webhook_secret=NOTION_SECRET,
        slack_bot_token=slack.token,
        slack_api_url=slack_url,
        slack_signing_secret=SLACK_SECRET,
        windows={"notion": SourceWindow(1.0, 30.0), "slack": SourceWindow(0.5, 30.0)},
        poll_interval_seconds=0.2,
        lease_seconds=10,
    )
    app = create_app(settings, pool=pool)
    store = DocumentStore(pool)
    syncers = registry.create_all(settings)
    worker = Worker(settings, pool, syncers, conninfo=database_url)
    task = asyncio.create_task(worker.run())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        yield Stack(client, pool, notion, slack, worker, store)
    worker.stop()
    await asyncio.wait_for(task, 15)
    for syncer in syncers.values():
        await syncer.aclose()


async def send(client: httpx.AsyncClient, source: str, event: dict[str, Any]) -> httpx.Response:
    body = json.dumps(event).encode()
    secret = NOTION_SECRET if source == "notion" else SLACK_SECRET
    resp = await client.post(f"/webhooks/{source}", content=body, headers=sign_request(source, body, secret))
    assert resp.status_code == 200, resp.text
    return resp


async def settled(pool: AsyncConnectionPool[Any], timeout: float = 20.0) -> None:
    """Wait until no job is pending or processing."""
    deadline = time.monotonic() + timeout
    while True:
        totals = (await queue.stats(pool))["totals"]
        if totals["pending"] == 0 and totals["processing"] == 0:
            return
        assert time.monotonic() < deadline, f"queue did not settle: {totals}"
        await asyncio.sleep(0.05)


def example(source: str, name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / source / name).read_text())  # type: ignore[no-any-return]


async def test_50_notion_events_sync_the_page_once(stack: Stack) -> None:
    stack.notion.add_page(
        PAGE,
        title="Launch plan",
        blocks=[
            n.heading(1, "Goals"),
            n.paragraph([n.text("Ship "), n.text("debounce", bold=True), n.text(" on time.")]),
            n.bulleted("Webhooks", n.bulleted("Notion"), n.bulleted("Slack")),
            n.to_do("Write the README", checked=True),
            n.code("debounce serve", "shell"),
        ],
    )
    template = example("notion", "page.content_updated.json")
    for i in range(50):
        await send(stack.client, "notion", dict(template, id=f"evt-{i}"))
    jobs = (await queue.list_jobs(stack.pool)).jobs
    assert len(jobs) == 1 and jobs[0].event_count == 50
    await settled(stack.pool)
    assert stack.notion.calls["pages.retrieve"] == 1
    docs = await one_job.page_documents(stack.store, "notion", PAGE)
    assert len(docs) == 1
    doc = docs[0]
    assert doc["title"] == "Launch plan"
    assert doc["content"] == (
        "# Goals\n\n"
        "Ship **debounce** on time.\n\n"
        "- Webhooks\n"
        "  - Notion\n"
        "  - Slack\n"
        "- [x] Write the README\n\n"
        "```shell\ndebounce serve\n```\n"
    )
    final = await queue.get(stack.pool, jobs[0].id)
    assert final is not None and final.status is JobStatus.COMPLETED


async def test_edit_during_sync_is_followed_by_a_second_sync(stack: Stack) -> None:
    stack.notion.add_page(PAGE, title="v1", blocks=[n.paragraph("first")])
    template = example("notion", "page.content_updated.json")
    await send(stack.client, "notion", dict(template, id="a"))
    # Wait until the worker has claimed the job, change the page, send another event.
    deadline = time.monotonic() + 10
    while stack.notion.calls["pages.retrieve"] == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    stack.notion.add_page(PAGE, title="v2", blocks=[n.paragraph("second")])
    # Body and title changed: Notion sends page.content_updated and, for the title (a
    # property), page.properties_updated (its event reference); the follow-up syncs both.
    resp = await send(stack.client, "notion", dict(template, id="b"))
    assert resp.json()["jobs"][0]["outcome"] in ("requeued_after_running", "created")
    await send(stack.client, "notion", dict(template, id="c", type="page.properties_updated"))
    await asyncio.sleep(1.2)  # the follow-up's debounce window
    await settled(stack.pool)
    doc = await stack.store.get("notion", PAGE)
    assert doc is not None and doc["title"] == "v2" and "second" in doc["content"]


async def test_trashed_notion_page_marks_document_deleted(stack: Stack) -> None:
    stack.notion.add_page(PAGE, title="Doomed", blocks=[n.paragraph("bye")])
    await send(stack.client, "notion", example("notion", "page.created.json"))
    await settled(stack.pool)
    stack.notion.set_trashed(PAGE)
    await send(stack.client, "notion", example("notion", "page.deleted.json"))
    await settled(stack.pool)
    doc = await stack.store.get("notion", PAGE)
    assert doc is not None and doc["deleted_at"] is not None


async def test_slack_message_thread_and_edit_end_to_end(stack: Stack) -> None:
    root = stack.slack.post(CHANNEL, "Hello world", user="U1")
    stack.slack.reply(CHANNEL, root, "Replying in the thread", user="U2")
    lone = stack.slack.post(CHANNEL, "Another topic", user="U1")
    await send(stack.client, "slack", example("slack", "message.json"))
    await send(stack.client, "slack", example("slack", "thread_reply.json"))
    await settled(stack.pool)
    docs = {d["document_id"]: d for d in await one_job.page_documents(stack.store, "slack", CHANNEL)}
    assert set(docs) == {f"{CHANNEL}/{root}", f"{CHANNEL}/{lone}"}
    thread = docs[f"{CHANNEL}/{root}"]["content"]
    assert "Hello world" in thread and "Replying in the thread" in thread
    assert thread.index("Hello world") < thread.index("Replying in the thread")
    stack.slack.edit(CHANNEL, lone, "Another topic (edited)")
    await send(stack.client, "slack", example("slack", "message_changed.json"))
    await settled(stack.pool)
    edited = await stack.store.get("slack", f"{CHANNEL}/{lone}")
    assert edited is not None and "Another topic (edited)" in edited["content"]


async def test_a_member_leaving_a_private_channel_leaves_its_documents_audience(stack: Stack) -> None:
    private = "G0PRIVATE1"  # the channel of examples/slack/private_channel_message.json
    stack.slack.post(private, "In a private channel", user="U2147483697")
    stack.slack.set_members(private, ["U0BOTUSER", "U2147483697", "U2147483698"])
    await send(stack.client, "slack", example("slack", "private_channel_message.json"))
    await settled(stack.pool)
    (doc,) = await one_job.page_documents(stack.store, "slack", private)
    assert (doc["audience_kind"], doc["audience_members"]) == (
        "private_channel",
        ["U0BOTUSER", "U2147483697", "U2147483698"],
    )
    # U2147483698 leaves (examples/slack/member_left_channel.json): webhook → job → worker.
    stack.slack.remove_member(private, "U2147483698")
    await send(stack.client, "slack", example("slack", "member_left_channel.json"))
    await settled(stack.pool)
    (doc,) = await one_job.page_documents(stack.store, "slack", private)
    assert doc["audience_members"] == ["U0BOTUSER", "U2147483697"]
    assert stack.slack.calls["conversations.members"] == 2
    assert stack.slack.calls["conversations.history"] == 1  # the member job reads no history


async def test_rate_limited_notion_sync_goes_back_to_queue(stack: Stack) -> None:
    stack.notion.add_page(PAGE, title="Busy", blocks=[n.paragraph("x")])
    stack.notion.fail("pages.retrieve", 429, retry_after=30)
    await send(stack.client, "notion", example("notion", "page.created.json"))
    deadline = time.monotonic() + 10
    while True:
        job = await one_job.active_for_page(stack.pool, "notion", PAGE)
        if job is not None and job.status is JobStatus.PENDING and job.last_error:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert job.attempts == 0 and "retry after 30" in job.last_error
    assert job.retry_at is not None


async def _changes_after(
    pool: AsyncConnectionPool[Any], after: feed.Cursor | None
) -> tuple[list[feed.Change], feed.Cursor | None]:
    await servable(pool)
    changes: list[feed.Change] = []
    while True:
        page = await feed.read_changes(pool, after, 100)
        changes += page.changes
        after = page.next
        if page.at_head and not page.changes:
            return changes, after


async def test_a_sync_appends_one_change_per_document_it_writes(stack: Stack) -> None:
    root = stack.slack.post(CHANNEL, "Hello world", user="U1")
    lone = stack.slack.post(CHANNEL, "Another topic", user="U1")
    await send(stack.client, "slack", example("slack", "message.json"))
    await settled(stack.pool)
    first, after = await _changes_after(stack.pool, None)
    assert sorted((c.document_id, c.op) for c in first) == sorted(
        [(f"{CHANNEL}/{root}", "upsert"), (f"{CHANNEL}/{lone}", "upsert")]
    )
    stack.slack.edit(CHANNEL, lone, "Another topic (edited)")
    await send(stack.client, "slack", example("slack", "message_changed.json"))
    await settled(stack.pool)
    edited, after = await _changes_after(stack.pool, after)
    row = await stack.store.get("slack", f"{CHANNEL}/{lone}")
    assert row is not None
    assert [(c.document_id, c.op, c.content_sha256) for c in edited] == [
        (f"{CHANNEL}/{lone}", "upsert", row["content_sha256"])
    ]
    # A re-sync that finds nothing new rewrites nothing a consumer sees: no change.
    await queue.resync(stack.pool, "slack", CHANNEL, max_attempts=3)
    await settled(stack.pool)
    assert (await _changes_after(stack.pool, after))[0] == []
