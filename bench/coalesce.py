"""Benchmark 2 (coalescing): bursts of events per page inside the debounce window, drained by
a real worker whose ``noop`` source counts its calls (``bench_syncs``).

Bursts: every page gets ``EVENTS`` events 0.1 s apart (inside a 1 s window), through
``queue.enqueue`` (the web route's statement); the worker syncs; repeat. Ideal: exactly one
sync per page per burst. Then edits during processing: pages whose sync is slow (0.5 s) get one
more event while their sync runs; each must get exactly one follow-up sync, and no event may be
lost (the event counts the syncs saw add up to the events sent).
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

from bench.common import emit, note, scratch_database, spawn, stop
from bench.worker_proc import CREATE_LOG_TABLE
from debounce import queue
from debounce.types import JobEvent

WINDOW = 1.0
EVENTS = 5
BURSTS = 2


def _event(page: str, payload: dict[str, Any] | None = None) -> JobEvent:
    return JobEvent(
        source_type="noop",
        source_page_id=page,
        payload=payload or {},
        event_id=uuid.uuid4().hex,
        debounce_seconds=WINDOW,
        max_wait_seconds=30.0,
    )


async def _wait_idle(pool: AsyncConnectionPool, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "select count(*) from sync_jobs where status in ('pending', 'processing')"
            )
            row = await cur.fetchone()
        if row and row[0] == 0:
            return True
        await asyncio.sleep(0.05)
    return False


async def _scenario(url: str, pages: int, slow_pages: int) -> dict[str, Any]:
    pool = AsyncConnectionPool(url, min_size=2, max_size=4, open=False, kwargs={"autocommit": True})
    await pool.open(wait=True)
    names = [f"page-{i}" for i in range(pages)]
    sent = 0
    try:
        for burst in range(BURSTS):
            for _ in range(EVENTS):
                for start in range(0, pages, 250):
                    await queue.enqueue(pool, [_event(p) for p in names[start : start + 250]])
                sent += pages
                await asyncio.sleep(0.1)
            if not await _wait_idle(pool, 60):
                raise RuntimeError(f"burst {burst} not drained within 60 s")
        async with pool.connection() as conn:
            cur = await conn.execute("select count(*), count(distinct source_page_id) from bench_syncs")
            calls, _distinct = await cur.fetchone()  # type: ignore[misc]
            # every job made: active ones and finished ones (migration 034)
            cur = await conn.execute(
                "select (select count(*) from sync_jobs) + (select count(*) from finished_jobs)"
            )
            jobs = (await cur.fetchone())[0]  # type: ignore[index]
            cur = await conn.execute("select coalesce(sum(event_count), 0) from bench_syncs")
            seen_events = (await cur.fetchone())[0]  # type: ignore[index]
        bursts = {
            "events_in": sent,
            "pages": pages,
            "bursts": BURSTS,
            "events_per_page_per_burst": EVENTS,
            "jobs_created": jobs,
            "integration_calls": calls,
            "calls_per_page_per_burst": round(calls / (pages * BURSTS), 3),
            "events_seen_by_syncs": seen_events,
        }
        # edits during processing
        slow = [f"slow-{i}" for i in range(slow_pages)]
        await queue.enqueue(pool, [_event(p, {"sleep": 0.5}) for p in slow])
        poked: set[str] = set()
        deadline = time.monotonic() + 60
        while len(poked) < len(slow) and time.monotonic() < deadline:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "select source_page_id from sync_jobs where status = 'processing'"
                    " and source_page_id like 'slow-%%'"
                )
                running = [r[0] for r in await cur.fetchall() if r[0] not in poked]
            if running:
                await queue.enqueue(pool, [_event(p, {"sleep": 0}) for p in running])
                poked.update(running)
            await asyncio.sleep(0.02)
        if not await _wait_idle(pool, 60):
            raise RuntimeError("follow-ups not drained within 60 s")
        async with pool.connection() as conn:
            # a follow-up runs on the same row, whose event_count keeps counting: the last
            # sync of a page has seen all its events
            cur = await conn.execute(
                "select coalesce(sum(n), 0), coalesce(sum(e), 0) from ("
                "select count(*) as n, max(event_count) as e from bench_syncs "
                "where source_page_id like 'slow-%%' group by job_id) x"
            )
            slow_calls, slow_events = (int(x) for x in await cur.fetchone())  # type: ignore[union-attr]
            cur = await conn.execute(
                "select count(*) from (select source_page_id from bench_syncs where "
                "source_page_id like 'slow-%%' group by 1 having count(*) <> 2) x"
            )
            wrong = (await cur.fetchone())[0]  # type: ignore[index]
        during = {
            "slow_pages": slow_pages,
            "events_during_processing": len(poked),
            "integration_calls": slow_calls,
            "followup_syncs": slow_calls - slow_pages,
            "pages_without_exactly_one_followup": wrong,
            "events_seen_by_syncs": slow_events,
            "events_in": slow_pages + len(poked),
        }
        return {"bursts": bursts, "during": during}
    finally:
        await pool.close()


def run(server_url: str, quick: bool) -> dict[str, Any]:
    pages = 100 if quick else 1000
    slow_pages = 16 if quick else 48
    with (
        tempfile.TemporaryDirectory(prefix="bench-coalesce-") as tmp,
        scratch_database(server_url, "coalesce") as url,
    ):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(CREATE_LOG_TABLE)
        note(f"coalescing: {pages} pages x {EVENTS} events x {BURSTS} bursts, worker running")
        worker = spawn(
            [sys.executable, "-m", "bench.worker_proc"],
            env={"DATABASE_URL": url, "BENCH_LOG_SYNCS": "1"},
            log=Path(tmp) / "worker.log",
        )
        try:
            res = asyncio.run(_scenario(url, pages, slow_pages))
        finally:
            stop(worker)
    b, d = res["bursts"], res["during"]
    emit(
        "coalescing",
        **b,
        ratio_to_ideal=b["calls_per_page_per_burst"],
        goal_exactly_1=b["calls_per_page_per_burst"] == 1.0 and b["events_seen_by_syncs"] == b["events_in"],
    )
    emit(
        "coalescing_during_processing",
        **d,
        goal_one_followup_per_edited_page=(
            d["followup_syncs"] == d["slow_pages"]
            and d["pages_without_exactly_one_followup"] == 0
            and d["events_seen_by_syncs"] == d["events_in"]
        ),
    )
    return res
