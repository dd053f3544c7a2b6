"""Races and faults (issue 16): each test forces its interleaving deterministically with an
open transaction, a held row lock or ``now=``, against the real database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import one_job
import psycopg
import pytest

from debounce import queue
from debounce.documents.store import Document, DocumentStore, LeaseLost
from debounce.types import JobStatus, SyncJob

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
Conn = psycopg.AsyncConnection[Any]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def event(db: Any, page: str, event_id: str, *, now: datetime, max_attempts: int = 5) -> Any:
    return await one_job.enqueue(
        db,
        "notion",
        page,
        payload={"event": event_id},
        event_id=event_id,
        debounce_seconds=30,
        max_wait_seconds=300,
        now=now,
        max_attempts=max_attempts,
    )


async def claimed(
    conn: Conn, page: str, *, now: datetime, worker: str = "w1", max_attempts: int = 5
) -> SyncJob:
    await event(conn, page, f"{page}-first", now=now - timedelta(seconds=60), max_attempts=max_attempts)
    (job,) = [
        c.job
        for c in await queue.claim(
            conn, worker, limit=1, lease_seconds=60, source_slots={"notion": 1}, now=now
        )
    ]
    return job


@pytest.mark.parametrize("permanent", [True, False])
async def test_fail_waiting_on_a_concurrent_enqueue_keeps_the_edit(
    conn: Conn, database_url: str, permanent: bool
) -> None:
    """Case 1: claim; an enqueue holds the row in an open transaction; ``fail`` blocks on it;
    the enqueue commits. The failure must see the edit and leave a follow-up, not ``failed``."""
    max_attempts = 5 if permanent else 1  # not permanent: attempts spent, a final failure too
    job = await claimed(conn, "p1", now=T0, max_attempts=max_attempts)
    async with await psycopg.AsyncConnection.connect(database_url) as editor:
        # An open transaction holds the job row.
        await event(editor, "p1", "edit-during-sync", now=at(1), max_attempts=max_attempts)
        failing = asyncio.create_task(one_job.fail(conn, job, "boom", permanent=permanent, now=at(2)))
        await asyncio.sleep(0.3)
        assert not failing.done(), "fail() should wait for the enqueue's row lock"
        await editor.commit()
    row = await asyncio.wait_for(failing, 10)
    assert row is not None
    assert row.status is JobStatus.PENDING, "the edit accepted during the sync was lost"
    assert row.payload == {"event": "edit-during-sync"}
    assert row.attempts == 0
    active = await one_job.active_for_page(conn, "notion", "p1")
    assert active is not None and active.id == job.id


def doc(version: str) -> Document:
    return Document(
        source_type="notion",
        document_id="p1",
        source_page_id="p1",
        title=f"Page {version}",
        content=f"# {version}\n",
    )


async def test_a_worker_that_lost_its_lease_cannot_overwrite_a_newer_document(conn: Conn) -> None:
    """Case 2: A claims and fetches v1, stalls past its lease; B claims again, writes v2 and
    completes; A's late write of v1 is refused and v2 stays."""
    store = DocumentStore(conn)
    job_a = await claimed(conn, "p1", now=T0, worker="A")
    (expired,) = await queue.requeue_expired(conn, now=at(61))
    assert expired.status is JobStatus.PENDING
    (job_b,) = [
        c.job
        for c in await queue.claim(
            conn, "B", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(62)
        )
    ]
    assert await store.fenced(job_b).upsert(doc("v2")) == "inserted"
    assert await one_job.complete(conn, job_b, now=at(63)) is not None
    with pytest.raises(LeaseLost):
        await store.fenced(job_a).upsert(doc("v1"))
    with pytest.raises(LeaseLost):
        await store.fenced(job_a).mark_page_deleted("notion", "p1")
    with pytest.raises(LeaseLost):
        await store.fenced(job_a).set_state("notion", "p1", {"cursor": "stale"})
    (row,) = await one_job.page_documents(store, "notion", "p1")
    assert row["title"] == "Page v2" and row["deleted_at"] is None
    assert await store.get_state("notion", "p1") == {}


async def test_a_fenced_write_waits_for_nobody_and_lands_while_the_claim_holds(conn: Conn) -> None:
    store = DocumentStore(conn)
    job = await claimed(conn, "p1", now=T0)
    fenced = store.fenced(job)
    assert await fenced.upsert(doc("v1")) == "inserted"
    assert await fenced.upsert(doc("v1")) == "unchanged"
    await fenced.set_state("notion", "p1", {"cursor": "c1"})
    assert await fenced.mark_page_deleted("notion", "p1") == ["p1"]
    assert await store.get_state("notion", "p1") == {"cursor": "c1"}


async def test_a_lease_revoked_while_the_write_waits_is_seen_by_the_write(
    conn: Conn, database_url: str
) -> None:
    """The fence locks the job row: a requeue that commits while the write waits for that lock
    wins, and the write is refused (it rechecks the latest row version)."""
    store = DocumentStore(conn)
    job = await claimed(conn, "p1", now=T0)
    async with await psycopg.AsyncConnection.connect(database_url) as reaper:
        await queue.requeue_expired(reaper, now=at(61))  # open transaction holds the job row
        writing = asyncio.create_task(store.fenced(job).upsert(doc("v1")))
        await asyncio.sleep(0.3)
        assert not writing.done()
        await reaper.commit()
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(writing, 10)
    assert await one_job.page_documents(store, "notion", "p1") == []


# --- the worker ------------------------------------------------------------------------------

from collections.abc import AsyncIterator, Awaitable, Callable  # noqa: E402

from psycopg_pool import AsyncConnectionPool  # noqa: E402

from debounce.config import Settings  # noqa: E402
from debounce.contract import SyncContext, SyncResult  # noqa: E402
from debounce.worker import Worker, maintenance  # noqa: E402


class PageWriter:
    """A source whose sync writes the page's current version (``versions``) as a document,
    after awaiting ``gate`` (a test holds it to stall the sync)."""

    source_type = "notion"

    def __init__(
        self, versions: dict[str, str], gate: Callable[[SyncJob], Awaitable[None]] | None = None
    ) -> None:
        self.versions = versions
        self.gate = gate

    def parse_webhook(self, headers: Any, body: bytes) -> Any:
        raise NotImplementedError

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        version = self.versions[job.source_page_id]  # what the API returns now
        if self.gate is not None:
            await self.gate(job)
        await context.writer().upsert(
            Document(
                source_type="notion",
                document_id=job.source_page_id,
                source_page_id=job.source_page_id,
                title=version,
                content=version,
            )
        )
        return SyncResult(written=1)

    async def aclose(self) -> None:
        return None


def worker_settings(**changes: Any) -> Settings:
    return Settings(
        database_url="unused",
        lease_seconds=60,
        poll_interval_seconds=0.2,
        worker_concurrency=2,
        shutdown_grace_seconds=1,
    ).with_(**changes)


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def job_status(pool: AsyncConnectionPool[Any], job_id: int) -> JobStatus | None:
    job = await queue.get(pool, job_id)
    return job.status if job else None


async def test_stalled_worker_past_its_lease_writes_nothing_and_the_new_holder_wins(
    pool: AsyncConnectionPool[Any], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Case 2 through the worker: A fetches v1 and stalls; its lease is lost; B syncs v2 and
    completes; A resumes: its write of v1 is refused and logged, v2 stays the last word."""
    store = DocumentStore(pool)
    versions = {"p1": "v1"}
    stalled, resume = asyncio.Event(), asyncio.Event()

    async def gate(job: SyncJob) -> None:
        stalled.set()
        await resume.wait()

    worker = Worker(
        worker_settings(worker_concurrency=1),
        pool,
        {"notion": PageWriter(versions, gate)},
        conninfo=database_url,
    )
    await event(pool, "p1", "e1", now=datetime.now(UTC) - timedelta(seconds=60))
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(stalled.wait(), 10)
        versions["p1"] = "v2"  # the page changes while A is frozen
        far = datetime.now(UTC) + timedelta(hours=1)
        (requeued,) = await queue.requeue_expired(pool, now=far)  # A's lease ran out
        (job_b,) = [
            c.job for c in await queue.claim(pool, "B", limit=1, lease_seconds=60, source_slots={"notion": 1})
        ]
        await PageWriter(versions).sync(job_b, SyncContext(store=store.fenced(job_b)))
        assert (await one_job.complete(pool, job_b)) is not None
        resume.set()
        await until(lambda: _logged(caplog, "lease lost during the sync"))
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    (row,) = await one_job.page_documents(store, "notion", "p1")
    assert row["title"] == "v2"
    assert await job_status(pool, requeued.id) is JobStatus.COMPLETED


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


async def test_a_sync_being_recorded_is_not_reported_as_a_lost_lease(
    pool: AsyncConnectionPool[Any], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Case 8: the completion statement has committed (clearing the lease) but the worker has
    not yet resumed the sync's task — a paused process — when the lease keeper renews. A sync
    whose lease is really gone is still reported."""
    worker = Worker(worker_settings(), pool, {"notion": PageWriter({})}, conninfo=database_url)
    await event(pool, "p1", "e1", now=datetime.now(UTC) - timedelta(seconds=60))
    await event(pool, "p2", "e2", now=datetime.now(UTC) - timedelta(seconds=60))
    recorded, lost = [
        c.job
        for c in await queue.claim(
            pool, worker.worker_id, limit=2, lease_seconds=60, source_slots={"notion": 2}
        )
    ]
    worker.running.update({recorded.id: recorded, lost.id: lost})
    worker.finishing.add(recorded.id)  # its sync returned; the outcome is being recorded
    assert await queue.settle(pool, completed=[recorded]) != {}  # the recording committed
    (requeued,) = await queue.requeue_expired(pool, now=datetime.now(UTC) + timedelta(hours=1))
    assert requeued.id == lost.id  # the other job's lease really ran out
    renewed = await maintenance.renew_leases(
        worker.outcomes, worker.running, worker.finishing
    )  # the lease keeper's round
    assert [j.id for j in renewed] == [lost.id]
    warnings = [r for r in caplog.records if "lease lost" in r.getMessage()]
    assert [r.job_id for r in warnings] == [lost.id]  # type: ignore[attr-defined]


@pytest.fixture
async def switchable_pool(database_url: str) -> AsyncIterator[tuple[AsyncConnectionPool[Any], list[bool]]]:
    """A pool whose new connections are read-only while ``flag[0]`` is true: what clients see
    during a managed failover (``ReadOnlySqlTransaction``)."""
    flag = [True]

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(
            "select set_config('default_transaction_read_only', %s, false)", ["on" if flag[0] else "off"]
        )

    p: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={"autocommit": True},
        configure=configure,
        timeout=5,
    )
    await p.open(wait=True)
    try:
        yield p, flag
    finally:
        await p.close()


async def test_a_read_only_database_is_waited_out_by_the_worker(
    pool: AsyncConnectionPool[Any],
    database_url: str,
    switchable_pool: tuple[AsyncConnectionPool[Any], list[bool]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Case 4: during a failover every write raises ``ReadOnlySqlTransaction``; the worker
    backs off and goes on, and syncs once the database accepts writes again."""
    ro_pool, flag = switchable_pool
    result = await event(pool, "p1", "e1", now=datetime.now(UTC) - timedelta(seconds=60))
    worker = Worker(worker_settings(), ro_pool, {"notion": PageWriter({"p1": "v1"})}, conninfo=database_url)
    running = asyncio.create_task(worker.run())
    try:
        await until(lambda: _logged(caplog, "ReadOnlySqlTransaction"))
        await asyncio.sleep(0.5)
        assert not running.done(), "the worker exited on a read-only database"
        flag[0] = False
        await ro_pool.drain()  # the failover is over: new connections reach a primary
        await until(lambda: _completed(pool, result.job.id))
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
    assert running.exception() is None


async def _completed(pool: AsyncConnectionPool[Any], job_id: int) -> bool:
    return await job_status(pool, job_id) is JobStatus.COMPLETED
