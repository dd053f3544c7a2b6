"""Benchmark 4 (wake-up latency): an idle worker, jobs becoming due at known times.

- ``timer``: events with a 3 s debounce window (longer than the worker's 2 s poll interval),
  one every 0.1 s on fresh pages: latency = sync start − ``scheduled_at``, both on the
  database clock (``clock_timestamp()`` at the start of the ``noop`` sync).
- ``short_window``: the same with a 0.5 s window (shorter than the poll interval): the events
  are enqueued as the web enqueues them (its ``EnqueueBatcher``, ``notify_within`` = the
  workers' poll interval), so the NOTIFY the web's waker sends after the batch's commit wakes the
  idle worker, which then sleeps exactly until the job is due.
- ``resync``: ``queue.resync`` on fresh pages (due now, NOTIFY): latency = sync start − the
  re-sync's transaction time.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, percentiles, scratch_database, spawn, stop
from bench.worker_proc import CREATE_LOG_TABLE
from debounce import queue
from debounce.queue.batcher import EnqueueBatcher
from debounce.types import JobEvent


async def _latencies(pool: AsyncConnectionPool, prefix: str) -> list[float]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "select extract(epoch from started_at - scheduled_at) * 1000 from bench_syncs "
            "where source_page_id like %s",
            (prefix + "%",),
        )
        return [float(r[0]) for r in await cur.fetchall()]


async def _wait_synced(pool: AsyncConnectionPool, prefix: str, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "select count(*) from bench_syncs where source_page_id like %s", (prefix + "%",)
            )
            if (await cur.fetchone())[0] >= n:  # type: ignore[index]
                return
        await asyncio.sleep(0.1)


async def _scenario(url: str, n: int) -> dict[str, list[float]]:
    pool = AsyncConnectionPool(url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True})
    await pool.open(wait=True)
    out: dict[str, list[float]] = {}
    # as the web enqueues: batched, notify_within = the worker's poll interval
    batcher = EnqueueBatcher(pool, notify_within=2.0)
    batcher.start()
    try:
        await asyncio.sleep(3.0)  # let the worker settle into its idle loop
        for label, window, gap in (("timer", 3.0, 0.1), ("short_window", 0.5, 0.25)):
            for i in range(n):
                await batcher.submit(
                    [
                        JobEvent(
                            source_type="noop",
                            source_page_id=f"{label}-{i}",
                            payload={},
                            event_id=uuid.uuid4().hex,
                            debounce_seconds=window,
                            max_wait_seconds=60.0,
                        )
                    ]
                )
                await asyncio.sleep(gap)
            await _wait_synced(pool, f"{label}-", n, 30)
            out[label] = await _latencies(pool, f"{label}-")
            await asyncio.sleep(2.5)
        for i in range(n):
            await queue.resync(pool, "noop", f"resync-{i}")
            await asyncio.sleep(0.1)
        await _wait_synced(pool, "resync-", n, 30)
        out["resync"] = await _latencies(pool, "resync-")
    finally:
        await batcher.stop()
        await pool.close()
    return out


def run(server_url: str, quick: bool) -> dict[str, Any]:
    n = 30 if quick else 100
    with (
        tempfile.TemporaryDirectory(prefix="bench-wakeup-") as tmp,
        scratch_database(server_url, "wakeup") as url,
    ):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(CREATE_LOG_TABLE)
        note(f"wake-up latency: {n} jobs per case, idle worker")
        worker = spawn(
            [sys.executable, "-m", "bench.worker_proc"],
            env={"DATABASE_URL": url, "BENCH_LOG_SYNCS": "1"},
            log=Path(tmp) / "worker.log",
        )
        try:
            res = asyncio.run(_scenario(url, n))
        finally:
            stop(worker)
    for case, values in res.items():
        p = percentiles(values)
        emit(
            "wakeup_latency",
            case=case,
            jobs=len(values),
            **{f"{k}_ms": v for k, v in p.items()},
            goal_p99_le_100ms=p.get("p99", 1e9) <= 100,
        )
    return res
