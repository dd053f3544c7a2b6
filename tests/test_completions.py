"""The worker's flush buffer (debounce/worker/completions.py) and local queue
(debounce/worker/ahead.py) against the real database: outcomes and renewals in one statement, the
lease fence, a flush that fails, a worker killed between a sync and its flush, and held jobs whose
lease is lost or ending never synced."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.config import Settings
from debounce.contract import SyncContext, SyncResult
from debounce.types import JobEvent, JobStatus, SyncJob
from debounce.worker import Worker, maintenance
from debounce.worker.completions import Completions

VERSIONED_WORKER = Path(__file__).resolve().parent / "support" / "versioned_worker.py"
PAST = timedelta(seconds=60)


async def claim(pool: AsyncConnectionPool[Any], pages: list[str], worker: str = "w1") -> list[SyncJob]:
    """Enqueue ``pages`` (due now) and claim them all."""
    now = datetime.now(UTC)
    await queue.enqueue(pool, [JobEvent("notion", p, {}, f"{p}-e", 0, 0) for p in pages], now=now - PAST)
    claimed = await queue.claim(
        pool, worker, limit=len(pages), lease_seconds=60, source_slots={"notion": len(pages)}
    )
    return sorted((c.job for c in claimed), key=lambda j: j.source_page_id)


async def test_outcomes_and_renewals_buffered_together_are_one_statement(
    pool: AsyncConnectionPool[Any],
) -> None:
    """A completion, a failure and a renewal submitted within the delay: one flush, each
    answered with its own row."""
    done, failed, running = await claim(pool, ["a", "b", "c"])
    completions = Completions(pool, lease_seconds=120, delay=0.05, max_outcomes=100)
    completions.start()
    try:
        rows = await asyncio.gather(
            completions.complete(done),
            completions.fail(queue.Failure(failed, "boom", backoff_seconds=30)),
            completions.renew([running]),
        )
    finally:
        await completions.stop()
    assert completions.flushes == 1
    completed, retried, renewed = rows
    assert isinstance(completed, SyncJob) and completed.status is JobStatus.COMPLETED
    assert isinstance(retried, SyncJob) and retried.status is JobStatus.PENDING
    assert retried.last_error == "boom"
    assert isinstance(renewed, dict) and renewed[running.id].status is JobStatus.PROCESSING
    lease = renewed[running.id].lease_expires_at
    assert lease is not None and lease > datetime.now(UTC) + timedelta(seconds=100)


async def test_an_outcome_whose_lease_was_lost_changes_nothing(pool: AsyncConnectionPool[Any]) -> None:
    """The lease fence: the job was requeued and claimed by another worker; the stale
    outcome is answered ``None`` and the new holder's claim stands."""
    (stale,) = await claim(pool, ["a"])
    await queue.requeue_expired(pool, now=datetime.now(UTC) + timedelta(hours=1))
    (current,) = [
        c.job for c in await queue.claim(pool, "w2", limit=1, lease_seconds=60, source_slots={"notion": 1})
    ]
    completions = Completions(pool, lease_seconds=60)
    completions.start()
    try:
        assert await completions.complete(stale) is None
        assert await completions.renew([stale]) == {}
    finally:
        await completions.stop()
    row = await queue.get(pool, current.id)
    assert row is not None and row.status is JobStatus.PROCESSING and row.lease_token == current.lease_token


@pytest.fixture
async def switchable_pool(database_url: str) -> AsyncIterator[tuple[AsyncConnectionPool[Any], list[bool]]]:
    """A pool whose new connections are read-only while ``flag[0]`` is true (a failover):
    every write raises ``ReadOnlySqlTransaction``."""
    flag = [True]

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(
            "select set_config('default_transaction_read_only', %s, false)", ["on" if flag[0] else "off"]
        )

    p: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database_url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}, configure=configure
    )
    await p.open(wait=True)
    try:
        yield p, flag
    finally:
        await p.close()


async def test_a_failed_flush_is_retried_and_marks_nothing_twice(
    pool: AsyncConnectionPool[Any], switchable_pool: tuple[AsyncConnectionPool[Any], list[bool]]
) -> None:
    """The database refuses writes: the flush fails, changes nothing, and is retried with the
    same outcomes until it is stored; flushing the same outcomes again matches nothing."""
    ro_pool, flag = switchable_pool
    done, failed = await claim(pool, ["a", "b"])
    completions = Completions(ro_pool, lease_seconds=60, delay=0.0)
    completions.start()
    try:
        answers = asyncio.gather(
            completions.complete(done), completions.fail(queue.Failure(failed, "boom", permanent=True))
        )
        while completions.flushes < 2:  # the first flush failed and was tried again
            await asyncio.sleep(0.01)
        for job in (done, failed):
            row = await queue.get(pool, job.id)
            assert row is not None and row.status is JobStatus.PROCESSING  # nothing half applied
        flag[0] = False
        await ro_pool.drain()  # writes are accepted again
        completed, failed_row = await asyncio.wait_for(answers, 30)
    finally:
        await completions.stop()
    assert completed is not None and completed.status is JobStatus.COMPLETED
    assert failed_row is not None and failed_row.status is JobStatus.FAILED
    # a retry of a flush that had committed (its answer lost) finds no claim to change
    assert await queue.settle(pool, completed=[done], failed=[queue.Failure(failed, "again")]) == {}
    row = await queue.get(pool, failed.id)
    assert row is not None and row.last_error == "boom" and row.finished_at == failed_row.finished_at


def _sql(database_url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def _poll(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_worker_killed_between_a_sync_and_its_flush_leaves_the_job_to_its_lease(
    database_url: str, tmp_path: Path
) -> None:
    """kill -9 after the sync wrote its document but before its completion was flushed: the job
    is still ``processing``; once its lease is returned it syncs again and the document is the
    page's (a sync is idempotent)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("create table api_pages (page text primary key, version int not null)")
        conn.execute(
            "create table sync_log (id bigserial, job_id bigint, page text, version int,"
            " landed bool, started_revision bigint, at timestamptz default now())"
        )
        conn.execute("insert into api_pages values ('p1', 1)")

    async def enqueue() -> int:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            (brief,) = await queue.enqueue(c, [JobEvent("versioned", "p1", {}, "e1", 0, 0)])
            assert brief.job_id is not None
            return brief.job_id

    job_id = asyncio.run(enqueue())
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEBOUNCE_LEASE_SECONDS": "60",  # no renewal (every 20 s) flushes the buffer meanwhile
        "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.2",
        "FAIL_RATE": "0",
    }

    def spawn(name: str, **more: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.log", "wb") as log:
            return subprocess.Popen(
                [sys.executable, str(VERSIONED_WORKER)],
                env={**env, **more},
                stderr=log,
                stdout=subprocess.DEVNULL,
            )

    victim = spawn("victim", DEBOUNCE_WORKER_FLUSH_SECONDS="3600")  # the completion waits in the buffer
    try:
        _poll(lambda: bool(_sql(database_url, "select 1 from sync_log where landed")))
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        if victim.poll() is None:
            victim.kill()
    assert _sql(
        database_url,
        f"select status from (select * from sync_jobs union all "
        f"select * from finished_jobs) j where id = {job_id}",
    ) == [("processing",)]

    async def reap() -> list[SyncJob]:  # the reaper's statement, an hour on
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            return await queue.requeue_expired(c, now=datetime.now(UTC) + timedelta(hours=1))

    assert [j.id for j in asyncio.run(reap())] == [job_id]
    _sql(database_url, "update api_pages set version = 2")  # the page as the next sync reads it
    second = spawn("second")
    try:
        _poll(
            lambda: (
                _sql(
                    database_url,
                    f"select status from (select * from sync_jobs union all "
                    f"select * from finished_jobs) j where id = {job_id}",
                )
                == [("completed",)]
            )
        )
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    assert _sql(database_url, "select version from sync_log where landed order by id") == [(1,), (2,)]
    assert _sql(database_url, "select content from documents where document_id = 'p1'") == [("v2",)]


class Recording:
    """A source whose syncs are only recorded (a held job must never reach it)."""

    source_type = "notion"

    def __init__(self) -> None:
        self.synced: list[int] = []

    def parse_webhook(self, headers: Any, body: bytes) -> Any:
        raise NotImplementedError

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        self.synced.append(job.id)
        return SyncResult(written=0)

    async def aclose(self) -> None:
        return None


def _worker(pool: AsyncConnectionPool[Any], database_url: str, syncer: Recording) -> Worker:
    settings = Settings(database_url="unused", lease_seconds=60, worker_concurrency=2)
    return Worker(settings, pool, {"notion": syncer}, conninfo=database_url)


async def test_a_job_whose_lease_was_lost_in_the_local_queue_is_not_synced(
    pool: AsyncConnectionPool[Any], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Claimed ahead, held while the slots were busy; its lease expired and another worker
    claimed it. The lease keeper's renewal finds it lost: it leaves the local queue, and a
    freed slot never starts it."""
    syncer = Recording()
    worker = _worker(pool, database_url, syncer)
    worker.outcomes.start()
    try:
        (held,) = await claim(pool, ["a"])
        worker.ahead.add([(held, None)], sent=time.monotonic(), now=time.monotonic())
        await queue.requeue_expired(pool, now=datetime.now(UTC) + timedelta(hours=1))
        (other,) = await queue.claim(pool, "w2", limit=1, lease_seconds=60, source_slots={"notion": 1})
        await maintenance.renew_leases(worker.outcomes, worker.running, worker.finishing, worker.ahead)
        assert len(worker.ahead) == 0
        worker._start_held()  # a slot frees
        assert worker.running == {} and syncer.synced == []
    finally:
        await worker.outcomes.stop()
    assert any("waited in the local queue: not synced" in r.getMessage() for r in caplog.records)
    row = await queue.get(pool, held.id)
    assert row is not None and row.lease_token == other.job.lease_token  # the other claim stands


async def test_a_held_job_near_the_end_of_its_lease_is_given_back_not_synced(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """Renewals failed (the database was away) and the held job's lease has less than a third
    left by the worker's clock: a free slot does not start it; it is released."""
    syncer = Recording()
    worker = _worker(pool, database_url, syncer)
    (held,) = await claim(pool, ["a"])
    claimed_at = time.monotonic() - 45  # its claim was sent 45 s of a 60 s lease ago
    worker.ahead.add([(held, None)], sent=claimed_at, now=claimed_at + 0.001)
    worker._start_held()
    assert worker.running == {} and syncer.synced == [] and len(worker.ahead) == 0
    await asyncio.gather(*worker._giving_back)
    row = await queue.get(pool, held.id)
    assert row is not None and row.status is JobStatus.PENDING and row.lease_token is None


async def test_held_jobs_are_given_back_at_shutdown(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """A worker stopping gives back what its local queue holds, untouched (the attempt not
    counted), before it waits for its running syncs."""
    worker = _worker(pool, database_url, Recording())
    (held,) = await claim(pool, ["a"])
    worker.ahead.add([(held, None)], sent=time.monotonic(), now=time.monotonic())
    worker.stop()
    await worker._drain()
    row = await queue.get(pool, held.id)
    assert row is not None and row.status is JobStatus.PENDING and row.attempts == 0
    assert len(worker.ahead) == 0
