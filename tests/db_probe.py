"""What tests read of the database beside the product's own queries: one value of a test-only
query, and a session's wait on a lock (polled from ``pg_stat_activity``: no timing assumed)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool


async def scalar(pool: AsyncConnectionPool[Any], sql: str, *args: Any) -> Any:
    """The first column of the first row of ``sql`` (test-only SQL) with ``args``; ``None``
    when there is no row."""
    async with pool.connection() as conn:
        row = await (await conn.execute(sql, args)).fetchone()
        return row[0] if row else None


async def waiting_on_a_lock(
    watcher: psycopg.AsyncConnection[Any], pid: int, task: asyncio.Task[Any] | None = None
) -> None:
    """Until backend ``pid`` waits on a lock; ``task``, the statement expected to wait, must
    not finish first (AssertionError: it did not wait)."""
    while True:
        assert task is None or not task.done(), "it did not wait"
        cur = await watcher.execute(  # test-only SQL
            "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", (pid,)
        )
        row = await cur.fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(0.01)
