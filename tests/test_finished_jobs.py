"""Finished jobs live in ``finished_jobs`` (migration 034): every statement that finishes a
job moves its row there (completed, failed for good, a lease that expired with its attempts
spent, a removed workspace's pending job), a job that goes on stays in ``sync_jobs``, a manual
retry moves it back; the prune drops whole partitions past retention and moves what the
DEFAULT partition holds into partitions of its own; an upgrade from migration 033 keeps the
finished jobs readable and prunable."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import one_job
import psycopg
import pytest
from db_probe import waiting_on_a_lock
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.infra.sql import migrations
from debounce.migrate import migrate
from debounce.types import JobStatus, SyncJob

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
Conn = psycopg.AsyncConnection[Any]
DAY = 86400.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def where(conn: Conn, job_id: int) -> list[tuple[str, str]]:
    """(table the row is in, its status) for each row of job ``job_id``: sync_jobs or the
    partition of finished_jobs holding it."""
    cur = await conn.execute(  # test-only SQL
        "select 'sync_jobs', status from sync_jobs where id = %(id)s "
        "union all select tableoid::regclass::text, status from finished_jobs where id = %(id)s",
        {"id": job_id},
    )
    return [(str(t), str(s)) for t, s in await cur.fetchall()]


async def claimed(conn: Conn, page: str, *, now: datetime | None, max_attempts: int = 5) -> SyncJob:
    await one_job.enqueue(
        conn,
        "notion",
        page,
        payload={"p": page},
        event_id=f"{page}-{uuid.uuid4().hex[:6]}",
        debounce_seconds=0,
        max_wait_seconds=0,
        max_attempts=max_attempts,
        now=now,
    )
    jobs = [
        c.job
        for c in await queue.claim(conn, "w1", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=now)
    ]
    assert len(jobs) == 1 and jobs[0].source_page_id == page, jobs
    return jobs[0]


async def test_a_completed_job_moves_with_its_fields(conn: Conn) -> None:
    job = await claimed(conn, "p1", now=at(0))
    done = await one_job.complete(conn, job, now=at(5))
    assert done is not None and done.status is JobStatus.COMPLETED and done.finished_at == at(5)
    [(table, status)] = await where(conn, job.id)
    assert table.startswith("finished_jobs_") and status == "completed"
    read = await queue.get(conn, job.id)
    assert read is not None
    assert (read.id, read.status, read.finished_at, read.attempts, read.revision, read.payload) == (
        job.id,
        JobStatus.COMPLETED,
        at(5),
        1,
        job.revision,
        {"p": "p1"},
    )
    assert (read.lease_token, read.locked_by, read.first_event_at, read.created_at) == (
        None,
        None,
        job.first_event_at,
        job.created_at,
    )
    # the page's next event makes a new active job beside the finished one
    again = await one_job.enqueue(
        conn,
        "notion",
        "p1",
        payload={},
        event_id="next",
        debounce_seconds=30,
        max_wait_seconds=300,
        now=at(6),
    )
    assert again.job is not None and again.job.id != job.id
    assert [s for _, s in await where(conn, again.job.id)] == ["pending"]


async def test_a_job_failed_for_good_moves_and_a_retried_failure_stays(conn: Conn) -> None:
    lost = await claimed(conn, "p1", now=at(0))
    failed = await one_job.fail(conn, lost, "gone for good", permanent=True, now=at(1))
    assert failed is not None and failed.status is JobStatus.FAILED
    [(table, status)] = await where(conn, lost.id)
    assert table.startswith("finished_jobs_") and status == "failed"
    assert (await queue.get(conn, lost.id)) == failed and failed.last_error == "gone for good"

    flaky = await claimed(conn, "p2", now=at(10))
    retried = await one_job.fail(conn, flaky, "timeout", now=at(11))
    assert retried is not None and retried.status is JobStatus.PENDING
    assert await where(conn, flaky.id) == [("sync_jobs", "pending")]
    assert retried.retry_at is not None and retried.retry_at > at(11) and retried.attempts == 1


async def test_an_edit_during_the_sync_keeps_the_job_active(conn: Conn) -> None:
    job = await claimed(conn, "p1", now=at(0))
    await one_job.enqueue(
        conn,
        "notion",
        "p1",
        payload={"v": 2},
        event_id="edit",
        debounce_seconds=30,
        max_wait_seconds=300,
        now=at(2),
    )
    follow_up = await one_job.complete(conn, job, now=at(5))
    assert follow_up is not None and follow_up.status is JobStatus.PENDING and follow_up.finished_at is None
    assert await where(conn, job.id) == [("sync_jobs", "pending")]
    assert follow_up.payload == {"v": 2} and follow_up.scheduled_at == at(32)


async def test_an_expired_lease_with_its_attempts_spent_moves(conn: Conn) -> None:
    job = await claimed(conn, "p1", now=at(0), max_attempts=1)
    [expired] = await queue.requeue_expired(conn, now=at(120))
    assert expired.status is JobStatus.FAILED and expired.finished_at == at(120)
    assert expired.last_error is not None and "lease expired" in expired.last_error
    [(table, _)] = await where(conn, job.id)
    assert table.startswith("finished_jobs_")


async def test_a_manual_retry_moves_a_failed_job_back(conn: Conn) -> None:
    job = await claimed(conn, "p1", now=at(0))
    await one_job.fail(conn, job, "no access", permanent=True, now=at(1))
    revived = await queue.retry(conn, job.id, now=at(60))
    assert (revived.id, revived.status, revived.attempts, revived.scheduled_at) == (
        job.id,
        JobStatus.PENDING,
        0,
        at(60),
    )
    assert await where(conn, job.id) == [("sync_jobs", "pending")]
    with pytest.raises(queue.JobConflict):  # not failed any more
        await queue.retry(conn, job.id, now=at(61))
    # a failed job whose page has an active job again stays finished
    again = await claimed(conn, "p1", now=at(61))
    await one_job.fail(conn, again, "no access", permanent=True, now=at(62))
    await one_job.enqueue(
        conn,
        "notion",
        "p1",
        payload={},
        event_id="later",
        debounce_seconds=30,
        max_wait_seconds=300,
        now=at(63),
    )
    with pytest.raises(queue.JobConflict, match="active job"):
        await queue.retry(conn, job.id, now=at(64))
    assert [s for _, s in await where(conn, job.id)] == ["failed"]


async def partitions(conn: Conn) -> list[tuple[datetime, datetime]]:
    cur = await conn.execute("select lo, hi from finished_job_partitions order by lo")  # test-only SQL
    return [(lo, hi) for lo, hi in await cur.fetchall()]


async def test_the_prune_drops_a_partition_past_retention_and_keeps_the_current_one(conn: Conn) -> None:
    old = await claimed(conn, "old", now=at(0))
    await one_job.complete(conn, old, now=at(1))
    # T0 lies before every partition made so far: the row waits in the DEFAULT partition
    assert await where(conn, old.id) == [("finished_jobs_default", "completed")]
    first = await queue.prune(conn, DAY, now=at(2))
    assert first is not None and first["overflow"] == 1 and first["jobs"] == 0
    [(table, _)] = await where(conn, old.id)  # moved into a partition of its own (a cell of DAY/8)
    assert table.startswith("finished_jobs_2026")
    spans = {hi - lo for lo, hi in await partitions(conn) if lo <= at(1) < hi}
    assert spans == {timedelta(seconds=DAY / queue.JOB_PARTITIONS_PER_RETENTION)}

    new = await claimed(conn, "new", now=at(DAY))
    await one_job.complete(conn, new, now=at(DAY))
    # the retention past for `old`, its partition (a cell of 3 h) wholly past a bit later
    late = at(DAY + 1 + DAY / queue.JOB_PARTITIONS_PER_RETENTION)
    pruned = await queue.prune(conn, DAY, now=late)
    assert pruned is not None and pruned["jobs"] == 1 and pruned["partitions_dropped"] >= 1
    assert await where(conn, old.id) == [] and await queue.get(conn, old.id) is None
    assert [s for _, s in await where(conn, new.id)] == ["completed"]
    # partitions ahead: one reaches past the prune's clock by a partition's width
    assert (await partitions(conn))[-1][1] > late
    again = await queue.prune(conn, DAY, now=late)
    assert again is not None and (again["jobs"], again["partitions_dropped"], again["overflow"]) == (0, 0, 0)


async def test_rows_of_the_default_partition_around_a_partition_get_their_own(conn: Conn) -> None:
    await queue.prune(conn, 3 * DAY, now=at(0))  # partitions from T0 on
    ahead = await partitions(conn)
    job = await claimed(conn, "early", now=at(-2 * DAY))
    await one_job.complete(conn, job, now=at(-2 * DAY))  # below every partition
    far = await claimed(conn, "far", now=at(30 * DAY))
    await one_job.complete(conn, far, now=at(30 * DAY))  # past every partition
    assert await where(conn, job.id) == [("finished_jobs_default", "completed")]
    pruned = await queue.prune(conn, 3 * DAY, now=at(1))  # both younger than the retention
    assert pruned is not None and pruned["overflow"] == 2 and pruned["jobs"] == 0
    for j in (job, far):
        [(table, _)] = await where(conn, j.id)
        assert table != "finished_jobs_default"
    now_parts = await partitions(conn)
    assert set(ahead) <= set(now_parts)
    assert all(a[1] <= b[0] for a, b in pairwise(now_parts))  # no overlap


#: Three jobs as the release at migration 033 kept them, all in sync_jobs: one completed at
#: %(t0)s + 1 s, one failed for good at %(t2)s, one still running (its lease held).
AT_033 = """
insert into sync_jobs (source_type, source_page_id, status, payload, event_count, attempts,
                       scheduled_at, first_event_at, max_wait_until, revision, claimed_revision,
                       last_error, created_at, updated_at, finished_at, lease_token,
                       lease_expires_at, locked_by)
values ('notion', 'a', 'completed', '{"p": "a"}', 2, 1, %(t0)s, %(t0)s, %(t0)s, 2, 2, null,
        %(t0)s, %(t0)s + interval '1 second', %(t0)s + interval '1 second', null, null, null),
       ('notion', 'b', 'failed', '{"p": "b"}', 1, 5, %(t2)s, %(t2)s, %(t2)s, 1, 1, 'nope',
        %(t2)s, %(t2)s, %(t2)s, null, null, null),
       ('notion', 'c', 'processing', '{"p": "c"}', 1, 1, %(t2)s, %(t2)s, %(t2)s, 1, 1, null,
        %(t2)s, %(t2)s, null, gen_random_uuid(), %(t2)s + interval '1 minute', 'w1')
returning *
"""


async def test_a_prune_waits_for_a_job_finishing_into_the_default_partition(database_url: str) -> None:
    """The first prune makes the partition that covers now while a settle has just put a row
    of that range in the DEFAULT partition, uncommitted: attaching it then would fail (the
    default would hold a row of the new range); the prune waits for the settle instead, then
    adopts its row."""
    async with (
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watcher,
        await psycopg.AsyncConnection.connect(database_url) as settler,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as pruner,
    ):
        job = await claimed(watcher, "p1", now=None)  # the database's clock: no partition yet
        done = await one_job.complete(settler, job)  # its transaction left open
        assert done is not None and done.status is JobStatus.COMPLETED
        prune = asyncio.create_task(queue.prune(pruner, DAY))
        await waiting_on_a_lock(watcher, pruner.info.backend_pid, prune)
        await settler.commit()
        pruned = await prune
        assert pruned is not None and pruned["overflow"] == 1 and pruned["partitions_added"] >= 1
        [(table, status)] = await where(watcher, job.id)
        assert table != "finished_jobs_default" and status == "completed"
        # partitions now cover the next minute: the next prune takes no lock and adds nothing
        again = await queue.prune(pruner, DAY)
        assert again is not None and (again["overflow"], again["partitions_added"]) == (0, 0)


@pytest.fixture
def schema_at_033(pg_server_url: str) -> Iterator[str]:
    """A schema migrated up to 033 (finished jobs still in sync_jobs)."""
    schema = "f_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')  # name is ours
    url = make_conninfo(pg_server_url, options=f"-c search_path={schema}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "create table schema_migrations (version integer primary key, name text "
            "not null, applied_at timestamptz not null default now())"
        )
        for version, name, text in migrations():
            if version > 33:
                continue
            conn.execute(text.encode())
            conn.execute("insert into schema_migrations (version, name) values (%s, %s)", (version, name))
    try:
        yield url
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema}" cascade')


async def test_an_upgrade_from_033_keeps_finished_jobs_readable_and_prunable(schema_at_033: str) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        schema_at_033, min_size=1, max_size=4, open=False, kwargs={"autocommit": True}, timeout=10
    )
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            # test-only SQL: what the release at 033 left, finished jobs among the active ones
            await cur.execute(AT_033, {"t0": T0, "t2": at(2 * DAY)})
            rows = {r["source_page_id"]: SyncJob.from_row(r) for r in await cur.fetchall()}
        before = {rows["a"].id: rows["a"], rows["b"].id: rows["b"]}
        a, b, c = rows["a"], rows["b"], rows["c"]
        applied = await migrate(schema_at_033)
        assert applied[0] == "034_finished_jobs.sql"
        async with pool.connection() as conn:
            assert {j: await queue.get(conn, j) for j in before} == before
            for j in (a.id, b.id):
                [(table, _)] = await where(conn, j)
                assert table.startswith("finished_jobs_2026")  # partitions of one day
            assert await where(conn, c.id) == [("sync_jobs", "processing")]
            done = await one_job.complete(conn, c, now=at(2 * DAY + 5))
            assert done is not None and done.status is JobStatus.COMPLETED
            pruned = await queue.prune(conn, DAY, now=at(2 * DAY + 60))
            assert pruned is not None and pruned["jobs"] == 1  # a's day, wholly past retention
            assert await queue.get(conn, a.id) is None and await queue.get(conn, b.id) == before[b.id]
    finally:
        await pool.close()
