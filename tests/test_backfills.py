"""Backfill and reconciliation, the database side (``debounce.queue.backfills``): what a listing
page enqueues, idempotency, leases, reconciliations, and the deletion re-checks — on real Postgres,
with time controlled through ``now=``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.contract import BackfillItem
from debounce.documents.store import Document, DocumentStore
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import backfills
from debounce.types import JobEvent, JobStatus

T0 = datetime(2027, 1, 1, 12, 0, 0, tzinfo=UTC)  # after the real clock: rows default to now()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def add_workspace(pool: AsyncConnectionPool[Any], external_id: str, source_type: str = "notion") -> int:
    row = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type=source_type,
        external_id=external_id,
        name=external_id,
        credentials={"access_token": f"tok-{external_id}"},
    )
    return int(row["id"])


async def add_document(
    pool: AsyncConnectionPool[Any], workspace_id: int, page: str, edited: datetime
) -> None:
    await DocumentStore(pool).upsert(
        Document("notion", page, page, page, f"# {page}", source_updated_at=edited)
    )
    async with pool.connection() as conn:  # test-only SQL: the fence sets it in a sync
        await conn.execute(
            "update documents set workspace_id = %s where document_id = %s", (workspace_id, page)
        )


def item(page: str, edited: datetime | None) -> BackfillItem:
    return BackfillItem(page, edited, {"entity": {"id": page, "type": "page"}})


async def bulk_jobs(pool: AsyncConnectionPool[Any]) -> dict[str, Any]:
    page = await queue.list_jobs(pool, status=JobStatus.PENDING, limit=100)
    return {j.source_page_id: j for j in page.jobs}


async def test_a_listing_page_enqueues_what_is_missing_or_stale_once(pool: AsyncConnectionPool[Any]) -> None:
    ws = await add_workspace(pool, "W")
    await add_document(pool, ws, "current", at(0))
    await add_document(pool, ws, "stale", at(0))
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion",
                "edited",
                {"live": True},
                event_id="e1",
                debounce_seconds=300,
                max_wait_seconds=3600,
                workspace_id=ws,
            )
        ],
    )
    started = await backfills.request(pool, ws)
    assert started is not None and started["inserted"]
    again = await backfills.request(pool, ws)
    assert again is not None and not again["inserted"] and again["id"] == started["id"]
    leased = await backfills.lease(pool, "w1", ["notion"], 60)
    assert leased is not None and leased["id"] == started["id"]
    assert await backfills.lease(pool, "w2", ["notion"], 60) is None  # one at a time
    items = [item("current", at(0)), item("stale", at(60)), item("missing", at(0)), item("edited", at(0))]
    row = await backfills.record_page(
        pool, started["id"], "w1", items, "cursor-2", lease_seconds=60, max_attempts=5
    )
    assert row is not None
    assert (row["discovered"], row["enqueued"], row["current"], row["active"]) == (4, 2, 1, 1)
    assert row["cursor"] == "cursor-2" and row["newest_seen"] == at(60)
    jobs = await bulk_jobs(pool)
    assert jobs["stale"].priority == backfills.BULK_PRIORITY
    assert jobs["missing"].payload == {"entity": {"id": "missing", "type": "page"}}
    assert jobs["edited"].priority == 0 and jobs["edited"].payload == {"live": True}
    # The same page again (a worker that died before saving its cursor): nothing twice.
    row = await backfills.record_page(
        pool, started["id"], "w1", items, "cursor-2", lease_seconds=60, max_attempts=5
    )
    assert row is not None and row["page_enqueued"] == 0
    assert len(await bulk_jobs(pool)) == 3
    # A lost lease writes nothing.
    assert (
        await backfills.record_page(pool, started["id"], "w2", items, None, lease_seconds=60, max_attempts=5)
        is None
    )


async def test_a_deferred_enumeration_resumes_from_its_cursor_on_another_worker(
    pool: AsyncConnectionPool[Any],
) -> None:
    ws = await add_workspace(pool, "W")
    started = await backfills.request(pool, ws)
    assert started is not None
    await backfills.lease(pool, "w1", ["notion"], 60, now=at(0))
    await backfills.record_page(
        pool, started["id"], "w1", [item("a", at(0))], "c2", lease_seconds=60, max_attempts=5, now=at(0)
    )
    await backfills.defer(pool, started["id"], "w1", 30, "budget", now=at(1))
    assert await backfills.lease(pool, "w2", ["notion"], 60, now=at(10)) is None
    resumed = await backfills.lease(pool, "w2", ["notion"], 60, now=at(31))
    assert resumed is not None and resumed["cursor"] == "c2" and resumed["discovered"] == 1
    # A dead worker's lease expires: another takes the backfill over.
    assert await backfills.lease(pool, "w3", ["notion"], 60, now=at(95)) is not None


async def test_a_whole_listing_rechecks_documents_it_no_longer_shows(pool: AsyncConnectionPool[Any]) -> None:
    ws = await add_workspace(pool, "W")
    for page in ("kept", "gone", "also-gone"):
        await add_document(pool, ws, page, at(0))
    started = await backfills.request(pool, ws)
    assert started is not None
    await backfills.lease(pool, "w1", ["notion"], 60)
    await backfills.record_page(
        pool, started["id"], "w1", [item("kept", at(0))], None, lease_seconds=60, max_attempts=5
    )
    done = await backfills.finish(pool, started["id"], "w1", max_attempts=5)
    assert done is not None and done["status"] == "done" and done["rechecks"] == 2
    jobs = await bulk_jobs(pool)
    assert set(jobs) == {"gone", "also-gone"}
    assert all(j.payload == {"recheck": True} for j in jobs.values())
    ws_row = (await workspaces.list_workspaces(pool, ws))[0]
    progress = await backfills.latest(pool, ws, per_minute=60.0, requests_per_page=2.0)
    assert progress is not None and progress.remaining == 2 and progress.eta_seconds == 4.0
    assert ws_row["pending_jobs"] == 2


async def test_sweeps_are_scheduled_per_workspace_when_due(pool: AsyncConnectionPool[Any]) -> None:
    notion = await add_workspace(pool, "N")
    slack = await add_workspace(pool, "T", "slack")
    started = await backfills.schedule_backfills(pool, ["notion", "slack"])
    assert {r["workspace_id"] for r in started} == {notion, slack}
    assert await backfills.schedule_backfills(pool, ["notion", "slack"]) == []
    for _ in started:  # finish both backfills
        leased = await backfills.lease(pool, "w", ["notion", "slack"], 60)
        assert leased is not None
        await backfills.record_page(
            pool, leased["id"], "w", [item("p", at(0))], None, lease_seconds=60, max_attempts=5, now=at(0)
        )
        await backfills.finish(pool, leased["id"], "w", max_attempts=5, now=at(0))
    reconciliation = await backfills.schedule_reconciliations(
        pool, ["notion", "slack"], ["notion"], interval=600, full_interval=86400, now=at(300)
    )
    assert reconciliation == []  # not due yet
    reconciliation = await backfills.schedule_reconciliations(
        pool, ["notion", "slack"], ["notion"], interval=600, full_interval=86400, now=at(600)
    )
    assert [(r["workspace_id"], r["kind"], r["watermark"]) for r in reconciliation] == [
        (notion, "reconcile", at(0))
    ]  # Slack: off by default
    await backfills.set_reconcile(pool, slack, True)
    reconciliation = await backfills.schedule_reconciliations(
        pool, ["notion", "slack"], ["notion"], interval=600, full_interval=86400, now=at(86400)
    )
    assert [(r["workspace_id"], r["kind"]) for r in reconciliation] == [(slack, "full_reconcile")]
