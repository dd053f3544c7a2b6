"""Removing a workspace in two steps (docs/claim.md, "Removing a workspace"): ``begin_removal``
marks it ``removing`` in a transaction of its own, waiting for every statement that is making a
row refer to it; after it, nothing new refers to it (webhooks, re-syncs, retries, backfills,
costs); ``remove_workspace`` then deletes it with every row it must lock in its snapshot. The
one-statement removal of before deadlocked with a backfill requested and recorded while it ran.
Waits are observed (pg_stat_activity), not timed."""

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
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.cli import sign_request
from debounce.config import Settings, SourceWindow
from debounce.contract import BackfillItem
from debounce.infra.db import fetch_one
from debounce.infra.secrets import Keyring, new_key
from debounce.infra.sql import queries
from debounce.queue import backfills
from debounce.types import EnqueueOutcome, JobEvent
from debounce.web import create_app
from debounce.workspaces.sync_costs import SyncCosts

KEYS = Keyring(new_key())
WORKSPACES = queries("workspaces")
T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SECRET = "secret_removal_signing_0000000"


async def connect(pool: AsyncConnectionPool[Any], name: str) -> int:
    row = await workspaces.save(pool, KEYS, source_type="notion", external_id=name, name=name,
                                credentials={"access_token": f"tok-{name}"})
    return int(row["id"])


def event(ws: int, page: str, n: int = 0) -> JobEvent:
    return JobEvent("notion", page, {"n": n}, event_id=f"{page}-{n}", debounce_seconds=0.0,
                    max_wait_seconds=60.0, workspace_id=ws)


async def test_a_removal_waits_for_the_statements_referring_to_its_workspace(
        pool: AsyncConnectionPool[Any], database_url: str) -> None:
    """An enqueue and a backfill request for the workspace, in a transaction still open: the
    removal's first step waits for it (the reference lock it holds shared, and the foreign key
    locks of its rows), and its second step then sees — and removes — what it wrote. The
    one-statement removal of before did not see the job: it kept it, pending, with no
    workspace."""
    ws = await connect(pool, "A")
    async with await psycopg.AsyncConnection.connect(database_url) as holder, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as remover, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe:
        (brief,) = await queue.enqueue(holder, [event(ws, "p1")])
        assert brief.outcome is EnqueueOutcome.CREATED
        started = await backfills.request(holder, ws)
        assert started is not None and started["inserted"]
        removal = asyncio.create_task(workspaces.remove(remover, ws))
        await waiting_on_a_lock(probe, remover.info.backend_pid, removal)
        await holder.commit()
        dropped = await removal
    assert dropped == 1                                   # the job committed while it waited
    assert await scalar(pool, "select count(*) from workspaces where id = %s", ws) == 0
    assert await scalar(pool, "select count(*) from enumerations where workspace_id = %s", ws) == 0
    assert await scalar(pool, "select count(*) from sync_jobs") == 0


async def test_the_removal_waits_for_a_guard_that_wrote_nothing(
        pool: AsyncConnectionPool[Any], database_url: str) -> None:
    """The reference lock itself, without a foreign key lock to wait for: an empty backfill page
    refers to nothing new (it moves its backfill's cursor), yet holds the workspace's reference
    lock (shared) until its transaction ends, and the removal's first step waits on it."""
    ws = await connect(pool, "A")
    started = await backfills.request(pool, ws)
    leased = await backfills.lease(pool, "enum", ["notion"], 60.0)
    assert started is not None and leased is not None and leased["id"] == started["id"]
    async with await psycopg.AsyncConnection.connect(database_url) as holder, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as remover, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe:
        recorded = await backfills.record_page(holder, started["id"], "enum", [], "c1",
                                               lease_seconds=60.0, max_attempts=3)
        assert recorded is not None and recorded["page_enqueued"] == 0
        removal = asyncio.create_task(workspaces.remove(remover, ws))
        await waiting_on_a_lock(probe, remover.info.backend_pid, removal)
        cur = await probe.execute("select wait_event from pg_stat_activity where pid = %s",
                                  (remover.info.backend_pid,))  # test-only SQL
        assert await cur.fetchone() == ("advisory",)
        await holder.rollback()
        assert await removal == 0
    assert await scalar(pool, "select count(*) from enumerations") == 0


async def test_a_workspace_being_removed_is_not_routed_scheduled_or_leased(
        pool: AsyncConnectionPool[Any]) -> None:
    going, staying = await connect(pool, "A"), await connect(pool, "B")
    await fetch_one(pool, WORKSPACES["begin_removal"], {"id": going})
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
        pool, ["notion"], ["notion"], interval=0.0, full_interval=0.0)
    assert [r["workspace_id"] for r in reconciling] == [staying]


async def test_once_a_removal_began_nothing_new_refers_to_the_workspace(
        pool: AsyncConnectionPool[Any]) -> None:
    """Between the two steps (a crash there, or the instant between them) the workspace takes
    no new job, backfill, backfill page, re-check, re-sync, retry or cost; the claim leaves its
    jobs; the pruner's finish_removals then removes it. Another workspace is untouched."""
    ws, other = await connect(pool, "A"), await connect(pool, "B")
    await queue.enqueue(pool, [event(ws, "kept"), event(other, "theirs")], now=T0)
    failed = await queue.claim(pool, "w", limit=8, lease_seconds=60,
                                               source_slots={"notion": 8}, now=T0)
    assert len(failed) == 2
    ours = next(c.job for c in failed if c.job.workspace_id == ws)
    await queue.fail_many(pool, [queue.Failure(ours, "boom", permanent=True)], now=T0)
    await queue.complete_many(pool, [c.job for c in failed if c.job is not ours], now=T0)
    await queue.enqueue(pool, [event(ws, "pending", 1)], now=T0)
    started = await backfills.request(pool, ws)
    assert started is not None
    leased = await backfills.lease(pool, "enum", ["notion"], 60.0)
    assert leased is not None and leased["workspace_id"] == ws

    assert await fetch_one(pool, WORKSPACES["begin_removal"], {"id": ws}) == {"id": ws}

    briefs = await queue.enqueue(pool, [event(ws, "new", 2), event(other, "new-b", 2)],
                                       now=T0)
    assert [b.outcome for b in briefs] == [EnqueueOutcome.WORKSPACE_REMOVED,
                                           EnqueueOutcome.CREATED]
    assert briefs[0].job_id is None and briefs[0].scheduled_at is None
    assert await backfills.request(pool, ws) is None
    items = [BackfillItem("listed-1", None), BackfillItem("listed-2", None)]
    assert await backfills.record_page(pool, leased["id"], "enum", items, "c1",
                                       lease_seconds=60.0, max_attempts=3) is None
    assert await backfills.finish(pool, leased["id"], "enum", max_attempts=3) is None
    with pytest.raises(queue.JobConflict, match="being removed"):
        await queue.resync(pool, "notion", "never-seen", workspace_id=ws)
    with pytest.raises(queue.JobConflict, match="being removed"):
        await queue.retry(pool, ours.id)
    costs = SyncCosts(pool)
    costs.add(ws, "live", 3, 1)
    costs.add(other, "live", 5, 2)
    await costs.flush()
    assert await scalar(pool, "select json_object_agg(workspace_id, requests) "
                              "from workspace_sync_costs") == {str(other): 5}
    claimed = await queue.claim(pool, "w", limit=8, lease_seconds=60,
                                                source_slots={"notion": 8},
                                                now=T0 + timedelta(seconds=1))
    assert [c.job.source_page_id for c in claimed] == ["new-b"]
    assert await scalar(pool, "select count(*) from sync_jobs where workspace_id = %s "
                              "and status = 'pending'", ws) == 1        # 'pending' only
    with pytest.raises(workspaces.WorkspaceNotFound):   # a removal is not undone by a resume
        await workspaces.set_status(pool, ws, "active")
    assert await scalar(pool, "select status from workspaces where id = %s", ws) == "removing"

    assert await workspaces.finish_removals(pool, older_than=60.0) == []   # under way
    assert await workspaces.finish_removals(pool) == [ws]
    assert await scalar(pool, "select count(*) from workspaces where id = %s", ws) == 0
    assert await scalar(pool, "select count(*) from sync_jobs where status = 'pending'") == 0
    assert await scalar(pool, "select count(*) from sync_jobs where workspace_id = %s",
                        other) == 2
    assert await workspaces.finish_removals(pool) == []


async def test_connecting_a_workspace_again_finishes_its_removal_first(
        pool: AsyncConnectionPool[Any]) -> None:
    """A re-install of a workspace left ``removing`` (a crash between the steps) is not
    refused: the removal ends, and the workspace is connected as a new row."""
    ws = await connect(pool, "A")
    await fetch_one(pool, WORKSPACES["begin_removal"], {"id": ws})
    again = await connect(pool, "A")
    assert again != ws
    assert await scalar(pool, "select json_agg(json_build_array(id, status)) from workspaces") \
        == [[again, "active"]]


@pytest.fixture
async def web(pool: AsyncConnectionPool[Any], database_url: str) -> AsyncIterator[
        httpx.AsyncClient]:
    settings = Settings(database_url=database_url, admin_token="admin", secret_key=new_key(),
                        notion_webhook_secret=SECRET,
                        windows={"notion": SourceWindow(0, 0)},
                        backfill_on_connect=False, reconcile_interval_seconds=0)
    app = create_app(settings, pool=pool)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="https://debounce.test") as client:
        yield client


async def test_a_webhook_of_a_workspace_just_removed_is_answered_200_and_enqueues_nothing(
        pool: AsyncConnectionPool[Any], web: httpx.AsyncClient) -> None:
    """The web's routes are up to a few seconds old: right after a removal, an event is still
    routed to the removed workspace. It used to fail the whole batch on the foreign key (a 5xx
    for every event batched with it); it is now acknowledged, counted and dropped."""
    ws = await connect(pool, "W-removed")

    async def send(n: int) -> httpx.Response:
        body = {"id": f"evt-{n}", "type": "page.content_updated", "workspace_id": "W-removed",
                "timestamp": "2026-11-27T12:00:00.000Z",
                "entity": {"id": f"0000000{n}-0000-4000-8000-000000000000", "type": "page"},
                "data": {}}
        raw = json.dumps(body).encode()
        return await web.post("/webhooks/notion", content=raw,
                              headers=sign_request("notion", raw, SECRET))

    first = await send(1)
    assert first.status_code == 200 and first.json()["jobs"][0]["outcome"] == "created", \
        first.text
    assert await workspaces.remove(pool, ws) == 1
    second = await send(2)
    assert second.status_code == 200, second.text
    assert second.json()["jobs"] == [{"outcome": "workspace_removed", "job_id": None,
                                      "scheduled_at": None}]
    assert await scalar(pool, "select count(*) from sync_jobs") == 0
    metrics = (await web.get("/metrics")).text
    assert 'outcome="workspace_removed"' in metrics
