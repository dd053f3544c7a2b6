"""Deletions reach file documents (issue 39), with the real worker and Postgres:

- a file that no parent shows any more is tombstoned, but not while another parent shows it;
- a parent deleted (its job's documents marked deleted: a trashed Notion page, a Slack
  channel that is gone) tombstones, through the deletion guard, the file documents it was the
  only one to show — and not those another parent shows;
- a Slack conversation that is gone (``channel_not_found``) tombstones its messages' files
  (the real slack-sdk against the Slack stand-in).

The change feed serves a change once every older transaction of the cluster has ended, so the
tests wait for the feed rather than read it once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from waiting import e2e_settings, running_worker, until

from debounce import queue
from debounce.config import Settings
from debounce.contract import Audience, Document, FileRef, SyncContext, SyncJob, SyncResult
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

TOKEN = "xoxb-deletions"
CHANNEL = "C0GONE"
PDF = "application/pdf"


class Pages:
    """A source of pages, each showing the files in :attr:`shown` (a page not in it is gone)."""

    source_type = "noop"

    def __init__(self) -> None:
        self.shown: dict[str, list[FileRef]] = {}

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        page = job.source_page_id
        if page not in self.shown:
            marked = await context.writer().mark_page_deleted("noop", page, why="were found gone")
            return SyncResult(deleted=len(marked))
        refs = [FileRef(r.file_id, r.name, page, r.url, r.media_type) for r in self.shown[page]]
        await context.writer().upsert(
            Document(
                source_type="noop",
                document_id=page,
                source_page_id=page,
                title=page,
                content="\n".join(f"- {r.name} (document `{r.document_id()}`)" for r in refs) + "\n",
                url=f"https://example.test/{page}",
                audience=Audience("workspace"),
            )
        )
        return SyncResult(written=1, files=tuple(refs))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost(tokens_with_scope={TOKEN})
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


def settings(host: FileHost) -> Settings:
    return e2e_settings(file_token_hosts=(host.base_url.removeprefix("http://"),))


@pytest.fixture
async def pages(pool: AsyncConnectionPool[Any], database_url: str, host: FileHost) -> AsyncIterator[Pages]:
    source = Pages()
    async with running_worker(settings(host), pool, {"noop": source}, database_url):
        yield source


async def sync(pool: AsyncConnectionPool[Any], source: str, *keys: str) -> None:
    await queue.enqueue(pool, [JobEvent(source, key, {}, None, 0, 0) for key in keys])


async def live(store: DocumentStore, source: str, document_id: str) -> dict[str, Any] | None:
    doc = await store.get(source, document_id)
    return doc if doc is not None and doc["deleted_at"] is None else None


async def deleted(store: DocumentStore, source: str, document_id: str) -> bool:
    doc = await store.get(source, document_id)
    return doc is not None and doc["deleted_at"] is not None


async def feed_ops(pool: AsyncConnectionPool[Any], document_id: str) -> list[str]:
    ops: list[str] = []
    after: feed.Cursor | None = None
    while True:
        page = await feed.read_changes(pool, after, 100)
        ops += [c.op for c in page.changes if c.document_id == document_id]
        if not page.changes:
            return ops
        after = page.changes[-1].cursor


def hosted(host: FileHost, key: str, text: str) -> FileRef:
    host.add(key, text_pdf([[text]]), PDF)
    return FileRef(f"/s3/{key}", key.rsplit("/", 1)[-1], "", host.presign(key, expires_in=86400), PDF)


async def test_a_file_is_tombstoned_when_no_parent_shows_it_or_its_only_parent_is_deleted(
    pool: AsyncConnectionPool[Any], host: FileHost, pages: Pages
) -> None:
    store = DocumentStore(pool)
    shared = hosted(host, "d/1/shared.pdf", "Shared by two pages")
    own = hosted(host, "d/2/own.pdf", "Only on page A")
    b_only = hosted(host, "d/3/b.pdf", "Only on page B")
    pages.shown = {"page-a": [shared, own], "page-b": [shared, b_only]}
    await sync(pool, "noop", "page-a", "page-b")
    for ref in (shared, own, b_only):
        await until(lambda: live(store, "noop", ref.document_id()))  # noqa: B023 (awaited here)

    # Page A stops showing the shared file: page B still shows it, it stays.
    pages.shown["page-a"] = [own]
    await sync(pool, "noop", "page-a")
    await until(lambda: _state_without(pool, "files-of:page-a", shared.file_id))
    assert await live(store, "noop", shared.document_id()) is not None

    # Page A is deleted: its own file goes with it (through the deletion guard), the shared one
    # that page B shows stays.
    del pages.shown["page-a"]
    await sync(pool, "noop", "page-a")
    await until(lambda: deleted(store, "noop", "page-a"))
    assert await deleted(store, "noop", own.document_id())
    assert await live(store, "noop", shared.document_id()) is not None
    assert await live(store, "noop", b_only.document_id()) is not None

    # Page B stops showing the shared file: no parent shows it, it is tombstoned.
    pages.shown["page-b"] = [b_only]
    await sync(pool, "noop", "page-b")
    await until(lambda: deleted(store, "noop", shared.document_id()))
    assert await until(lambda: _ops_are(pool, own.document_id(), ["upsert", "delete"]))
    assert await live(store, "noop", b_only.document_id()) is not None


async def _state_without(pool: AsyncConnectionPool[Any], key: str, file_id: str) -> bool:
    state = await DocumentStore(pool).get_state("noop", key)
    return "files" in state and file_id not in state["files"]


async def _ops_are(pool: AsyncConnectionPool[Any], document_id: str, ops: list[str]) -> bool:
    return await feed_ops(pool, document_id) == ops


async def test_a_slack_conversation_that_is_gone_tombstones_its_files(
    pool: AsyncConnectionPool[Any], database_url: str, host: FileHost
) -> None:
    fake = FakeSlack(token=TOKEN)
    with BackgroundServer(fake.app()) as server:
        source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=server.url + "/api/"))
        worker = Worker(settings(host), pool, {"slack": source}, conninfo=database_url)
        task = asyncio.create_task(worker.run())
        try:
            store = DocumentStore(pool)
            pdf = fake.share_file(host, "F0GONE", "plan.pdf", text_pdf([["The plan"]]), PDF)
            ts = fake.post(CHANNEL, "The plan", subtype="file_share", files=[pdf])
            await sync(pool, "slack", CHANNEL)
            doc = await until(lambda: live(store, "slack", "file:F0GONE"))
            assert doc["content"] == "The plan"

            fake.remove_channel(CHANNEL)  # deleted, or the app cannot see it any more
            await sync(pool, "slack", CHANNEL)
            await until(lambda: deleted(store, "slack", f"{CHANNEL}/{ts}"))
            assert await deleted(store, "slack", "file:F0GONE")
            assert await until(lambda: _ops_are(pool, "file:F0GONE", ["upsert", "delete"]))
        finally:
            worker.stop()
            await asyncio.wait_for(task, 15)
            await source.aclose()
