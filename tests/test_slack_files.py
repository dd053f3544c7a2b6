"""Files shared in Slack messages become file documents (issue 39), end to end: the real
slack-sdk against the Slack stand-in, the file-host stand-in serving ``url_private`` only for
the bot token, the real worker and Postgres. A PDF attached to a message ends as a document of
its text with the conversation's audience, named by the conversation's document; a Slack
Connect stub the token may not read is skipped; the file deleted, or its message, tombstones
the file document in the change feed."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from waiting import e2e_settings, running_worker, until

from debounce import queue
from debounce.contract import FileRef, SyncContext
from debounce.documents import feed
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from integrations.slack.files import document_of, file_ref, files_shown, message_files
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
async def syncer(
    pool: AsyncConnectionPool[Any], database_url: str, host: FileHost, slack: tuple[FakeSlack, str]
) -> AsyncIterator[SlackSyncer]:
    settings = e2e_settings(file_token_hosts=(host.base_url.removeprefix("http://"),))
    source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=slack[1]))
    async with running_worker(settings, pool, {"slack": source}, database_url):
        yield source
    await source.aclose()


async def sync_channel(pool: AsyncConnectionPool[Any]) -> None:
    await queue.enqueue(pool, [JobEvent("slack", CHANNEL, {}, None, 0, 0)])


async def changes_of(pool: AsyncConnectionPool[Any], document_id: str) -> list[str]:
    await servable(pool)  # the server is shared: another session may hold the frontier back
    ops: list[str] = []
    after: feed.Cursor | None = None
    while True:
        page = await feed.read_changes(pool, after, 100)
        ops += [c.op for c in page.changes if c.document_id == document_id]
        if not page.changes:
            return ops
        after = page.changes[-1].cursor


async def test_a_shared_pdf_becomes_a_file_document_until_its_file_is_deleted(
    pool: AsyncConnectionPool[Any], host: FileHost, slack: tuple[FakeSlack, str], syncer: SlackSyncer
) -> None:
    fake, _ = slack
    store = DocumentStore(pool)
    pdf = fake.share_file(
        host, "F0PDF", "travel-policy.pdf", text_pdf([["Travel policy", "Economy class only."]]), PDF
    )
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
        parent["audience_kind"],
        parent["audience_members"],
    )
    assert parent["audience_kind"] is not None
    assert (
        "_(file: [travel-policy.pdf](https://debounce-demo.slack.com/files/U2147483697/F0PDF/"
        "travel-policy.pdf) · document `file:F0PDF`)_"
    ) in parent["content"]
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
    pool: AsyncConnectionPool[Any], host: FileHost, slack: tuple[FakeSlack, str], syncer: SlackSyncer
) -> None:
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


def test_file_objects_as_file_refs() -> None:
    hosted = {
        "id": "F1",
        "name": "a.pdf",
        "mimetype": PDF,
        "size": 10,
        "timestamp": 5,
        "updated": 7,
        "url_private": "https://files.slack.com/files-pri/T1-F1/a.pdf",
        "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/a.pdf",
    }
    ref = file_ref(hosted, "C1/1.000100")
    assert ref == FileRef(
        file_id="F1",
        name="a.pdf",
        parent_document_id="C1/1.000100",
        url="https://files.slack.com/files-pri/T1-F1/download/a.pdf",
        media_type=PDF,
        with_token=True,
        edit_stamp="7",
        size=10,
        locator="F1",
    )
    remote = file_ref(
        {
            "id": "F2",
            "title": "Spec",
            "is_external": True,
            "external_type": "gdrive",
            "url_private": "https://docs.example.com/d/1",
        },
        "C1/1.000100",
    )
    assert remote is not None
    assert (remote.name, remote.external, remote.with_token, remote.edit_stamp) == ("Spec", True, False, None)
    for none in (
        {"id": "F3", "mode": "tombstone"},
        {"id": "F4", "mode": "hidden_by_limit"},
        {"id": "F5", "file_access": "check_file_info"},
        {"name": "no id"},
    ):
        assert file_ref(none, "C1/1.000100") is None
    shown = message_files(
        [
            {"ts": "1.000100", "files": [hosted, {"id": "F3", "mode": "tombstone"}]},
            {"ts": "2.000100", "files": [hosted, {"id": "F5", "file_access": "check_file_info"}]},
            {"ts": "3.000100", "subtype": "tombstone", "files": [{"id": "F6"}]},
        ]
    )
    assert [f["id"] for f in shown] == ["F1", "F5"]
    assert (document_of(hosted), document_of({"id": "F4", "mode": "hidden_by_limit"})) == ("file:F1", None)


async def test_refresh_file_reads_files_info(host: FileHost, slack: tuple[FakeSlack, str]) -> None:
    fake, url = slack
    obj = fake.share_file(host, "F0NEW", "new.txt", b"fresh", "text/plain", updated=1_763_600_100)
    fake.connect_stub("F0DENIED", denied=True)
    source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=url))
    try:
        context = SyncContext()
        fresh = await source.refresh_file(
            FileRef(file_id="F0NEW", name="new.txt", parent_document_id="C1/1.000100", url=None), context
        )
        assert (fresh.url, fresh.edit_stamp, fresh.with_token) == (
            obj["url_private_download"],
            "1763600100",
            True,
        )
        denied = await source.refresh_file(
            FileRef(file_id="F0DENIED", name="x", parent_document_id="C1/1.000100", url="u"), context
        )
        assert denied.url is None
        assert source.file_token(context) == TOKEN
        assert fake.calls["files.info"] == 2
    finally:
        await source.aclose()


def test_a_file_shared_in_two_threads_belongs_to_the_oldest() -> None:
    def entry(parent: str) -> dict[str, Any]:
        return dataclasses.asdict(
            FileRef(file_id="F1", name="a.pdf", parent_document_id=parent, url="https://files.slack.com/x")
        )

    # Keys as jsonb may return them: not in time order (numerically 3 < 20).
    shown = files_shown(
        {"20.000100": [entry("C1/20.000100")], "3.000100": [entry("C1/3.000100")], "5.000100": "not a list"}
    )
    assert [(f.file_id, f.parent_document_id) for f in shown] == [("F1", "C1/3.000100")]
