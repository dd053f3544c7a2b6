"""Moving the cluster's transaction ids on, for tests of the change log's partitions (migration
028): its ranges are of ``feed_xid``, so a test crosses a partition's bound by using ids."""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg_pool import AsyncConnectionPool


async def newest_bound(pool: AsyncConnectionPool[Any]) -> int:
    """The upper bound (exclusive) of the newest range partition of the change log."""
    async with pool.connection() as conn:
        row = await (await conn.execute("select max(hi)::text from document_change_partitions")).fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


async def advance_past(pool: AsyncConnectionPool[Any], xid: int) -> None:
    """Use transaction ids (one small transaction each) until the next one is above ``xid``
    (other sessions on the shared server use them too: this only ever takes fewer)."""
    async with pool.connection() as conn:
        await conn.set_autocommit(True)
        while True:
            row = await (await conn.execute("select pg_current_xact_id()::text")).fetchone()
            assert row is not None
            if int(row[0]) > xid:
                return


async def closed(pool: AsyncConnectionPool[Any], xid: int) -> None:
    """Wait until every transaction below ``xid`` has ended (the snapshot's ``xmin`` reached
    it): a partition whose range ends there is closed. Another session of the shared server
    may hold ``xmin`` back for a while (as :func:`feed_wait.servable`)."""
    async with pool.connection() as conn:
        await conn.set_autocommit(True)
        for _ in range(1200):
            row = await (
                await conn.execute("select pg_snapshot_xmin(pg_current_snapshot())::text")
            ).fetchone()
            assert row is not None
            if int(row[0]) >= xid:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("a transaction stayed open below the bound for a minute")
