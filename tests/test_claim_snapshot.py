"""The claim's snapshot (docs/claim.md, "The steps", step 6): a job committed after the claim
statement began, but before its steps locked it, is claimed whole — marked processing and
returned — never chosen and left pending behind a lane that no longer counts it.

The interleaving is forced, not hoped for, with table locks (every insert into ``sync_jobs``
of a workspace takes a ROW SHARE lock on ``workspaces``: its foreign key's check and the
line's upkeep; the claim's first step takes
one too, after its statement began):

1. an enqueue inserts the job and keeps its transaction open (its ROW SHARE lock held);
2. a second connection asks for ``workspaces`` in EXCLUSIVE mode and waits for the enqueue;
3. the claim statement begins, and its first step queues behind that request;
4. the enqueue commits, the EXCLUSIVE lock is granted and released: the claim goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import one_job
import psycopg
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.infra.secrets import Keyring, new_key
from debounce.types import JobEvent, JobStatus


async def _wait_until_blocked_by(
    watcher: psycopg.AsyncConnection[Any], pid: int, task: asyncio.Task[Any]
) -> None:
    """Return once a backend waits for a lock of ``pid`` (held or asked for first)."""
    while True:
        row = await (
            await watcher.execute(
                "select count(*) from pg_stat_activity where %s = any(pg_blocking_pids(pid))", (pid,)
            )
        ).fetchone()
        if row and row[0]:
            return
        assert not task.done(), "the statement should wait for the lock"
        await asyncio.sleep(0.01)


async def test_a_job_committed_while_the_claim_statement_runs_is_claimed_whole(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    async with (
        await psycopg.AsyncConnection.connect(database_url) as enqueuer,
        await psycopg.AsyncConnection.connect(database_url) as blocker,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watcher,
    ):
        ws = await workspaces.save(
            pool,
            Keyring(new_key()),
            source_type="notion",
            external_id="W1",
            name="W1",
            credentials={"access_token": "tok-W1"},
        )
        await queue.enqueue(
            enqueuer,
            [
                JobEvent(
                    "notion",
                    "late",
                    {"n": 1},
                    event_id="late-1",
                    debounce_seconds=0.0,
                    max_wait_seconds=60.0,
                    workspace_id=int(ws["id"]),
                )
            ],
        )
        locking = asyncio.create_task(blocker.execute("lock table workspaces in exclusive mode"))
        await _wait_until_blocked_by(watcher, enqueuer.info.backend_pid, locking)
        claiming = asyncio.create_task(
            queue.claim(pool, "w1", limit=4, lease_seconds=60, source_slots={"notion": 4})
        )
        await _wait_until_blocked_by(watcher, blocker.info.backend_pid, claiming)
        await enqueuer.commit()
        await locking
        await blocker.commit()
        claimed = await asyncio.wait_for(claiming, 10)
    assert [c.job.source_page_id for c in claimed] == ["late"]
    job = claimed[0].job
    assert job.status is JobStatus.PROCESSING and job.locked_by == "w1"
    row = await one_job.active_for_page(pool, "notion", "late")
    assert row is not None and row.status is JobStatus.PROCESSING
    assert row.lease_token == job.lease_token
    assert claimed[0].workspace is not None and claimed[0].workspace.external_id == "W1"
