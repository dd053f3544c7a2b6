"""When a worker asks again for a source it set aside: a source found with nothing claimable
is not asked again until its due time (at most a poll interval), a notification or an event
of its own, and the end of a sync of a workspace held at its K is such an event. Real
Postgres; the worker's rounds are driven by hand."""

from __future__ import annotations

import asyncio
from typing import Any

from cryptography.fernet import Fernet
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.config import Settings
from debounce.contract import SyncContext, SyncResult
from debounce.infra.secrets import Keyring
from debounce.types import JobEvent, SyncJob
from debounce.worker import Worker
from standins.noop import NoopSyncer


class Gate(NoopSyncer):
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
        cur = await conn.execute(
            "select status, count(*) from (select * from sync_jobs union all "
            "select * from finished_jobs) j group by status"
        )
        return {str(s): int(n) for s, n in await cur.fetchall()}


async def test_a_workspace_at_its_limit_is_asked_again_when_one_of_its_syncs_ends(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """A claim round that finds a workspace's jobs held (its K syncs in flight) sets the source
    aside; the end of one of those syncs asks again at once, not a poll interval later (a
    backfill of one workspace ran K syncs per poll interval: 122 pages took 60 s)."""
    key = Fernet.generate_key().decode()
    settings = Settings(
        database_url="unused",
        secret_key=key,
        lease_seconds=30,
        poll_interval_seconds=30.0,
        worker_concurrency=4,
        workspace_concurrency=1,
    )
    row = await workspaces.save(
        pool, Keyring(key), source_type="noop", external_id="W", name="W", credentials={"access_token": "t"}
    )
    await queue.enqueue(
        pool, [JobEvent("noop", f"p{i}", {}, f"e{i}", 0, 0, workspace_id=int(row["id"])) for i in range(2)]
    )
    gate = Gate()
    gate.hold = True
    worker = Worker(settings, pool, {"noop": gate}, conninfo=database_url)
    worker.outcomes.start()
    try:
        assert await worker._claim_round() == 0.0  # the workspace's one sync
        assert len(worker.running) == 1
        assert await worker._claim_round() == 30.0  # held at K: nothing due
        assert worker._eligible() == []  # set aside
        gate.open.set()
        await asyncio.wait(list(worker._tasks.values()))  # its outcome is recorded
        assert worker.completed == 1
        assert worker._eligible() == [("noop", 3)]  # asked again at once
        assert await worker._claim_round() == 0.0
        assert len(worker.running) == 1
        await asyncio.wait(list(worker._tasks.values()))
        assert (await statuses(pool)) == {"completed": 2}
    finally:
        await worker.outcomes.stop()
