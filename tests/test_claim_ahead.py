"""When a worker claims. Claiming ahead (debounce.worker.ahead): while its syncs are short, a
claim takes the jobs for the slots that will free next; they wait in the process, leased, start
in claim order as slots free, and go back to the queue at once on shutdown; long syncs claim
nothing ahead. And a source set aside because its workspace was at its limit is asked again
when one of that workspace's syncs ends. Real Postgres; the worker's rounds are driven by hand."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from cryptography.fernet import Fernet
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.config import Settings
from debounce.contract import SyncContext, SyncResult
from debounce.secrets import Keyring
from debounce.types import JobEvent, JobStatus, SyncJob
from debounce.worker import Worker
from debounce.worker.ahead import ClaimAhead
from standins.noop import NoopIntegration


def test_claims_ahead_only_while_the_recent_syncs_are_short() -> None:
    ahead = ClaimAhead(6, max_sync_seconds=0.05)
    assert ahead.allowance == 0                  # no sync seen: nothing known
    ahead.observe(0.002)
    assert ahead.allowance == 6
    for _ in range(2):
        ahead.observe(0.4)                       # mean 0.002 -> 0.0816 -> 0.145
    assert ahead.mean_sync_seconds is not None and 0.14 < ahead.mean_sync_seconds < 0.15
    assert ahead.allowance == 0
    for _ in range(12):
        ahead.observe(0.001)                     # short again: 0.145 * 0.8**12 < 0.05
    assert ahead.allowance == 6
    assert ClaimAhead(0).allowance == 0


T0 = datetime(2026, 11, 25, tzinfo=UTC)


def job(job_id: int, source: str) -> SyncJob:
    return SyncJob(id=job_id, source_type=source, source_page_id=f"p{job_id}",
                   status=JobStatus.PROCESSING, payload={}, event_id=None, event_count=1,
                   priority=0, attempts=1, max_attempts=5, scheduled_at=T0, first_event_at=T0,
                   max_wait_until=T0, retry_at=None, lease_expires_at=None, locked_by="w",
                   lease_token=None, revision=1, claimed_revision=1, last_error=None,
                   created_at=T0, updated_at=T0, finished_at=None)


def test_waiting_jobs_start_in_claim_order_within_the_free_slots_and_source_shares() -> None:
    ahead = ClaimAhead(6)
    for i, source in enumerate(["a", "a", "b", "a", "b", "b"], start=1):
        ahead.add(job(i, source), None)
    assert ahead.per_source() == {"a": 3, "b": 3}
    taken = ahead.take(3, {"a": 1, "b": 5})
    assert [j.id for j, _ in taken] == [1, 3, 5]     # one of a, then b in order, 3 slots
    assert [j.id for j, _ in ahead.waiting] == [2, 4, 6]
    assert ahead.ids() == {2, 4, 6}
    assert [j.id for j, _ in ahead.take(5, {"a": 5})] == [2, 4]
    assert [j.id for j in ahead.drop_all()] == [6]
    assert len(ahead) == 0


class Gate(NoopIntegration):
    """A no-op source whose syncs wait for ``open`` once ``hold`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.open = asyncio.Event()
        self.started: list[int] = []

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        self.started.append(job.id)
        if self.hold:
            await self.open.wait()
        return SyncResult(written=1)


async def statuses(pool: AsyncConnectionPool[Any]) -> dict[str, int]:
    async with pool.connection() as conn:
        cur = await conn.execute("select status, count(*) from sync_jobs group by status")
        return {str(s): int(n) for s, n in await cur.fetchall()}


async def test_a_worker_with_short_syncs_claims_the_next_jobs_ahead_and_gives_them_back(
        pool: AsyncConnectionPool[Any], database_url: str) -> None:
    settings = Settings(database_url="unused", lease_seconds=30, worker_concurrency=4,
                        worker_source_concurrency=3, shutdown_grace_seconds=5)
    gate = Gate()
    worker = Worker(settings, pool, {"noop": gate}, conninfo=database_url)
    await queue.enqueue_many(pool, [JobEvent("noop", f"p{i}", {}, f"e{i}", 0, 0)
                                    for i in range(20)])
    worker.outcomes.start()
    try:
        # Nothing known of the syncs yet: a claim takes the source's share of the slots only.
        assert await worker._claim_round() == 0.0
        assert len(gate.started) == 0 and len(worker.ahead) == 0 and len(worker.running) == 3
        await asyncio.wait(list(worker._tasks.values()))       # three short syncs
        assert worker.completed == 3 and worker.ahead.allowance == 3

        # Short syncs: the next claim also takes the 3 jobs the next free slots will run.
        gate.hold = True
        assert await worker._claim_round() == 0.0
        await asyncio.sleep(0)
        assert len(gate.started) == 6 and len(worker._tasks) == 3
        assert len(worker.ahead) == 3 and len(worker.running) == 6
        assert (await statuses(pool)).get("processing") == 6
        assert worker._eligible() == []                         # nothing more for now
        waiting = sorted(worker.ahead.ids())
        # Their leases are kept with the running syncs'.
        assert await worker.renew_leases() == []
        for job_id in waiting:
            row = await queue.get(pool, job_id)
            assert row is not None and row.status is JobStatus.PROCESSING

        # A slot frees: the first job claimed ahead starts in it, in claim order.
        gate.hold = False
        gate.open.set()
        await asyncio.wait(list(worker._tasks.values()))
        for _ in range(5):
            await asyncio.sleep(0)
        assert sorted(gate.started[6:9]) == waiting
        while worker._tasks:
            await asyncio.wait(list(worker._tasks.values()))
        assert len(worker.ahead) == 0 and worker.completed == 9

        # Shutdown with jobs waiting: they are back in the queue at once, attempts not counted.
        gate.hold, gate.open = True, asyncio.Event()
        await worker._claim_round()
        held = sorted(worker.ahead.ids())
        assert len(held) == 3 and len(worker._tasks) == 3
        gate.open.set()
        await worker._drain()
        for job_id in held:
            row = await queue.get(pool, job_id)
            assert row is not None and row.status is JobStatus.PENDING and row.attempts == 0
        assert (await statuses(pool)) == {"completed": 12, "pending": 8}
    finally:
        await worker.outcomes.stop()


async def test_long_syncs_claim_no_more_than_the_free_slots(
        pool: AsyncConnectionPool[Any], database_url: str) -> None:
    settings = Settings(database_url="unused", lease_seconds=30, worker_concurrency=4,
                        worker_source_concurrency=3)
    gate = Gate()
    worker = Worker(settings, pool, {"noop": gate}, conninfo=database_url)
    worker.ahead.observe(2.5)                                 # a sync took 2.5 s
    await queue.enqueue_many(pool, [JobEvent("noop", f"p{i}", {}, f"e{i}", 0, 0)
                                    for i in range(10)])
    gate.hold = True
    worker.outcomes.start()
    try:
        await worker._claim_round()
        assert len(worker.running) == 3 and len(worker.ahead) == 0
        assert worker._eligible() == []
        assert (await statuses(pool)).get("processing") == 3
        gate.open.set()
        await worker._drain()
    finally:
        await worker.outcomes.stop()


async def test_a_workspace_at_its_limit_is_asked_again_when_one_of_its_syncs_ends(
        pool: AsyncConnectionPool[Any], database_url: str) -> None:
    """A claim round that finds a workspace's jobs held (its K syncs in flight) sets the source
    aside; the end of one of those syncs asks again at once, not a poll interval later (a
    backfill of one workspace ran K syncs per poll interval: 122 pages took 60 s)."""
    key = Fernet.generate_key().decode()
    settings = Settings(database_url="unused", secret_key=key, lease_seconds=30,
                        poll_interval_seconds=30.0, worker_concurrency=4,
                        workspace_concurrency=1)
    row = await workspaces.save(pool, Keyring(key), source_type="noop", external_id="W",
                                name="W", credentials={"access_token": "t"})
    await queue.enqueue_many(pool, [JobEvent("noop", f"p{i}", {}, f"e{i}", 0, 0,
                                             workspace_id=int(row["id"])) for i in range(2)])
    gate = Gate()
    gate.hold = True
    worker = Worker(settings, pool, {"noop": gate}, conninfo=database_url)
    worker.outcomes.start()
    try:
        assert await worker._claim_round() == 0.0               # the workspace's one sync
        assert len(worker.running) == 1
        assert await worker._claim_round() == 30.0              # held at K: nothing due
        assert worker._eligible() == []                         # set aside
        gate.open.set()
        await asyncio.wait(list(worker._tasks.values()))        # its outcome is recorded
        assert worker.completed == 1
        assert [s for s, _ in worker._eligible()] == ["noop"]     # asked again at once
        assert await worker._claim_round() == 0.0
        assert len(worker.running) == 1
        await asyncio.wait(list(worker._tasks.values()))
        assert (await statuses(pool)) == {"completed": 2}
    finally:
        await worker.outcomes.stop()
