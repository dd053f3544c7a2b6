"""Self-maintenance and worker metrics (issue 15): the scheduled prune runs on one worker at a
time, and the worker exposes its metrics on ``DEBOUNCE_METRICS_PORT``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import one_job
import psycopg
import pytest
from ports import free_port
from psycopg_pool import AsyncConnectionPool
from test_notion_sync import make_job

from debounce import queue
from debounce.contract import SyncContext
from debounce.documents.store import DocumentStore
from debounce.infra.metrics import WORKER
from debounce.types import JobEvent
from debounce.worker.maintenance import prune_once
from integrations.notion import NotionSettings, NotionSyncer
from standins.notion_api import DEMO_PAGE_ID, FakeNotion
from standins.server import BackgroundServer

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


async def finished_jobs(pool: AsyncConnectionPool[Any], n: int) -> None:
    for i in range(n):
        result = await one_job.enqueue(
            pool,
            "noop",
            f"p{i}",
            payload={},
            event_id=f"e{i}",
            debounce_seconds=0,
            max_wait_seconds=0,
            now=T0,
        )
        assert result.job is not None
    for job in [
        c.job
        for c in await queue.claim(pool, "w", limit=n, lease_seconds=60, source_slots={"noop": n}, now=T0)
    ]:
        await one_job.complete(pool, job, now=T0)


async def test_scheduled_prune_runs_on_one_worker_at_a_time_in_short_batches(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    await finished_jobs(pool, 25)
    later = T0 + timedelta(days=8)
    async with await psycopg.AsyncConnection.connect(database_url) as other:
        # Another worker is pruning: it holds the prune lock in its transaction.
        await other.execute("select pg_advisory_xact_lock(%s)", [queue.PRUNE_LOCK_ID])
        assert await prune_once(pool, 7 * 86400, 3 * 86400, batch=10, now=later) is None
        await other.rollback()
    done = await prune_once(pool, 7 * 86400, 3 * 86400, batch=10, now=later)
    assert done == {"jobs": 25, "events": 25, "changes": 0}
    assert await queue.stats(pool) == {
        "by_source": {},
        "totals": {"pending": 0, "processing": 0, "completed": 0, "failed": 0},
        "oldest_due_age_seconds": 0.0,
        "workers": {"alive": 0, "last_claim_age_seconds": None},
    }


async def test_recent_jobs_are_kept(pool: AsyncConnectionPool[Any]) -> None:
    await finished_jobs(pool, 3)
    assert await prune_once(pool, 7 * 86400, 3 * 86400, now=T0 + timedelta(days=1)) == {
        "jobs": 0,
        "events": 0,
        "changes": 0,
    }


async def test_api_requests_are_counted_at_the_source_client(pool: AsyncConnectionPool[Any]) -> None:
    fake = FakeNotion.demo()
    before = (
        WORKER.registry.get_sample_value("debounce_api_requests_total", {"source": "notion", "status": "200"})
        or 0.0
    )
    with BackgroundServer(fake.app()) as server:
        notion = NotionSyncer(NotionSettings(notion_token=fake.token, notion_base_url=server.url))
        try:
            await notion.sync(make_job(DEMO_PAGE_ID), SyncContext(store=DocumentStore(pool)))
        finally:
            await notion.aclose()
    after = (
        WORKER.registry.get_sample_value("debounce_api_requests_total", {"source": "notion", "status": "200"})
        or 0.0
    )
    assert after - before == sum(fake.calls.values()) > 0  # every request the stand-in saw


@pytest.mark.slow
def test_the_worker_serves_its_metrics(database_url: str, tmp_path: Path) -> None:
    port = free_port()

    async def enqueue() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "create table noop_log (job_id bigint, worker_pid int, "
                "attempts int, at timestamptz default now())"
            )  # the noop log
            await queue.enqueue(conn, [JobEvent("noop", "page-1", {}, "e1", 0, 0)])

    asyncio.run(enqueue())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBOUNCE_")}
    env.update(DATABASE_URL=database_url, DEBOUNCE_METRICS_PORT=str(port))
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "noop_worker.py")],
        env=env,
        stderr=log,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                if 'debounce_sync_lag_seconds_count{source="noop"} 1.0' in text:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(0.2)
        assert 'debounce_jobs_claimed_total{source="noop"} 1.0' in text
        assert 'debounce_sync_seconds_count{outcome="completed",source="noop"} 1.0' in text
        assert "debounce_lease_renewals_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        log.close()
