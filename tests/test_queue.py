"""The queue's rules against a real Postgres, time controlled through ``now=``."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import one_job
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.types import EnqueueOutcome, JobEvent, JobStatus, SyncJob

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
Conn = psycopg.AsyncConnection[Any]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def ev(
    db: Any,
    page: str,
    event_id: str | None,
    *,
    now: datetime | None,
    payload: dict[str, Any] | None = None,
    debounce: float = 30,
    max_wait: float = 300,
    source: str = "notion",
) -> Any:
    return await one_job.enqueue(
        db,
        source,
        page,
        payload=payload if payload is not None else {"event": event_id},
        event_id=event_id,
        debounce_seconds=debounce,
        max_wait_seconds=max_wait,
        now=now,
    )


async def count_rows(conn: Conn, where: str = "true") -> int:
    # test-only SQL: active jobs and finished ones (migration 034)
    cur = await conn.execute(
        f"select count(*) from (select * from sync_jobs union all "
        f"select * from finished_jobs) j where {where}"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def claim_one(conn: Conn, now: datetime, worker: str = "w1") -> SyncJob:
    jobs = [
        c.job
        for c in await queue.claim(
            conn, worker, limit=1, lease_seconds=60, source_slots={"notion": 1}, now=now
        )
    ]
    assert len(jobs) == 1, jobs
    return jobs[0]


# --- debounce upsert -------------------------------------------------------------------------


async def test_new_page_creates_pending_job_at_now_plus_window(conn: Conn) -> None:
    r = await ev(conn, "p1", "e1", now=T0)
    assert r.outcome is EnqueueOutcome.CREATED
    job = r.job
    assert job.status is JobStatus.PENDING
    assert job.scheduled_at == at(30)
    assert job.first_event_at == T0
    assert job.max_wait_until == at(300)
    assert job.event_count == 1 and job.attempts == 0
    assert job.payload == {"event": "e1"} and job.event_id == "e1"
    assert job.scheduled_at.tzinfo is not None and job.scheduled_at.utcoffset() == timedelta(0)


async def test_burst_is_one_job_with_latest_payload_pushed_back(conn: Conn) -> None:
    for i in range(10):
        await ev(conn, "p1", f"e{i}", now=at(i * 5), payload={"n": i})
    assert await count_rows(conn) == 1
    job = await one_job.active_for_page(conn, "notion", "p1")
    assert job is not None
    assert job.event_count == 10
    assert job.payload == {"n": 9} and job.event_id == "e9"
    assert job.scheduled_at == at(45 + 30)
    assert job.first_event_at == T0


async def test_max_wait_caps_scheduled_at(conn: Conn) -> None:
    # An event every 20 s for 10 minutes: the window alone would never close.
    for i in range(30):
        r = await ev(conn, "p1", f"e{i}", now=at(i * 20), debounce=30, max_wait=300)
    assert r.job.scheduled_at == at(300)
    # And the job is claimable once max wait is reached, though edits keep coming.
    assert [
        c.job
        for c in await queue.claim(
            conn, "w", limit=5, lease_seconds=60, source_slots={"notion": 5}, now=at(299)
        )
    ] == []
    assert (
        len(
            [
                c.job
                for c in await queue.claim(
                    conn, "w", limit=5, lease_seconds=60, source_slots={"notion": 5}, now=at(300)
                )
            ]
        )
        == 1
    )


async def test_duplicate_event_id_changes_nothing(conn: Conn) -> None:
    first = await ev(conn, "p1", "e1", now=T0, payload={"v": 1})
    dup = await ev(conn, "p1", "e1", now=at(10), payload={"v": "replayed"})
    assert dup.outcome is EnqueueOutcome.DUPLICATE
    assert dup.job == first.job
    # Still a duplicate after the job completed: the id is remembered, not the job.
    job = await claim_one(conn, at(40))
    await one_job.complete(conn, job, now=at(41))
    again = await ev(conn, "p1", "e1", now=at(50))
    assert again.outcome is EnqueueOutcome.DUPLICATE and again.job is None
    assert await count_rows(conn) == 1


async def test_same_event_id_in_other_source_is_not_a_duplicate(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0, source="notion")
    r = await ev(conn, "C1", "e1", now=T0, source="slack")
    assert r.outcome is EnqueueOutcome.CREATED


async def test_event_without_id_is_never_a_duplicate(conn: Conn) -> None:
    await ev(conn, "p1", None, now=T0)
    r = await ev(conn, "p1", None, now=at(1))
    assert r.outcome is EnqueueOutcome.DEBOUNCED and r.job.event_count == 2


async def test_failed_page_gets_a_fresh_job(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    failed = await one_job.fail(conn, job, "no access", permanent=True, now=at(31))
    assert failed is not None and failed.status is JobStatus.FAILED
    r = await ev(conn, "p1", "e2", now=at(40))
    assert r.outcome is EnqueueOutcome.CREATED and r.job.id != job.id
    assert await count_rows(conn, "status = 'failed'") == 1
    assert await count_rows(conn, "status = 'pending'") == 1


async def test_event_keeps_the_later_of_backoff_and_debounce(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    retried = await one_job.fail(conn, job, "timeout", jitter=0, now=at(31))
    assert retried is not None and retried.scheduled_at == at(61)  # 30 s backoff
    # An event inside the backoff must not pull the retry earlier...
    r = await ev(conn, "p1", "e2", now=at(32), debounce=5)
    assert r.job.scheduled_at == at(61)
    # ...and one whose window ends after the backoff pushes it later.
    r = await ev(conn, "p1", "e3", now=at(50), debounce=30)
    assert r.job.scheduled_at == at(80)


async def test_edit_during_processing_produces_follow_up_with_new_payload(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0, payload={"v": 1})
    job = await claim_one(conn, at(30))
    assert job.payload == {"v": 1} and job.claimed_revision == job.revision
    r = await ev(conn, "p1", "e2", now=at(35), payload={"v": 2})
    assert r.outcome is EnqueueOutcome.REQUEUED_AFTER_RUNNING
    assert r.job.id == job.id and r.job.status is JobStatus.PROCESSING
    assert r.job.scheduled_at == at(65)
    done = await one_job.complete(conn, job, now=at(40))
    assert done is not None
    assert done.status is JobStatus.PENDING and done.attempts == 0
    assert [
        c.job
        for c in await queue.claim(
            conn, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(64)
        )
    ] == []
    follow = await claim_one(conn, at(65))
    assert follow.id == job.id and follow.payload == {"v": 2}
    final = await one_job.complete(conn, follow, now=at(66))
    assert final is not None and final.status is JobStatus.COMPLETED
    assert await count_rows(conn) == 1


async def test_events_during_processing_open_a_new_max_wait(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    await ev(conn, "p1", "e2", now=at(1000), max_wait=300)
    r = await ev(conn, "p1", "e3", now=at(1250), max_wait=300)
    assert r.job.first_event_at == at(1000)
    r = await ev(conn, "p1", "e4", now=at(1290), max_wait=300)
    assert r.job.scheduled_at == at(1300)
    assert job.id == r.job.id


# --- claim ------------------------------------------------------------------------------------


async def test_claim_takes_only_due_jobs_by_priority_then_due_time(conn: Conn) -> None:
    await ev(conn, "late", "e1", now=at(100))
    await ev(conn, "old", "e2", now=T0)
    await ev(conn, "newer", "e3", now=at(10))
    await queue.resync(conn, "notion", "urgent", now=at(20))
    jobs = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=10, lease_seconds=60, source_slots={"notion": 10}, now=at(41)
        )
    ]
    assert [j.source_page_id for j in jobs] == ["urgent", "old", "newer"]
    for j in jobs:
        assert j.status is JobStatus.PROCESSING and j.attempts == 1
        assert j.lease_expires_at == at(101) and j.locked_by == "w" and j.lease_token


async def test_claim_restricted_to_sources(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0, source="notion")
    await ev(conn, "C1", "e2", now=T0, source="slack")
    jobs = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=10, lease_seconds=60, source_slots={"slack": 10}, now=at(60)
        )
    ]
    assert [j.source_type for j in jobs] == ["slack"]


async def test_concurrent_claimers_never_claim_a_job_twice(database_url: str) -> None:
    async with AsyncConnectionPool(
        database_url, min_size=9, max_size=9, kwargs={"autocommit": True}, open=False
    ) as pool:
        events = [JobEvent("notion", f"page-{i}", {"i": i}, f"e{i}", 0.0, 0.0) for i in range(1000)]
        await queue.enqueue(pool, events, now=T0)
        claimed: list[int] = []

        async def claimer(n: int) -> None:
            while True:
                jobs = [
                    c.job
                    for c in await queue.claim(
                        pool, f"w{n}", limit=7, lease_seconds=60, source_slots={"notion": 7}
                    )
                ]
                if not jobs:
                    return
                claimed.extend(j.id for j in jobs)
                for j in jobs:
                    await one_job.complete(pool, j)

        await asyncio.gather(*(claimer(n) for n in range(8)))
        assert len(claimed) == 1000
        assert len(set(claimed)) == 1000
        async with pool.connection() as c:
            cur = await c.execute("select count(*) from finished_jobs where status = 'completed'")
            assert (await cur.fetchone()) == (1000,)


# --- concurrency of the debounce upsert -------------------------------------------------------


async def test_200_concurrent_enqueues_on_one_page(database_url: str) -> None:
    async with AsyncConnectionPool(
        database_url, min_size=20, max_size=20, kwargs={"autocommit": True}, open=False
    ) as pool:
        commit_order: list[int] = []

        async def one(i: int) -> None:
            await ev(pool, "hot", f"e{i}", now=T0, payload={"i": i})
            commit_order.append(i)

        await asyncio.gather(*(one(i) for i in range(200)))
        job = await one_job.active_for_page(pool, "notion", "hot")
        assert job is not None
        assert job.event_count == 200
        async with pool.connection() as c:
            cur = await c.execute(
                "select (select count(*) from sync_jobs) + (select count(*) from finished_jobs)"
            )
            assert (await cur.fetchone()) == (1,)
        # The row holds the payload of the enqueue that committed last: the row lock orders the
        # updates, so the last writer is the one whose revision is highest.
        assert job.revision == 200
        assert job.payload["i"] in commit_order[-20:]


async def test_enqueues_racing_complete_never_lose_an_event(database_url: str) -> None:
    """Many rounds of: a worker claims and completes while events keep arriving on another
    connection. Every event must be followed by a sync that started after it was accepted."""
    async with (
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as producer,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as worker,
    ):
        rounds = 150
        synced: list[int] = []  # payload "i" of every claimed job
        stop = asyncio.Event()

        async def produce() -> None:
            for i in range(rounds):
                await ev(producer, "p", f"e{i}", now=None, debounce=0, max_wait=0, payload={"i": i})
                await asyncio.sleep(0)
            stop.set()

        async def work() -> None:
            while True:
                jobs = [
                    c.job
                    for c in await queue.claim(
                        worker, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}
                    )
                ]
                if jobs:
                    synced.append(jobs[0].payload["i"])
                    await one_job.complete(worker, jobs[0])
                elif stop.is_set():
                    return
                else:
                    await asyncio.sleep(0)

        await asyncio.gather(produce(), work())
        # Drain what is left (a follow-up may still be pending).
        while jobs := [
            c.job
            for c in await queue.claim(worker, "w", limit=1, lease_seconds=60, source_slots={"notion": 1})
        ]:
            synced.append(jobs[0].payload["i"])
            await one_job.complete(worker, jobs[0])
        # Every event is covered by a sync that started after it: the last one carries the
        # last event, and syncs never go backwards.
        assert synced[-1] == rounds - 1
        assert synced == sorted(synced)
        assert len(synced) > 10  # the race was exercised: many claims interleaved with events
        cur = await worker.execute("select count(*) from sync_jobs where status in ('pending','processing')")
        assert (await cur.fetchone()) == (0,)


# --- enqueue -----------------------------------------------------------------------------


async def test_enqueue_merges_events_of_one_page(conn: Conn) -> None:
    events = [
        JobEvent("notion", "p1", {"v": 1}, "a", 30, 300),
        JobEvent("notion", "p2", {"v": 1}, "b", 30, 300),
        JobEvent("notion", "p1", {"v": 2}, "c", 30, 300),
        JobEvent("notion", "p1", {"v": 3}, "a", 30, 300),  # duplicate of the first
    ]
    results = await queue.enqueue(conn, events, now=T0)
    assert [r.outcome for r in results] == [
        EnqueueOutcome.CREATED,
        EnqueueOutcome.CREATED,
        EnqueueOutcome.CREATED,
        EnqueueOutcome.DUPLICATE,
    ]
    p1 = await one_job.active_for_page(conn, "notion", "p1")
    assert p1 is not None and p1.event_count == 2 and p1.payload == {"v": 2}
    assert p1.event_id == "c"
    again = await one_job.enqueue_events(conn, [JobEvent("notion", "p1", {"v": 9}, "d", 30, 300)], now=at(5))
    assert again[0].job is not None
    assert again[0].outcome is EnqueueOutcome.DEBOUNCED and again[0].job.event_count == 3


#: Migration 018's debounce_merge_kinds, the SQL function migration 036 rewrote in PL/pgSQL.
MERGE_KINDS_018 = """
    select case when a is null then b
                when b is null then a
                when cardinality(a) = 0 or cardinality(b) = 0 then '{}'::text[]
                else array(select distinct k from unnest(a || b) as u(k) order by k) end
      from (select %(a)s::text[] as a, %(b)s::text[] as b) x
"""


async def test_change_kinds_merge_as_migration_018_merged_them(conn: Conn) -> None:
    """Migration 036's fast paths (a first set, the same single kind, "everything") answer
    what migration 018's query answered, for every pair of these sets, in both orders."""
    sets: list[list[str] | None] = [
        None,
        [],
        ["content"],
        ["title"],
        ["title", "content"],
        ["content", "content"],
        ["properties", "content", "title"],
    ]
    for a in sets:
        for b in sets:
            ours = await (
                await conn.execute("select debounce_merge_kinds(%s::text[], %s::text[])", (a, b))
            ).fetchone()
            then = await (await conn.execute(MERGE_KINDS_018, {"a": a, "b": b})).fetchone()
            assert ours is not None and then is not None and ours[0] == then[0], (a, b)
    agg = await (
        await conn.execute(
            "select debounce_union_kinds(k) from (values ('{content}'::text[]), "
            "('{title,content}'), ('{content}')) as u(k)"
        )
    ).fetchone()
    assert agg is not None and agg[0] == ["content", "title"]


# --- fail, retry, backoff --------------------------------------------------------------------


async def test_backoff_schedule_then_failed_after_max_attempts(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    now = at(30)
    delays = []
    for attempt in range(1, 6):
        job = await claim_one(conn, now)
        assert job.attempts == attempt
        after = await one_job.fail(conn, job, f"boom {attempt}", jitter=0, now=now)
        assert after is not None
        if attempt < 5:
            assert after.status is JobStatus.PENDING
            delays.append((after.scheduled_at - now).total_seconds())
            now = after.scheduled_at
        else:
            assert after.status is JobStatus.FAILED and after.finished_at == now
            assert after.last_error == "boom 5"
    assert delays == [30, 120, 480, 1800]


def test_backoff_jitter_stays_within_bounds() -> None:
    rng = random.Random(7)
    values = [queue.backoff_delay(2, jitter=0.2, rng=rng) for _ in range(200)]
    assert min(values) >= 96 and max(values) <= 144
    assert len(set(values)) > 100
    assert queue.backoff_delay(99, jitter=0) == 7200


async def test_rate_limited_reschedules_without_spending_an_attempt(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    after = await one_job.fail(conn, job, "429", retry_after=17, now=at(31))
    assert after is not None and after.status is JobStatus.PENDING
    assert after.attempts == 0 and after.scheduled_at == at(48)
    again = await claim_one(conn, at(48))
    assert again.attempts == 1


async def test_permanent_fails_at_once(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    after = await one_job.fail(conn, job, "token revoked", permanent=True, now=at(31))
    assert after is not None and after.status is JobStatus.FAILED and after.attempts == 1


async def test_final_failure_with_edit_during_sync_leaves_follow_up(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    await ev(conn, "p1", "e2", now=at(31), payload={"v": "new"})
    after = await one_job.fail(conn, job, "no access", permanent=True, now=at(32))
    assert after is not None and after.status is JobStatus.PENDING
    assert after.attempts == 0 and after.scheduled_at == at(61)


async def test_manual_retry_of_failed_job(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    await one_job.fail(conn, job, "x", permanent=True, now=at(31))
    revived = await queue.retry(conn, job.id, now=at(100))
    assert revived.status is JobStatus.PENDING and revived.attempts == 0
    assert revived.scheduled_at == at(100) and revived.finished_at is None
    with pytest.raises(queue.JobConflict):
        await queue.retry(conn, job.id)
    with pytest.raises(queue.JobNotFound):
        await queue.retry(conn, 999999)


async def test_manual_retry_refused_when_page_has_active_job(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    await one_job.fail(conn, job, "x", permanent=True, now=at(31))
    await ev(conn, "p1", "e2", now=at(40))
    with pytest.raises(queue.JobConflict, match="already has an active job"):
        await queue.retry(conn, job.id)


async def test_stale_claim_cannot_complete(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    requeued = await queue.requeue_expired(conn, now=at(91))
    assert [j.id for j in requeued] == [job.id]
    assert requeued[0].status is JobStatus.PENDING and requeued[0].last_error
    other = await claim_one(conn, at(92), worker="w2")
    assert await one_job.complete(conn, job, now=at(93)) is None  # the old claim lost its lease
    assert await one_job.fail(conn, job, "late", now=at(93)) is None
    done = await one_job.complete(conn, other, now=at(94))
    assert done is not None and done.status is JobStatus.COMPLETED


# --- leases ------------------------------------------------------------------------------------


async def test_expired_lease_comes_back_and_extension_keeps_it(conn: Conn) -> None:
    await ev(conn, "a", "e1", now=T0)
    await ev(conn, "b", "e2", now=T0)
    a, b = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=2, lease_seconds=60, source_slots={"notion": 2}, now=at(30)
        )
    ]
    extended = await queue.settle(conn, renewed=[a], lease_seconds=120, now=at(80))
    assert {i: j.lease_expires_at for i, j in extended.items()} == {a.id: at(200)}
    assert await queue.requeue_expired(conn, now=at(89)) == []
    back = await queue.requeue_expired(conn, now=at(91))
    assert [j.id for j in back] == [b.id]
    assert back[0].status is JobStatus.PENDING and back[0].attempts == 1
    assert back[0].scheduled_at <= at(91)


async def test_expired_lease_with_attempts_spent_fails(conn: Conn) -> None:
    await one_job.enqueue(
        conn,
        "notion",
        "p",
        payload={},
        event_id="e",
        debounce_seconds=0,
        max_wait_seconds=0,
        max_attempts=1,
        now=T0,
    )
    await claim_one(conn, at(1))
    (job,) = await queue.requeue_expired(conn, now=at(100))
    assert job.status is JobStatus.FAILED and "lease expired" in (job.last_error or "")


async def test_release_gives_job_back_untouched(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    (released,) = await queue.release(conn, job, now=at(31))
    assert released.status is JobStatus.PENDING and released.attempts == 0
    assert released.scheduled_at == at(30) and released.lease_token is None


# --- resync, inspection, prune ----------------------------------------------------------------


async def test_resync_is_due_now_and_revives_failed_page(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await claim_one(conn, at(30))
    await one_job.fail(conn, job, "x", permanent=True, now=at(31))
    fresh = await queue.resync(conn, "notion", "p1", now=at(40))
    assert fresh.id != job.id and fresh.scheduled_at == at(40)
    assert fresh.priority == queue.RESYNC_PRIORITY
    # A webhook right after a manual re-sync does not delay it.
    r = await ev(conn, "p1", "e2", now=at(41))
    assert r.job.scheduled_at == at(40) and r.job.id == fresh.id


async def test_resync_of_a_page_without_a_job_takes_the_workspace_of_its_document(conn: Conn) -> None:
    # A page another workspace's token synced is re-synced with that token: without a workspace
    # the job ran with the environment's, which cannot see the page and marked it deleted.
    wid = (
        await (
            await conn.execute(
                "insert into workspaces (source_type, external_id, name, origin) "
                "values ('notion', 'ws-b', 'B', 'env') returning id"
            )
        ).fetchone()
    )[0]  # type: ignore[index]
    await conn.execute(
        "insert into documents (source_type, document_id, source_page_id, title, content, "
        "content_sha256, synced_at, workspace_id) values ('notion', 'p9', 'p9', 't', 'c', 'x', "
        "now(), %s)",
        (wid,),
    )
    job = await queue.resync(conn, "notion", "p9", now=at(1))
    assert job.workspace_id == wid
    assert (await queue.resync(conn, "notion", "never-synced", now=at(1))).workspace_id is None


async def test_resync_of_pending_page_pulls_it_forward(conn: Conn) -> None:
    await ev(conn, "p1", "e1", now=T0)
    job = await queue.resync(conn, "notion", "p1", now=at(1))
    assert job.scheduled_at == at(1) and job.event_count == 1
    assert await count_rows(conn) == 1


async def test_list_get_stats_and_prune(conn: Conn) -> None:
    for i in range(5):
        await ev(conn, f"p{i}", f"e{i}", now=T0, source="notion" if i < 3 else "slack")
    done = await claim_one(conn, at(30))
    await one_job.complete(conn, done, now=at(31))
    page1 = await queue.list_jobs(conn, limit=2)
    assert len(page1.jobs) == 2 and page1.next_cursor is not None
    page2 = await queue.list_jobs(conn, limit=2, cursor=page1.next_cursor)
    page3 = await queue.list_jobs(conn, limit=2, cursor=page2.next_cursor)
    ids = [j.id for p in (page1, page2, page3) for j in p.jobs]
    assert ids == sorted(ids, reverse=True) and len(ids) == 5 and page3.next_cursor is None
    assert [j.id for j in (await queue.list_jobs(conn, status="completed")).jobs] == [done.id]
    assert len((await queue.list_jobs(conn, source_type="slack")).jobs) == 2
    assert await queue.get(conn, done.id) is not None
    assert await queue.get(conn, 10**9) is None
    s = await queue.stats(conn, now=at(40))
    assert s["totals"] == {"pending": 4, "processing": 0, "completed": 1, "failed": 0}
    assert s["by_source"]["slack"]["pending"] == 2
    assert s["oldest_due_age_seconds"] == pytest.approx(10.0)
    # finished jobs go by whole partitions (3600 / 8 s wide): kept past the retention until
    # their partition is wholly past it, an eighth of the retention later at most
    pruned = await queue.prune(conn, 3600, event_older_than=3600, now=at(31 + 3601))
    assert pruned is not None and (pruned["jobs"], pruned["events"]) == (0, 5)
    assert await queue.get(conn, done.id) is not None
    pruned = await queue.prune(conn, 3600, event_older_than=3600, now=at(31 + 3600 + 451))
    assert pruned is not None and (pruned["jobs"], pruned["events"]) == (1, 0)
    assert await queue.get(conn, done.id) is None


# --- bad arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source_page_id": ""}, "source_page_id"),
        ({"source_page_id": "   "}, "source_page_id"),
        ({"source_type": ""}, "source_type"),
        ({"debounce_seconds": -1}, "debounce_seconds"),
        ({"max_wait_seconds": -5}, "max_wait_seconds"),
        ({"debounce_seconds": float("nan")}, "debounce_seconds"),
        ({"event_id": ""}, "event_id"),
        ({"payload": ["not", "a", "dict"]}, "payload"),
    ],
)
async def test_bad_arguments_raise_value_error_and_write_nothing(
    conn: Conn, kwargs: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {
        "source_type": "notion",
        "source_page_id": "p1",
        "payload": {},
        "event_id": "e1",
        "debounce_seconds": 30,
        "max_wait_seconds": 300,
    }
    args.update(kwargs)
    source_type = args.pop("source_type")
    page = args.pop("source_page_id")
    with pytest.raises(ValueError, match=message):
        await one_job.enqueue(conn, source_type, page, **args)
    assert await count_rows(conn) == 0
    cur = await conn.execute("select count(*) from seen_events")
    assert (await cur.fetchone()) == (0,)


async def test_unknown_status_and_bad_limits(conn: Conn) -> None:
    with pytest.raises(ValueError, match="unknown job status"):
        await queue.list_jobs(conn, status="done")
    with pytest.raises(ValueError, match="limit"):
        [c.job for c in await queue.claim(conn, "w", limit=0, lease_seconds=60, source_slots={"notion": 0})]
    with pytest.raises(ValueError, match="lease_seconds"):
        [c.job for c in await queue.claim(conn, "w", limit=1, lease_seconds=0, source_slots={"notion": 1})]
    with pytest.raises(ValueError, match="older_than"):
        await queue.prune(conn, -1)


async def test_bad_event_in_batch_rejects_whole_batch(conn: Conn) -> None:
    events = [
        JobEvent("notion", "p1", {}, "a", 30, 300),
        JobEvent("notion", "", {}, "b", 30, 300),
    ]
    with pytest.raises(ValueError, match="source_page_id"):
        await queue.enqueue(conn, events)
    assert await count_rows(conn) == 0


async def test_claim_with_source_slots_caps_each_source(conn: Conn) -> None:
    events = [
        JobEvent(src, f"{src}-{i}", {}, f"{src}{i}", 0, 0) for src in ("notion", "slack") for i in range(5)
    ]
    await queue.enqueue(conn, events, now=T0)
    jobs = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=6, lease_seconds=60, source_slots={"notion": 2, "slack": 10}, now=at(1)
        )
    ]
    by_source = [j.source_type for j in jobs]
    assert by_source.count("notion") == 2 and by_source.count("slack") == 4
    assert [
        c.job
        for c in await queue.claim(
            conn, "w", limit=6, lease_seconds=60, source_slots={"notion": 0}, now=at(1)
        )
    ] == []
    rest = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=10, lease_seconds=60, source_slots={"notion": 10}, now=at(1)
        )
    ]
    assert [j.source_type for j in rest] == ["notion"] * 3


async def test_settle_records_each_completion_and_follow_ups(conn: Conn) -> None:
    await queue.enqueue(
        conn, [JobEvent("notion", f"p{i}", {"v": 1}, f"e{i}", 0, 0) for i in range(4)], now=T0
    )
    jobs = [
        c.job
        for c in await queue.claim(
            conn, "w", limit=4, lease_seconds=60, source_slots={"notion": 4}, now=at(1)
        )
    ]
    await ev(conn, "p2", "late", now=at(2), payload={"v": 2}, debounce=0)
    stale = jobs[3]
    await queue.requeue_expired(conn, now=at(100))  # every lease expired: claims lost
    fresh = [
        c.job
        for c in await queue.claim(
            conn, "w2", limit=4, lease_seconds=60, source_slots={"notion": 4}, now=at(101)
        )
    ]
    await ev(conn, "p1", "during-second-run", now=at(101.5), payload={"v": 3}, debounce=5)
    done = await queue.settle(conn, completed=[*fresh, stale], now=at(102))
    assert set(done) == {j.id for j in fresh}  # the stale claim matched nothing
    statuses = {j.source_page_id: j.status for j in done.values()}
    assert statuses == {
        "p0": JobStatus.COMPLETED,
        "p1": JobStatus.PENDING,
        "p2": JobStatus.COMPLETED,
        "p3": JobStatus.COMPLETED,
    }
    follow_up = next(j for j in done.values() if j.source_page_id == "p1")
    assert follow_up.scheduled_at == at(106.5) and follow_up.payload == {"v": 3}
    assert await queue.settle(conn, completed=[]) == {}


async def test_multi_row_statements_do_not_deadlock(database_url: str) -> None:
    """enqueue, settle (renewals, completions) and release all lock several jobs; they lock
    them in one (source_type, source_page_id) order, so racing them never deadlocks (which
    would turn a webhook into a 503). Rows are inserted in reverse page order so that heap
    order and key order disagree."""
    pages = [f"p{i:02d}" for i in range(20)]
    async with AsyncConnectionPool(
        database_url, min_size=3, max_size=3, kwargs={"autocommit": True}, open=False
    ) as pool:
        for page in reversed(pages):
            await one_job.enqueue(
                pool,
                "notion",
                page,
                payload={},
                event_id=f"seed-{page}",
                debounce_seconds=0,
                max_wait_seconds=0,
            )
        jobs = [
            c.job
            for c in await queue.claim(pool, "w", limit=20, lease_seconds=60, source_slots={"notion": 20})
        ]
        assert len(jobs) == 20
        rng = random.Random(3)

        async def events() -> None:
            for n in range(60):
                batch = [
                    JobEvent("notion", p, {"n": n}, f"e{n}-{p}", 30, 300)
                    for p in rng.sample(pages, len(pages))
                ]
                await queue.enqueue(pool, batch)

        async def leases() -> None:
            for _ in range(60):
                await queue.settle(pool, renewed=rng.sample(jobs, len(jobs)), lease_seconds=60)

        await asyncio.gather(events(), leases())
        done = await queue.settle(pool, completed=rng.sample(jobs, 10))
        released = await queue.release(pool, [j for j in jobs if j.id not in done])
        assert len(done) == 10 and len(released) == 10
        assert all(j.status is JobStatus.PENDING for j in done.values())  # follow-ups
