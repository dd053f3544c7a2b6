"""What keeps the queue free of deadlocks by construction (docs/claim.md, "Keeping the line"):
a statement that changes jobs locks its job rows first and its workspaces' rows after them, in
id order; the claim never waits for a lock (SKIP LOCKED, or rows it already holds). Two
transactions that take locks in one global order cannot wait on each other in a cycle, so
nothing retries a statement the deadlock detector cancelled. The waits are observed, not timed:
a session's wait is read from pg_stat_activity, and a lock another session holds from a
``NOWAIT`` probe."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from db_probe import waiting_on_a_lock
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.infra.secrets import Keyring, new_key
from debounce.types import JobEvent, SyncJob

KEYS = Keyring(new_key())
Conn = psycopg.AsyncConnection[Any]
LOCK_WORKSPACE = "select id from workspaces where id = %s for no key update"  # test-only SQL
LOCK_WORKSPACE_NOWAIT = LOCK_WORKSPACE + " nowait"  # test-only SQL
LOCK_JOBS_NOWAIT = "select id from sync_jobs where id = any(%s) for update nowait"  # test-only


async def two_workspaces_with_a_claimed_job_each(
    pool: AsyncConnectionPool[Any],
) -> tuple[list[int], list[SyncJob]]:
    ids = []
    for name in ("A", "B"):
        row = await workspaces.save(
            pool,
            KEYS,
            source_type="notion",
            external_id=name,
            name=name,
            credentials={"access_token": f"tok-{name}"},
        )
        ids.append(int(row["id"]))
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion",
                f"page-{ws}",
                {},
                event_id=f"e-{ws}",
                debounce_seconds=0.0,
                max_wait_seconds=60.0,
                workspace_id=ws,
            )
            for ws in ids
        ],
    )
    jobs = [
        c.job for c in await queue.claim(pool, "w", limit=8, lease_seconds=60, source_slots={"notion": 8})
    ]
    assert sorted(j.workspace_id or 0 for j in jobs) == ids
    return ids, jobs


async def test_a_completion_locks_its_jobs_then_its_workspaces_in_id_order(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    (a, b), jobs = await two_workspaces_with_a_claimed_job_each(pool)
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as worker,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe,
    ):
        await holder.execute(LOCK_WORKSPACE, (b,))  # the higher id is held elsewhere
        done = asyncio.create_task(queue.settle(worker, completed=jobs))
        await waiting_on_a_lock(probe, worker.info.backend_pid)
        # waiting for B, the completion already holds both job rows and workspace A (lower id)
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await probe.execute(LOCK_JOBS_NOWAIT, ([j.id for j in jobs],))
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await probe.execute(LOCK_WORKSPACE_NOWAIT, (a,))
        await holder.commit()
        finished = await done
    assert sorted(finished) == sorted(j.id for j in jobs)
    assert {j.status for j in finished.values()} == {"completed"}


async def test_an_enqueue_locks_its_jobs_before_its_workspace(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    (a, _), jobs = await two_workspaces_with_a_claimed_job_each(pool)
    job_a = next(j for j in jobs if j.workspace_id == a)
    await queue.settle(pool, completed=[job_a])
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as web,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe,
    ):
        await holder.execute(LOCK_WORKSPACE, (a,))
        sent = asyncio.create_task(
            queue.enqueue(
                web,
                [
                    JobEvent(
                        "notion",
                        "new-page",
                        {},
                        event_id="e-new",
                        debounce_seconds=0.0,
                        max_wait_seconds=60.0,
                        workspace_id=a,
                    )
                ],
            )
        )
        await waiting_on_a_lock(probe, web.info.backend_pid)
        # the new job's row is written (its page's key taken) before the workspace is asked for
        cur = await probe.execute(  # test-only SQL
            "select count(*) from pg_locks l join pg_stat_activity s on s.pid = l.pid "
            "where l.pid = %s and l.locktype = 'transactionid' and l.granted",
            (web.info.backend_pid,),
        )
        row = await cur.fetchone()
        assert row is not None and row[0] == 1  # it wrote: it holds its xid
        await holder.commit()
        (brief,) = await sent
    assert brief.outcome.value == "created"


async def test_the_claim_never_waits_for_a_lock(pool: AsyncConnectionPool[Any], database_url: str) -> None:
    """Workspace A's row and B's job row are held elsewhere: a claim whose session would fail
    on any lock wait (lock_timeout 1 ms) takes nothing of them and raises nothing."""
    (a, b), jobs = await two_workspaces_with_a_claimed_job_each(pool)
    await queue.release(pool, jobs)  # both pending and due again
    job_b = next(j for j in jobs if j.workspace_id == b)
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as claimer,
    ):
        await holder.execute(LOCK_WORKSPACE, (a,))
        await holder.execute(
            "select id from sync_jobs where id = %s for update",  # test-only
            (job_b.id,),
        )
        await claimer.execute("set lock_timeout = '1ms'")  # test-only
        assert await queue.claim(claimer, "w", limit=8, lease_seconds=60, source_slots={"notion": 8}) == []
        await holder.rollback()
        got = await queue.claim(claimer, "w", limit=8, lease_seconds=60, source_slots={"notion": 8})
    assert sorted(c.job.id for c in got) == sorted(j.id for j in jobs)
