"""Slack canvases as documents (issue 39), end to end: the real slack-sdk against the Slack
stand-in (``canvases.getContent``, ``files.info``, ``conversations.*``), the real worker and
Postgres. A file event becomes a ``canvas:<file id>`` job; the canvas's Markdown, title and its
channel's audience become its document (kind ``canvas``); an edit rewrites it; a deleted
canvas (``canvas_not_found``) is tombstoned in the change feed; a token without
``canvases:read`` fails the job with the scope it lacks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from test_slack_parse import sign, slack
from waiting import e2e_settings, running_worker, until

from debounce import queue, registry, workspaces
from debounce.contract import Audience, BackfillPage, SyncContext
from debounce.documents import feed
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from integrations.slack.canvases import canvas_audience, house_markdown, is_canvas, maybe_canvas
from integrations.slack.files import document_of, file_ref
from integrations.slack.settings import SlackSettings
from integrations.slack.sync import SlackSyncer
from standins.file_host import FileHost
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

TOKEN = "xoxb-canvases"
PUBLIC = "C0CANVAS"
PRIVATE = "G0CANVAS"
CANVAS = "F0CANVAS1"
MARKDOWN = "# Onboarding\r\n\r\nAsk ![](@U0ALICE) in ![](#C0CANVAS).   \n\n- [ ] laptop\n- [x] badge\n"


@pytest.fixture
def fake() -> Iterator[tuple[FakeSlack, str]]:
    stand_in = FakeSlack(token=TOKEN)
    stand_in.add_channel(PUBLIC)
    stand_in.add_channel(PRIVATE)
    stand_in.set_members(PRIVATE, ["U0ALICE", "U0BOB"])
    with BackgroundServer(stand_in.app()) as server:
        yield stand_in, server.url + "/api/"


@pytest.fixture
async def worker(
    pool: AsyncConnectionPool[Any], database_url: str, fake: tuple[FakeSlack, str]
) -> AsyncIterator[SlackSyncer]:
    settings = e2e_settings(worker_concurrency=2)
    source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=fake[1]))
    async with running_worker(settings, pool, {"slack": source}, database_url):
        yield source
    await source.aclose()


async def deliver(
    pool: AsyncConnectionPool[Any],
    fake: FakeSlack,
    event_type: str,
    event_id: str,
    workspace_id: int | None = None,
) -> None:
    """What the web does with a file event Slack sends: the parser's job, enqueued now (for
    ``workspace_id``: the web's directory finds it by the envelope's team)."""
    envelope = fake.canvas_event(event_type, CANVAS, event_id=event_id)
    body = json.dumps(envelope).encode()
    parsed = slack().parse_webhook(sign(body), body)
    assert [e.source_page_id for e in parsed.events] == [f"canvas:{CANVAS}"]
    await queue.enqueue(
        pool,
        [
            JobEvent("slack", e.source_page_id, e.payload, e.event_id, 0, 0, workspace_id=workspace_id)
            for e in parsed.events
        ],
    )


async def _doc(store: DocumentStore, *, deleted: bool = False, text: str | None = None) -> Any:
    row = await store.get("slack", f"canvas:{CANVAS}")
    if row is None or (row["deleted_at"] is not None) != deleted:
        return None
    return row if text is None or text in row["content"] else None


async def test_a_canvas_syncs_on_its_events_and_is_tombstoned_when_gone(
    pool: AsyncConnectionPool[Any], fake: tuple[FakeSlack, str], worker: SlackSyncer
) -> None:
    stand_in, _ = fake
    store = DocumentStore(pool)
    stand_in.add_canvas(CANVAS, "Onboarding checklist", MARKDOWN, channels=(PUBLIC,), updated=1_763_700_000)
    await deliver(pool, stand_in, "file_created", "Ev0CANV1")

    doc = await until(lambda: _doc(store))
    assert doc["title"] == "Onboarding checklist"
    assert doc["content"] == "# Onboarding\n\nAsk @U0ALICE in #C0CANVAS.\n\n- [ ] laptop\n- [x] badge\n"
    assert doc["url"] == f"https://debounce-demo.slack.com/docs/T061EG9R6/{CANVAS}"
    assert doc["metadata"]["kind"] == "canvas" and doc["metadata"]["conversations"] == [PUBLIC]
    assert doc["metadata"]["edit_stamp"] == "1763700000"
    assert (doc["audience_kind"], doc["audience_members"]) == ("public_channel", None)

    stand_in.edit_canvas(CANVAS, "# Onboarding\n\nAsk Bob.\n")
    await deliver(pool, stand_in, "file_change", "Ev0CANV2")
    await until(lambda: _doc(store, text="Ask Bob."))

    stand_in.delete_canvas(CANVAS)
    await deliver(pool, stand_in, "file_deleted", "Ev0CANV3")
    await until(lambda: _doc(store, deleted=True))
    await servable(pool)
    page = await feed.read_changes(pool, None, 1000, document_kind="canvas")
    ops = [c.op for c in page.changes if c.document_id == f"canvas:{CANVAS}"]
    assert ops[0] == "upsert" and ops[-1] == "delete" and len(ops) == 3
    assert stand_in.calls["canvases.getContent"] == 3


async def test_a_canvas_of_a_private_channel_carries_its_members(
    pool: AsyncConnectionPool[Any], fake: tuple[FakeSlack, str], worker: SlackSyncer
) -> None:
    stand_in, _ = fake
    stand_in.add_canvas(CANVAS, "Secret plans", "plans\n", channels=(PRIVATE,), channel_canvas=True)
    await deliver(pool, stand_in, "file_shared", "Ev0CANV4")
    doc = await until(lambda: _doc(DocumentStore(pool)))
    assert (doc["audience_kind"], doc["audience_members"]) == ("private_channel", ["U0ALICE", "U0BOB"])


async def test_a_token_without_canvases_read_fails_the_job_and_marks_the_workspace(
    pool: AsyncConnectionPool[Any], fake: tuple[FakeSlack, str], worker: SlackSyncer
) -> None:
    stand_in, _ = fake
    workspace = await workspaces.ensure_env_workspace(pool, "slack", TOKEN)
    assert workspace["missing_scopes"] == []
    stand_in.add_canvas(CANVAS, "Onboarding", "text\n", channels=(PUBLIC,))
    stand_in.withhold_scope("canvases:read")
    await deliver(pool, stand_in, "file_change", "Ev0CANV5", workspace_id=workspace["id"])

    async def failed() -> Any:
        page = await queue.list_jobs(pool, status="failed", source_page_id=f"canvas:{CANVAS}")
        return page.jobs[0] if page.jobs else None

    job = await until(failed)
    assert "missing_scope: the app lacks the canvases:read scope" in (job.last_error or "")
    assert job.attempts == 1  # permanent: not retried
    assert await DocumentStore(pool).get("slack", f"canvas:{CANVAS}") is None
    (listed,) = await until(lambda: _with_missing_scopes(pool, workspace["id"]))
    assert listed["missing_scopes"] == ["canvases:read"] and listed["missing_scopes_at"] is not None
    # a new token (the operator added the scope and reinstalled) asks again
    renewed = await workspaces.ensure_env_workspace(pool, "slack", TOKEN + "-reinstalled")
    assert renewed["missing_scopes"] == [] and renewed["missing_scopes_at"] is None


async def test_a_file_event_of_an_attachment_asks_files_info_only(
    pool: AsyncConnectionPool[Any], fake: tuple[FakeSlack, str], worker: SlackSyncer
) -> None:
    """Slack's file events carry the id only, so an attachment's event becomes a canvas job;
    its ``files.info`` says it is a PDF, and the sync ends there: no ``canvases.getContent``,
    no document, no deletion."""
    stand_in, _ = fake
    stand_in.share_file(FileHost(), "F0ATTACH1", "brief.pdf", b"%PDF-1.4 stub", "application/pdf")
    envelope = stand_in.canvas_event("file_shared", "F0ATTACH1", event_id="Ev0ATTACH1")
    body = json.dumps(envelope).encode()
    parsed = slack().parse_webhook(sign(body), body)
    assert [e.source_page_id for e in parsed.events] == ["canvas:F0ATTACH1"]
    await queue.enqueue(
        pool, [JobEvent("slack", e.source_page_id, e.payload, e.event_id, 0, 0) for e in parsed.events]
    )

    async def completed() -> Any:
        page = await queue.list_jobs(pool, status="completed", source_page_id="canvas:F0ATTACH1")
        return page.jobs[0] if page.jobs else None

    await until(completed)
    assert stand_in.calls["files.info"] == 1
    assert stand_in.calls["canvases.getContent"] == 0
    assert await DocumentStore(pool).get("slack", "canvas:F0ATTACH1") is None


async def _with_missing_scopes(pool: AsyncConnectionPool[Any], workspace_id: int) -> list[dict[str, Any]]:
    rows = await workspaces.list_workspaces(pool, workspace_id)
    return rows if rows and rows[0]["missing_scopes"] else []


def test_file_events_become_canvas_jobs_unless_they_say_another_type() -> None:
    envelope = FakeSlack(token=TOKEN).canvas_event("file_shared", "F0PDF", event_id="Ev1", channel=PUBLIC)
    envelope["event"]["file"] = {"id": "F0PDF", "filetype": "pdf", "mimetype": "application/pdf"}
    body = json.dumps(envelope).encode()
    result = slack().parse_webhook(sign(body), body)
    assert result.events == [] and "not a canvas" in (result.note or "")
    assert maybe_canvas({"id": "F1"}) and maybe_canvas({"id": "F1", "filetype": "quip"})
    assert not maybe_canvas({"id": "F1", "filetype": "pdf"})
    # a manual re-sync names a canvas by its job key
    assert registry.normalize_page_id("slack", f"canvas:{CANVAS}") == f"canvas:{CANVAS}"
    with pytest.raises(ValueError, match="canvas:<file id>"):
        registry.normalize_page_id("slack", "canvas:nope")


def test_a_canvas_in_a_message_is_named_as_its_document_not_downloaded() -> None:
    canvas = FakeSlack(token=TOKEN).add_canvas("F0C", "Plan", "x", channels=(PUBLIC,))
    assert is_canvas(canvas)
    assert document_of(canvas) == "canvas:F0C"
    assert file_ref(canvas, f"{PUBLIC}/1.000100") is None


def test_house_markdown_and_audience_of_several_conversations() -> None:
    assert house_markdown("") == "" and house_markdown("a  \r\nb") == "a\nb\n"
    assert house_markdown("![](@U01ABC) and ![](#C02DEF) ![](https://x/y.png)") == (
        "@U01ABC and #C02DEF ![](https://x/y.png)\n"
    )
    private = Audience("private_channel", ("U1", "U2"))
    assert canvas_audience([]) is None
    assert canvas_audience([private, Audience("public_channel")]) == Audience("public_channel")
    assert canvas_audience([private, Audience("mpim", ("U3",))]) == Audience(
        "private_channel", ("U1", "U2", "U3")
    )


async def test_the_backfill_lists_canvases_after_the_conversations(fake: tuple[FakeSlack, str]) -> None:
    stand_in, url = fake
    for i in range(3):
        stand_in.add_canvas(
            f"F0CANV{i}", f"Canvas {i}", "text\n", channels=(PUBLIC,), updated=1_763_700_000 + i
        )
    source = SlackSyncer(SlackSettings(slack_bot_token=TOKEN, slack_api_url=url))
    source.backfill.list_limit = 2
    try:
        pages = []
        cursor: str | None = None
        while True:
            page = await source.backfill_page(cursor, SyncContext())
            pages.append(page)
            cursor = page.cursor
            if cursor is None:
                break
        canvases = [i for p in pages for i in p.items if i.source_page_id.startswith("canvas:")]
        assert [i.source_page_id for i in canvases] == ["canvas:F0CANV0", "canvas:F0CANV1", "canvas:F0CANV2"]
        assert canvases[2].edited_at == datetime.fromtimestamp(1_763_700_002, UTC)
        assert canvases[0].title == "Canvas 0"
        listed = [p for m, p in stand_in.requests if m == "files.list"]
        assert [(p["types"], p["page"]) for p in listed] == [("canvas", "1"), ("canvas", "2")]
        # without files:read the canvases are not listed, and the listing ends
        stand_in.withhold_scope("files:read")
        refused = await source.backfill_page("canvases:1", SyncContext())
        assert refused == BackfillPage(items=[], cursor=None)
    finally:
        await source.aclose()
