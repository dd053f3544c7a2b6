"""Files shared in Slack messages become file documents (issue 39), end to end: the real
slack-sdk against the Slack stand-in, the file-host stand-in serving ``url_private`` only for
the bot token, the real worker and Postgres. A PDF attached to a message ends as a document of
its text with the conversation's audience, named by the conversation's document; a Slack
Connect stub the token may not read is skipped; the file deleted, or its message, tombstones
the file document in the change feed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.config import Settings
from debounce.documents import feed
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from debounce.worker import Worker
from integrations.slack.settings import SlackSettings
from integrations.slack.sync import SlackSyncer
from standins.file_host import FileHost
from standins.sample_files import text_pdf
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

TOKEN = "xoxb-files"
CHANNEL = "C0FILES"
PDF = "application/pdf"


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost(tokens_with_scope={TOKEN})
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, str]]:
    fake = FakeSlack(token=TOKEN)
    with BackgroundServer(fake.app()) as server:
        yield fake, server.url + "/api/"


@pytest.fixture
async def syncer(pool: AsyncConnectionPool[Any], database_url: str, host: FileHost,
                 slack: tuple[FakeSlack, str]) -> AsyncIterator[SlackSyncer]:
    settings = Settings(database_url="unused", lease_seconds=5, poll_interval_seconds=0.2,
                        worker_concurrency=4, shutdown_grace_seconds=2,
                        file_token_hosts=(host.base_url.removeprefix("http://"),))
    source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=slack[1]))
    worker = Worker(settings, pool, {"slack": source}, conninfo=database_url)
    task = asyncio.create_task(worker.run())
    yield source
    worker.stop()
    await asyncio.wait_for(task, 15)
    await source.aclose()


async def until(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def sync_channel(pool: AsyncConnectionPool[Any]) -> None:
    await queue.enqueue(pool, [JobEvent("slack", CHANNEL, {}, None, 0, 0)])


async def changes_of(pool: AsyncConnectionPool[Any], document_id: str) -> list[str]:
    ops: list[str] = []
    after: feed.Cursor | None = None
    while True:
        page = await feed.read_changes(pool, after, 100)
        ops += [c.op for c in page.changes if c.document_id == document_id]
        if not page.changes:
            return ops
        after = page.changes[-1].cursor


async def test_a_shared_pdf_becomes_a_file_document_until_its_file_is_deleted(
        pool: AsyncConnectionPool[Any], host: FileHost, slack: tuple[FakeSlack, str],
        syncer: SlackSyncer) -> None:
    fake, _ = slack
    store = DocumentStore(pool)
    pdf = fake.share_file(host, "F0PDF", "travel-policy.pdf",
                          text_pdf([["Travel policy", "Economy class only."]]), PDF)
    stub = fake.connect_stub("F0OTHER", denied=True)  # another organisation's file
    ts = fake.post(CHANNEL, "The new policy", subtype="file_share", files=[pdf, stub])
    await sync_channel(pool)

    doc = await until(lambda: _live(store, "file:F0PDF"))
    parent = await store.get("slack", f"{CHANNEL}/{ts}")
    assert parent is not None
    assert doc["content"] == "Travel policy\nEconomy class only."
    assert doc["title"] == "travel-policy.pdf"
    assert doc["metadata"]["kind"] == "file"
    assert doc["metadata"]["parent_document_id"] == f"{CHANNEL}/{ts}"
    assert doc["metadata"]["edit_stamp"] == "1763600000"
    assert (doc["audience_kind"], doc["audience_members"]) == (
        parent["audience_kind"], parent["audience_members"])
    assert parent["audience_kind"] is not None
    assert ("_(file: [travel-policy.pdf](https://debounce-demo.slack.com/files/U2147483697/F0PDF/"
            "travel-policy.pdf) · document `file:F0PDF`)_") in parent["content"]
    private = [h for _, path, h in host.requests if path.startswith("/files-pri/")]
    assert [h["authorization"] for h in private] == [f"Bearer {TOKEN}"]
    assert fake.calls["files.info"] == 1  # the stub, refused: skipped
    assert await store.get("slack", "file:F0OTHER") is None

    # The file is deleted: the message shows its tombstone; the file document is tombstoned.
    fake.delete_file("F0PDF")
    fake.edit(CHANNEL, ts, "The new policy (file removed)")
    await sync_channel(pool)
    await until(lambda: _deleted(store, "file:F0PDF"))
    assert await changes_of(pool, "file:F0PDF") == ["upsert", "delete"]
    parent = await store.get("slack", f"{CHANNEL}/{ts}")
    assert parent is not None and "file:F0PDF" not in parent["content"]


async def test_a_deleted_message_tombstones_its_files(
        pool: AsyncConnectionPool[Any], host: FileHost, slack: tuple[FakeSlack, str],
        syncer: SlackSyncer) -> None:
    fake, _ = slack
    store = DocumentStore(pool)
    keep = fake.post(CHANNEL, "Unrelated")
    pdf = fake.share_file(host, "F0DEL", "minutes.pdf", text_pdf([["Minutes of the meeting"]]), PDF)
    ts = fake.post(CHANNEL, "Minutes", files=[pdf])
    await sync_channel(pool)
    doc = await until(lambda: _live(store, "file:F0DEL"))
    assert doc["content"] == "Minutes of the meeting"

    fake.delete(CHANNEL, ts)
    await sync_channel(pool)
    await until(lambda: _deleted(store, "file:F0DEL"))
    assert await changes_of(pool, "file:F0DEL") == ["upsert", "delete"]
    kept = await store.get("slack", f"{CHANNEL}/{keep}")
    assert kept is not None and kept["deleted_at"] is None


async def _live(store: DocumentStore, document_id: str) -> dict[str, Any] | None:
    doc = await store.get("slack", document_id)
    return doc if doc is not None and doc["deleted_at"] is None else None


async def _deleted(store: DocumentStore, document_id: str) -> bool:
    doc = await store.get("slack", document_id)
    return doc is not None and doc["deleted_at"] is not None
