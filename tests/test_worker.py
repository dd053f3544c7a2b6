"""The worker: in-process for error mapping and wake-up, subprocesses where processes matter
(several workers, kill -9, SIGTERM), always against the real database."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import one_job
import psycopg
import pytest
from ports import free_port
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.config import Settings
from debounce.contract import BudgetExhausted, PermanentError, RateLimited, SyncContext, SyncResult
from debounce.types import JobEvent, JobStatus, SyncJob
from debounce.worker import Worker

NOOP_WORKER = Path(__file__).resolve().parent / "support" / "noop_worker.py"


class ScriptedSyncer:
    """An in-process syncer whose behaviour per call is scripted by the test."""

    source_type = "noop"

    def __init__(self, behaviour: Callable[[SyncJob], Any]) -> None:
        self.behaviour = behaviour
        self.calls: list[tuple[SyncJob, datetime]] = []

    def parse_webhook(self, headers: Any, body: bytes) -> Any:
        raise NotImplementedError

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        self.calls.append((job, datetime.now(UTC)))
        outcome = self.behaviour(job)
        if isinstance(outcome, BaseException):
            raise outcome
        return SyncResult(written=1)

    async def aclose(self) -> None:
        return None


def worker_settings(**changes: Any) -> Settings:
    return Settings(
        database_url="unused",
        lease_seconds=5,
        poll_interval_seconds=1.0,
        worker_concurrency=4,
        shutdown_grace_seconds=2,
    ).with_(**changes)


@pytest.fixture
async def run_worker(
    pool: AsyncConnectionPool[Any], database_url: str
) -> AsyncIterator[Callable[[ScriptedSyncer], Worker]]:
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    def start(syncer: ScriptedSyncer, **changes: Any) -> Worker:
        worker = Worker(worker_settings(**changes), pool, {"noop": syncer}, conninfo=database_url)
        started.append((worker, asyncio.create_task(worker.run())))
        return worker

    yield start
    for worker, task in started:
        worker.stop()
        await asyncio.wait_for(task, 10)


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def job_state(pool: AsyncConnectionPool[Any], job_id: int) -> SyncJob:
    job = await queue.get(pool, job_id)
    assert job is not None
    return job


async def test_success_completes(pool: AsyncConnectionPool[Any], run_worker: Any) -> None:
    syncer = ScriptedSyncer(lambda job: None)
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=0, max_wait_seconds=0
    )
    job = r.job
    assert job is not None
    run_worker(syncer)

    async def done() -> bool:
        return (await job_state(pool, job.id)).status is JobStatus.COMPLETED

    await wait_for(done)
    assert len(syncer.calls) == 1


async def test_rate_limited_is_retried_at_retry_after_without_spending_an_attempt(
    pool: AsyncConnectionPool[Any], run_worker: Any
) -> None:
    syncer = ScriptedSyncer(lambda job: RateLimited(1.5, "429 from source"))
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=0, max_wait_seconds=0
    )
    job = r.job
    assert job is not None
    run_worker(syncer)
    await wait_for(lambda: len(syncer.calls) >= 1)
    first_at = syncer.calls[0][1]
    await wait_for(lambda: len(syncer.calls) >= 2, timeout=10)
    second_job, second_at = syncer.calls[1]
    assert (second_at - first_at).total_seconds() >= 1.4  # waited for Retry-After
    assert second_job.attempts == 1  # the rate-limited attempt was given back
    state = await job_state(pool, job.id)
    assert "429 from source" in (state.last_error or "")


async def test_a_spent_budget_is_one_info_line_saying_when_the_job_goes_on(
    pool: AsyncConnectionPool[Any], run_worker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 28: "budget exhausted after 1 requests; yielding …" and "now pending (due <a time
    already past>)" read as trouble; a budget wait is normal operation."""
    syncer = ScriptedSyncer(lambda job: BudgetExhausted(0.4) if len(syncer.calls) == 1 else None)
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=0, max_wait_seconds=0
    )
    job = r.job
    assert job is not None
    with caplog.at_level(logging.INFO, logger="debounce.worker"):
        run_worker(syncer)

        async def done() -> bool:
            return (await job_state(pool, job.id)).status is JobStatus.COMPLETED

        await wait_for(done)
    about = [rec for rec in caplog.records if getattr(rec, "job_id", None) == job.id]
    lines = [(rec.levelno, rec.getMessage()) for rec in about]
    assert (
        logging.INFO,
        f"the noop source's API budget is spent: job {job.id} waits for a request, due in 0.4 s",
    ) in lines, lines
    assert not [m for _, m in lines if "exhausted" in m or m.startswith("now pending")], lines
    assert all(level == logging.INFO for level, _ in lines), lines
    assert len(syncer.calls) == 2


async def test_permanent_error_fails_at_once(pool: AsyncConnectionPool[Any], run_worker: Any) -> None:
    syncer = ScriptedSyncer(lambda job: PermanentError("token revoked"))
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=0, max_wait_seconds=0
    )
    job = r.job
    assert job is not None
    run_worker(syncer)

    async def failed() -> bool:
        return (await job_state(pool, job.id)).status is JobStatus.FAILED

    await wait_for(failed)
    state = await job_state(pool, job.id)
    assert state.attempts == 1 and state.last_error == "PermanentError: token revoked"
    assert len(syncer.calls) == 1


async def test_other_errors_retry_with_backoff_and_record_type(
    pool: AsyncConnectionPool[Any], run_worker: Any
) -> None:
    syncer = ScriptedSyncer(lambda job: ConnectionResetError("peer went away"))
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=0, max_wait_seconds=0
    )
    job = r.job
    assert job is not None
    run_worker(syncer, backoff_seconds=(60.0,))

    async def retrying() -> bool:
        s = await job_state(pool, job.id)
        return s.status is JobStatus.PENDING and s.attempts == 1

    await wait_for(retrying)
    state = await job_state(pool, job.id)
    assert state.last_error == "ConnectionResetError: peer went away"
    assert state.retry_at is not None
    assert (state.scheduled_at - datetime.now(UTC)).total_seconds() > 30


async def test_idle_worker_starts_a_job_soon_after_it_becomes_due(
    pool: AsyncConnectionPool[Any], run_worker: Any
) -> None:
    """Asserted loosely here; bench/ measures the distribution.

    The worker learns of a new future job within its poll interval and then sleeps exactly
    until the job's due time, so the bound holds for any window longer than the poll interval
    (real windows are 30 s and 300 s; the default poll interval is 2 s)."""
    syncer = ScriptedSyncer(lambda job: None)
    run_worker(syncer, poll_interval_seconds=0.5)
    await asyncio.sleep(0.3)  # let the worker go idle
    r = await one_job.enqueue(
        pool, "noop", "p", payload={}, event_id="e", debounce_seconds=1.2, max_wait_seconds=10
    )
    job = r.job
    assert job is not None
    await wait_for(lambda: syncer.calls)
    lag = (syncer.calls[0][1] - job.scheduled_at).total_seconds()
    assert -0.05 < lag < 0.5, lag


async def test_a_window_shorter_than_the_poll_interval_wakes_the_idle_worker(
    pool: AsyncConnectionPool[Any], run_worker: Any
) -> None:
    """Enqueued as the web enqueues (``notify_within`` = the poll interval), a job due in
    0.3 s starts long before the worker's 30 s poll would have found it."""
    syncer = ScriptedSyncer(lambda job: None)
    run_worker(syncer, poll_interval_seconds=30.0)
    await asyncio.sleep(0.5)  # let the worker go idle on its 30 s poll
    (r,) = await queue.enqueue(pool, [JobEvent("noop", "p", {}, "e", 0.3, 10)], notify_within=30.0)
    await wait_for(lambda: syncer.calls, timeout=10)
    assert r.scheduled_at is not None
    lag = (syncer.calls[0][1] - r.scheduled_at).total_seconds()
    assert -0.05 < lag < 5, lag


async def test_manual_resync_wakes_idle_worker_through_notify(
    pool: AsyncConnectionPool[Any], run_worker: Any
) -> None:
    syncer = ScriptedSyncer(lambda job: None)
    run_worker(syncer, poll_interval_seconds=30.0)  # the poll alone would take 30 s
    await asyncio.sleep(0.5)
    requested = datetime.now(UTC)
    await queue.resync(pool, "noop", "other")
    await wait_for(lambda: syncer.calls, timeout=5)
    assert (syncer.calls[0][1] - requested).total_seconds() < 1.0


async def test_per_source_limit_leaves_room_for_other_sources(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    release = asyncio.Event()
    calls: list[str] = []

    class Slow(ScriptedSyncer):
        async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
            calls.append(job.source_type)
            if job.source_type == "busy":
                await release.wait()
            return SyncResult()

    slow = Slow(lambda job: None)
    events = [JobEvent("busy", f"p{i}", {}, f"e{i}", 0, 0) for i in range(20)]
    await queue.enqueue(pool, events)
    worker = Worker(
        worker_settings(worker_concurrency=4, worker_source_concurrency=3),
        pool,
        {"busy": slow, "quiet": slow},
        conninfo=database_url,
    )
    task = asyncio.create_task(worker.run())
    await wait_for(lambda: calls.count("busy") == 3)
    await one_job.enqueue(
        pool, "quiet", "q", payload={}, event_id="q", debounce_seconds=0, max_wait_seconds=0
    )
    await wait_for(lambda: "quiet" in calls)
    assert calls.count("busy") == 3
    release.set()
    await wait_for(lambda: calls.count("busy") == 20)
    worker.stop()
    await asyncio.wait_for(task, 10)


# --- processes ---------------------------------------------------------------------------------


@pytest.fixture
def noop_log(database_url: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "create table noop_log (job_id bigint, worker_pid int, attempts int, "
            "at timestamptz default clock_timestamp())"
        )

        def query(sql: str) -> list[tuple[Any, ...]]:
            return conn.execute(sql).fetchall()

        yield query


@pytest.fixture
def spawn(database_url: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(**env: str) -> subprocess.Popen[bytes]:
        full = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBOUNCE_LEASE_SECONDS": "30",
            "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.5",
            "DEBOUNCE_WORKER_CONCURRENCY": "8",
            **env,
        }
        log = open(tmp_path / f"worker-{len(procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, str(NOOP_WORKER)], env=full, stdout=subprocess.DEVNULL, stderr=log
        )
        log.close()  # the child holds its own descriptor
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def enqueue_due(database_url: str, n: int, payload: dict[str, Any] | None = None) -> list[int]:
    async def go() -> list[int]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            events = [JobEvent("noop", f"page-{i}", payload or {}, f"e{i}", 0, 0) for i in range(n)]
            out: list[int] = []
            for start in range(0, n, 500):
                results = await queue.enqueue(conn, events[start : start + 500])
                out.extend(r.job_id for r in results if r.job_id is not None)
            return out

    return asyncio.run(go())


def poll(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.slow
def test_four_workers_sync_2000_jobs_exactly_once(database_url: str, noop_log: Any, spawn: Any) -> None:
    enqueue_due(database_url, 2000)
    workers = [spawn() for _ in range(4)]
    poll(
        lambda: noop_log("select count(*) from finished_jobs where status = 'completed'")[0][0] == 2000,
        timeout=90,
    )
    (total, distinct, pids) = noop_log(
        "select count(*), count(distinct job_id), count(distinct worker_pid) from noop_log"
    )[0]
    assert total == 2000 and distinct == 2000
    assert pids >= 2  # the work was shared
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    for proc in workers:
        assert proc.wait(20) == 0


@pytest.mark.slow
def test_kill_9_mid_sync_leaves_job_to_another_worker_after_lease(
    database_url: str, noop_log: Any, spawn: Any
) -> None:
    (job_id,) = enqueue_due(database_url, 1, {"sleep": 60})
    victim = spawn(DEBOUNCE_LEASE_SECONDS="1")
    poll(lambda: bool(noop_log("select 1 from noop_log")), timeout=20)
    victim.kill()  # SIGKILL: no cleanup, the lease is left behind
    victim.wait(10)
    status = noop_log(
        f"select status from (select * from sync_jobs union all "
        f"select * from finished_jobs) j where id = {int(job_id)}"
    )[0][0]
    assert status == "processing"
    spawn(DEBOUNCE_LEASE_SECONDS="1")
    poll(
        lambda: (
            noop_log(
                f"select status from (select * from sync_jobs union all "
                f"select * from finished_jobs) j where id = {int(job_id)}"
            )[0][0]
            == "completed"
        ),
        timeout=30,
    )
    attempts = [r[0] for r in noop_log("select attempts from noop_log order by at")]
    assert attempts == [1, 2]


@pytest.mark.slow
def test_sigterm_lets_running_sync_finish_and_exits_0(database_url: str, noop_log: Any, spawn: Any) -> None:
    (job_id,) = enqueue_due(database_url, 1, {"sleep": 1.5})
    proc = spawn()
    poll(lambda: bool(noop_log("select 1 from noop_log")), timeout=20)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert (
        noop_log(
            f"select status from (select * from sync_jobs union all "
            f"select * from finished_jobs) j where id = {int(job_id)}"
        )[0][0]
        == "completed"
    )


@pytest.mark.slow
def test_sync_outlasting_grace_is_released_and_done_by_another_worker(
    database_url: str, noop_log: Any, spawn: Any
) -> None:
    (job_id,) = enqueue_due(database_url, 1, {"sleep": 60})
    proc = spawn(DEBOUNCE_SHUTDOWN_GRACE_SECONDS="0.5")
    poll(lambda: bool(noop_log("select 1 from noop_log")), timeout=20)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert time.monotonic() - started < 10
    status, attempts = noop_log(
        f"select status, attempts from (select * from sync_jobs union all "
        f"select * from finished_jobs) j where id = {int(job_id)}"
    )[0]
    assert (status, attempts) == ("pending", 0)  # released untouched
    spawn()
    poll(
        lambda: (
            noop_log(
                f"select status from (select * from sync_jobs union all "
                f"select * from finished_jobs) j where id = {int(job_id)}"
            )[0][0]
            == "completed"
        ),
        timeout=20,
    )


@pytest.mark.slow
def test_serve_with_embedded_postgres_starts_answers_readyz_and_stops(tmp_path: Path) -> None:
    import httpx

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL")}
    env["DEBOUNCE_DATA_DIR"] = str(tmp_path / "data")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "debounce", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert "embedded Postgres" in output and str(tmp_path / "data") in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_worker_survives_the_database_going_away_and_coming_back() -> None:
    """A database of its own, stopped under a running worker and started again: the worker
    logs and backs off instead of crashing, then syncs what was enqueued meanwhile."""
    import tempfile

    import pgserver

    from debounce.infra.db import open_pool
    from debounce.migrate import migrate

    with tempfile.TemporaryDirectory(prefix="debounce-worker-outage-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        url = server.get_uri()
        try:
            await migrate(url)
            pool = open_pool(url, max_size=4, timeout=1.0)
            await pool.open(wait=True)
            syncer = ScriptedSyncer(lambda job: None)
            worker = Worker(
                worker_settings(poll_interval_seconds=0.2, lease_seconds=2),
                pool,
                {"noop": syncer},
                conninfo=url,
            )
            task = asyncio.create_task(worker.run())
            await one_job.enqueue(
                pool, "noop", "before", payload={}, event_id="a", debounce_seconds=0, max_wait_seconds=0
            )
            await wait_for(lambda: len(syncer.calls) == 1)
            await asyncio.to_thread(server.cleanup)  # stop Postgres under the worker
            await asyncio.sleep(2.0)
            assert not task.done(), "the worker must not crash while the database is away"
            server = pgserver.get_server(data_dir, cleanup_mode="stop")
            for _ in range(50):  # the test's own pool may hand out a dead connection first
                try:
                    r = await one_job.enqueue(
                        pool,
                        "noop",
                        "after",
                        payload={},
                        event_id="b",
                        debounce_seconds=0,
                        max_wait_seconds=0,
                    )
                    break
                except psycopg.OperationalError:
                    await asyncio.sleep(0.1)

            job = r.job
            assert job is not None

            async def done() -> bool:
                return (await job_state(pool, job.id)).status is JobStatus.COMPLETED

            await wait_for(done, timeout=30)
            worker.stop()
            await asyncio.wait_for(task, 10)
            await pool.close()
        finally:
            server.cleanup()


async def test_rate_limited_source_is_paused_without_spinning(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """After a 429 the source's other due jobs wait in the queue; the idle loop sleeps until
    the pause ends instead of polling the database in a tight loop."""
    syncer = ScriptedSyncer(lambda job: RateLimited(1.0, "429"))
    await queue.enqueue(pool, [JobEvent("noop", f"p{i}", {}, f"e{i}", 0, 0) for i in range(3)])
    worker = Worker(worker_settings(worker_concurrency=1), pool, {"noop": syncer}, conninfo=database_url)
    iterations = 0
    eligible = worker._eligible

    def counting() -> list[tuple[str, int]]:
        nonlocal iterations
        iterations += 1
        return eligible()

    worker._eligible = counting  # type: ignore[method-assign]
    task = asyncio.create_task(worker.run())
    await wait_for(lambda: syncer.calls)
    await asyncio.sleep(0.7)
    assert len(syncer.calls) == 1  # paused: the other due jobs are not claimed
    assert iterations < 20, iterations
    await wait_for(lambda: len(syncer.calls) >= 2, timeout=5)  # resumes after Retry-After
    worker.stop()
    await asyncio.wait_for(task, 10)
