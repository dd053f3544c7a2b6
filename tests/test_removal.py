"""Removing a workspace is a tombstone (docs/claim.md, "Removing a workspace"): one statement
sets its status ``removed`` and erases its credentials, locking its row only; the claim, the
web's routes and the backfills pass it by; its pending jobs and running backfills are finished
in batches (``queue.cancel_removed``), its documents keep their workspace unless the removal
asks for their deletion (``purge_removed``); connecting it again revives the same row. Waits are
observed (pg_stat_activity), not timed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from db_probe import scalar, waiting_on_a_lock
from feed_wait import servable
from one_job import mark_completed
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.cli import main, sign_request
from debounce.config import Settings, SourceWindow
from debounce.contract import BackfillItem
from debounce.documents import feed
from debounce.documents.store import Document, DocumentStore, purge_removed
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import backfills
from debounce.types import EnqueueOutcome, JobEvent
from debounce.web import create_app
from debounce.worker import maintenance

KEYS = Keyring(new_key())
T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SECRET = "secret_removal_signing_0000000"


async def connect(pool: AsyncConnectionPool[Any], name: str) -> int:
    row = await workspaces.save(
        pool,
        KEYS,
        source_type="notion",
        external_id=name,
        name=name,
        credentials={"access_token": f"tok-{name}"},
    )
    return int(row["id"])


def event(ws: int, page: str, n: int = 0) -> JobEvent:
    return JobEvent(
        "notion",
        page,
        {"n": n},
        event_id=f"{page}-{n}",
        debounce_seconds=0.0,
        max_wait_seconds=60.0,
        workspace_id=ws,
    )


async def attach(pool: AsyncConnectionPool[Any], ws: int, *pages: str) -> None:
    """Documents of ``pages`` written by workspace ``ws``'s syncs (test-only SQL: a sync's
    writes carry no workspace of their own; the worker sets it)."""
    for page in pages:
        await DocumentStore(pool).upsert(Document("notion", page, page, page, f"# {page}"))
    async with pool.connection() as conn:
        await conn.execute(
            "update documents set workspace_id = %s where source_page_id = any(%s)", (ws, list(pages))
        )


async def test_a_removal_locks_one_row_and_what_it_waits_for_then_is_cancelled(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """An enqueue and a backfill request for the workspace, in a transaction still open: the
    enqueue moved the workspace's line, so it holds the row, and the removal waits for it —
    holding nothing itself, so it cannot be part of a deadlock. What they wrote is then
    finished by cancel_removed: the job failed with its reason, the backfill cancelled; the
    rows stay, of their workspace."""
    ws = await connect(pool, "A")
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as remover,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe,
    ):
        (brief,) = await queue.enqueue(holder, [event(ws, "p1")])
        assert brief.outcome is EnqueueOutcome.CREATED
        started = await backfills.request(holder, ws)
        assert started is not None and started["inserted"]
        removal = asyncio.create_task(workspaces.remove(remover, ws))
        await waiting_on_a_lock(probe, remover.info.backend_pid, removal)
        await holder.commit()
        assert (await removal)["status"] == "removed"
    assert await queue.cancel_removed(pool) == {"jobs": 1, "backfills": 1}
    assert await queue.cancel_removed(pool) == {"jobs": 0, "backfills": 0}
    assert await scalar(
        pool, "select json_agg(json_build_array(status, last_error, workspace_id)) from finished_jobs"
    ) == [["failed", "cancelled: its workspace was removed", ws]]
    assert await scalar(
        pool, "select json_agg(json_build_array(status, error)) from backfills where workspace_id = %s", ws
    ) == [["cancelled", "its workspace was removed"]]
    assert await scalar(
        pool,
        "select json_build_array(status, credentials is null, name, "
        "external_id) from workspaces where id = %s",
        ws,
    ) == ["removed", True, "A", "A"]


async def test_a_removed_workspace_is_not_routed_scheduled_or_leased(pool: AsyncConnectionPool[Any]) -> None:
    going, staying = await connect(pool, "A"), await connect(pool, "B")
    await workspaces.remove(pool, going)
    directory = workspaces.Directory(pool)
    await directory.refresh(force=True)
    assert directory.lookup("notion", "A") == workspaces.Route(False, None, "unknown_workspace")
    assert directory.lookup("notion", "B") == workspaces.Route(True, staying)
    started = await backfills.schedule_backfills(pool, ["notion"])
    assert [r["workspace_id"] for r in started] == [staying]
    leased = await backfills.lease(pool, "enum", ["notion"], 60.0)
    assert leased is not None and leased["workspace_id"] == staying
    assert await backfills.lease(pool, "enum", ["notion"], 60.0) is None
    await backfills.finish(pool, leased["id"], "enum", max_attempts=3)
    reconciling = await backfills.schedule_reconciliations(
        pool, ["notion"], ["notion"], interval=0.0, full_interval=0.0
    )
    assert [r["workspace_id"] for r in reconciling] == [staying]


async def test_after_a_removal_nothing_new_refers_to_the_workspace(pool: AsyncConnectionPool[Any]) -> None:
    """The workspace takes no new job, backfill, backfill page, re-check, re-sync or retry; the
    claim leaves its jobs; cancel_removed finishes them. Another workspace is untouched."""
    ws, other = await connect(pool, "A"), await connect(pool, "B")
    await queue.enqueue(pool, [event(ws, "kept"), event(other, "theirs")], now=T0)
    claimed = await queue.claim(pool, "w", limit=8, lease_seconds=60, source_slots={"notion": 8}, now=T0)
    assert len(claimed) == 2
    ours = next(c.job for c in claimed if c.job.workspace_id == ws)
    await queue.settle(pool, failed=[queue.Failure(ours, "boom", permanent=True)], now=T0)
    await queue.settle(pool, completed=[c.job for c in claimed if c.job is not ours], now=T0)
    await queue.enqueue(pool, [event(ws, "pending", 1)], now=T0)
    started = await backfills.request(pool, ws)
    assert started is not None
    leased = await backfills.lease(pool, "enum", ["notion"], 60.0)
    assert leased is not None and leased["workspace_id"] == ws

    assert (await workspaces.remove(pool, ws))["pending_jobs"] == 1

    briefs = await queue.enqueue(pool, [event(ws, "new", 2), event(other, "new-b", 2)], now=T0)
    assert [b.outcome for b in briefs] == [EnqueueOutcome.WORKSPACE_REMOVED, EnqueueOutcome.CREATED]
    assert briefs[0].job_id is None and briefs[0].scheduled_at is None
    assert await backfills.request(pool, ws) is None
    items = [BackfillItem("listed-1", None), BackfillItem("listed-2", None)]
    assert (
        await backfills.record_page(
            pool, leased["id"], "enum", items, "c1", lease_seconds=60.0, max_attempts=3
        )
        is None
    )
    assert await backfills.finish(pool, leased["id"], "enum", max_attempts=3) is None
    with pytest.raises(queue.JobConflict, match="removed"):
        await queue.resync(pool, "notion", "never-seen", workspace_id=ws)
    with pytest.raises(queue.JobConflict, match="removed"):
        await queue.retry(pool, ours.id)
    claimed = await queue.claim(
        pool, "w", limit=8, lease_seconds=60, source_slots={"notion": 8}, now=T0 + timedelta(seconds=1)
    )
    assert [c.job.source_page_id for c in claimed] == ["new-b"]
    with pytest.raises(workspaces.WorkspaceNotFound):  # a removal is not undone by a resume
        await workspaces.set_status(pool, ws, "active")

    assert await queue.cancel_removed(pool, workspace_id=other) == {"jobs": 0, "backfills": 0}
    assert await queue.cancel_removed(pool, workspace_id=ws) == {"jobs": 1, "backfills": 1}
    assert await scalar(pool, "select count(*) from sync_jobs where status = 'pending'") == 0
    assert (
        await scalar(
            pool,
            "select (select count(*) from sync_jobs where workspace_id = %s)"
            " + (select count(*) from finished_jobs where workspace_id = %s)",
            ws,
            ws,
        )
        == 2
    )
    assert (
        await scalar(
            pool,
            "select (select count(*) from sync_jobs where workspace_id = %s)"
            " + (select count(*) from finished_jobs where workspace_id = %s)",
            other,
            other,
        )
        == 2
    )


async def test_a_sync_running_through_a_removal_keeps_its_workspace_and_comes_back_inert(
    pool: AsyncConnectionPool[Any],
) -> None:
    """A sync running when its workspace is removed finishes; an event during it leaves a
    follow-up, still of its workspace (not a job of no workspace, which the claim would serve
    with the environment's token): the claim leaves it, cancel_removed finishes it."""
    ws = await connect(pool, "A")
    await queue.enqueue(pool, [event(ws, "p")], now=T0)
    (running,) = [
        c.job
        for c in await queue.claim(pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=T0)
    ]
    await queue.enqueue(pool, [event(ws, "p", 1)], now=T0)  # during the sync
    await workspaces.remove(pool, ws)
    (done,) = (await queue.settle(pool, completed=[running], now=T0)).values()
    assert done.status.value == "pending" and done.workspace_id == ws  # the follow-up
    assert (
        await queue.claim(
            pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=T0 + timedelta(seconds=5)
        )
        == []
    )
    assert (await queue.cancel_removed(pool))["jobs"] == 1


async def test_connecting_a_removed_workspace_again_revives_its_row_and_documents(
    pool: AsyncConnectionPool[Any],
) -> None:
    """The same source and source id: the same row (same id), active, new credentials; its
    documents never left it, and its history (jobs, backfills) is its own again."""
    ws = await connect(pool, "A")
    await attach(pool, ws, "p1", "p2")
    await workspaces.remove(pool, ws)
    assert await scalar(pool, "select count(*) from documents where workspace_id = %s", ws) == 2
    again = await workspaces.save(
        pool, KEYS, source_type="notion", external_id="A", name="A2", credentials={"access_token": "tok-A-2"}
    )
    assert again["id"] == ws and not again["inserted"] and again["status"] == "active"
    assert await scalar(
        pool, "select json_build_array(name, credentials is not null, purge_documents) from workspaces"
    ) == ["A2", True, False]
    [listed] = await workspaces.list_workspaces(pool, ws)
    assert listed["documents"] == 2
    started = await backfills.request(pool, ws)
    assert started is not None and started["workspace_id"] == ws


async def test_purging_puts_one_deletion_per_document_in_the_feed(pool: AsyncConnectionPool[Any]) -> None:
    """The removal asks for its documents' deletion; purge_removed marks them deleted in
    batches (here 2 a statement): one change each, op delete, of the workspace. A document
    already deleted and another workspace's document are left alone."""
    ws, other = await connect(pool, "A"), await connect(pool, "B")
    await attach(pool, ws, "a1", "a2", "a3", "gone")
    await attach(pool, other, "b1")
    await DocumentStore(pool).mark_deleted("notion", ["gone"])
    await servable(pool)
    before = await feed.head(pool)
    await workspaces.remove(pool, ws, purge_documents=True)
    assert await purge_removed(pool, batch=2) == 3
    assert await purge_removed(pool, batch=2) == 0
    await servable(pool)
    page = await feed.read_changes(pool, before, 10)
    assert sorted((c.document_id, c.op, c.workspace_id) for c in page.changes) == [
        ("a1", "delete", ws),
        ("a2", "delete", ws),
        ("a3", "delete", ws),
    ]
    assert await scalar(pool, "select count(*) from documents where deleted_at is null") == 1


def test_the_cli_removes_a_workspace_and_purges_its_documents(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``debounce workspaces remove N --purge-documents``: its pending job cancelled, its
    documents marked deleted, one change each in the feed."""
    monkeypatch.setenv("DATABASE_URL", database_url)

    async def setup() -> int:
        async with AsyncConnectionPool(database_url, open=False) as pool:
            ws = await connect(pool, "CLI")
            await attach(pool, ws, "c1", "c2")
            await queue.enqueue(pool, [event(ws, "c3")], now=T0)
            return ws

    ws = asyncio.run(setup())
    with psycopg.connect(database_url) as conn:
        (changes_before,) = conn.execute("select count(*) from document_changes").fetchone() or (0,)
    assert main(["workspaces", "remove", str(ws), "--purge-documents"]) == 0
    out = capsys.readouterr().out
    assert (
        f"removed workspace {ws}" in out
        and "1 pending jobs and 0 backfills cancelled" in out
        and "2 documents marked deleted" in out
    ), out
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("select op, count(*) from document_changes group by op order by op").fetchall()
        (after,) = conn.execute("select count(*) from document_changes").fetchone() or (0,)
    assert after - changes_before == 2 and ("delete", 2) in rows


async def test_the_pruners_upkeep_keeps_a_workspace_at_its_limit_in_its_flag(
    pool: AsyncConnectionPool[Any],
) -> None:
    """A workspace with K syncs in flight is at_concurrency_limit; the pruner's upkeep repairs
    the lines with the workers' K, so the flag stays (it used to be cleared at every prune, and
    the next claim set it again). Below K it is cleared."""
    ws = await connect(pool, "K")
    await queue.enqueue(pool, [event(ws, f"p{i}") for i in range(3)], now=T0)
    running = [
        c.job
        for c in await queue.claim(
            pool, "w", limit=3, lease_seconds=60, source_slots={"notion": 3}, now=T0, workspace_concurrency=2
        )
    ]
    assert len(running) == 2

    async def flag() -> Any:
        return await scalar(pool, "select at_concurrency_limit from workspaces where id = %s", ws)

    assert await flag() is True
    assert (await maintenance.upkeep(pool, workspace_concurrency=2))["lines"] == 0
    assert await flag() is True
    async with pool.connection() as conn:  # a sync ended without the queue (test-only SQL)
        await mark_completed(conn, running[0].id)
    assert (await maintenance.upkeep(pool, workspace_concurrency=2))["lines"] == 1
    assert await flag() is False


@pytest.fixture
async def web(pool: AsyncConnectionPool[Any], database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=database_url,
        admin_token="admin",
        secret_key=new_key(),
        notion_webhook_secret=SECRET,
        windows={"notion": SourceWindow(0, 0)},
        backfill_on_connect=False,
        reconcile_interval_seconds=0,
    )
    app = create_app(settings, pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://debounce.test") as client,
    ):
        yield client


async def test_a_webhook_of_a_workspace_just_removed_is_answered_200_and_enqueues_nothing(
    pool: AsyncConnectionPool[Any], web: httpx.AsyncClient
) -> None:
    """The web's routes are up to a few seconds old: right after a removal (here by another
    process), an event is still routed to the removed workspace. It is acknowledged, counted and
    dropped. The admin API's removal refreshes the routes: an event is then dropped as an
    unknown workspace's (not accepted with no workspace, although the source has no other)."""
    ws = await connect(pool, "W-removed")

    async def send(n: int) -> httpx.Response:
        body = {
            "id": f"evt-{n}",
            "type": "page.content_updated",
            "workspace_id": "W-removed",
            "timestamp": "2026-11-27T12:00:00.000Z",
            "entity": {"id": f"0000000{n}-0000-4000-8000-000000000000", "type": "page"},
            "data": {},
        }
        raw = json.dumps(body).encode()
        return await web.post("/webhooks/notion", content=raw, headers=sign_request("notion", raw, SECRET))

    first = await send(1)
    assert first.status_code == 200 and first.json()["jobs"][0]["outcome"] == "created", first.text
    await workspaces.remove(pool, ws)
    assert await queue.cancel_removed(pool, workspace_id=ws) == {"jobs": 1, "backfills": 0}
    second = await send(2)
    assert second.status_code == 200, second.text
    assert second.json()["jobs"] == [{"outcome": "workspace_removed", "job_id": None, "scheduled_at": None}]
    assert await scalar(pool, "select count(*) from sync_jobs where status = 'pending'") == 0
    metrics = (await web.get("/metrics")).text
    assert 'outcome="workspace_removed"' in metrics
    admin = {"Authorization": "Bearer admin"}
    bad = await web.post(f"/workspaces/{ws}/remove?purge_documents=maybe", headers=admin)
    assert bad.status_code == 400 and bad.json()["error"] == "bad_request"
    assert (await web.post("/workspaces/999999/remove", headers=admin)).status_code == 404
    again = await web.post(f"/workspaces/{ws}/remove?purge_documents=true", headers=admin)
    assert again.status_code == 200, again.text
    assert again.json()["workspace"]["status"] == "removed"
    assert again.json()["cancelled"] == {"jobs": 0, "backfills": 0}
    third = await send(3)
    assert third.status_code == 200 and third.json()["jobs"] == [], third.text
    assert await scalar(pool, "select count(*) from sync_jobs where status = 'pending'") == 0
