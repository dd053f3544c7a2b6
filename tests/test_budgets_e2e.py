"""API budgets end to end (issue 12): worker *processes* syncing through the real SDKs against
the stand-in Notion API, which enforces its own token bucket and counts what it receives; a
sync that runs out of budget mid-page yields and resumes from its checkpoint; a flooded
workspace does not starve a quiet one."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.config import Settings, SourceWindow
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from debounce.worker import Worker
from debounce.workspaces import budgets
from integrations import notion
from standins.notion_api import DEMO_TOKEN, FakeNotion
from standins.server import BackgroundServer


def paragraph(text: str, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "paragraph",
        "paragraph": {"rich_text": [{"type": "text", "text": {"content": text}}]},
    }
    if children:
        block["children"] = children
    return block


@pytest.fixture
def fake() -> Iterator[tuple[FakeNotion, str]]:
    api = FakeNotion.demo()
    with BackgroundServer(api.app()) as server:
        yield api, server.url


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "debounce", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def env_workspace(pool: AsyncConnectionPool[Any]) -> int:
    row = await workspaces.ensure_env_workspace(pool, "notion", DEMO_TOKEN)
    return int(row["id"])


async def documents_of(pool: AsyncConnectionPool[Any]) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("select count(*) from documents")  # test-only SQL
        row = await cur.fetchone()
        return int(row[0]) if row else 0


@pytest.mark.slow
async def test_worker_processes_never_exceed_the_workspace_budget(
    pool: AsyncConnectionPool[Any], database_url: str, fake: tuple[FakeNotion, str]
) -> None:
    """Three worker processes (concurrency 8 each) sync 40 pages of one workspace whose
    debounce budget is 10 requests/s with a burst of 3: every process together stays within
    it, as the stand-in API counts what arrives (no window of its log holds more than the
    budget, up to the scheduling delay between a charge and the request's arrival), and the
    API's own limit (20/s, burst 8) never answers 429."""
    api, url = fake
    api.set_budget(None, per_second=20.0, burst=8.0)
    pages = [api.add_page(title=f"Page {i}", blocks=[paragraph(f"body {i}")]) for i in range(40)]
    ws = await env_workspace(pool)
    await budgets.set_budget(pool, ws, 10 * 60.0, 3.0)
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion", p, {}, event_id=f"e-{p}", debounce_seconds=0, max_wait_seconds=0, workspace_id=ws
            )
            for p in pages
        ],
    )
    api.reset_usage()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "NOTION_TOKEN": DEMO_TOKEN,
        "NOTION_BASE_URL": url,
        "DEBOUNCE_WORKER_CONCURRENCY": "8",
        "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.2",
        "DEBOUNCE_BACKFILL_ON_CONNECT": "false",
        "DEBOUNCE_RECONCILE_INTERVAL_SECONDS": "0",
    }
    env.pop("SLACK_BOT_TOKEN", None)
    workers = [start_worker(env) for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while await documents_of(pool) < 40:
            assert time.monotonic() < deadline, "the pages were not synced"
            assert all(w.poll() is None for w in workers), "a worker died"
            await asyncio.sleep(0.2)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        codes = [w.wait(30) for w in workers]
    assert codes == [0, 0, 0]
    usage = api.usage()
    assert usage.rate_limited == 0, usage.rate_limited_at
    assert usage.requests >= 80  # 2 requests a page (markdown path)
    # The claim charges a sync's requests when it claims the job, and they reach the API up to
    # a scheduling delay later (up to ~0.6 s on 2 loaded cores): windows of the API's log are
    # compared with the budget over the window plus 1 s. Unmetered, the 80 requests arrive
    # within about a second.
    for window in (2.0, 5.0):
        assert usage.max_in_window(window) <= 3 + 10 * (window + 1.0), window


async def test_a_sync_out_of_budget_mid_page_yields_and_resumes_without_paying_twice(
    pool: AsyncConnectionPool[Any], database_url: str, fake: tuple[FakeNotion, str]
) -> None:
    """A page whose block walk costs 5 requests, a bucket of 2 refilled at 2 per second: the
    sync yields its slot twice and resumes from its checkpoint; the stand-in receives each
    request exactly once, and the document is complete."""
    api, url = fake
    api.deny_read_content()  # the block walk: 1 + 4 requests
    page = api.add_page(
        title="Big",
        blocks=[
            paragraph("one", [paragraph("one.a", [paragraph("one.a.i")])]),
            paragraph("two", [paragraph("two.a")]),
        ],
    )
    ws = await env_workspace(pool)
    await budgets.set_budget(pool, ws, 120.0, 2.0)
    settings = Settings(
        database_url=database_url,
        notion_token=DEMO_TOKEN,
        notion_base_url=url,
        poll_interval_seconds=0.05,
        backfill_on_connect=False,
        reconcile_interval_seconds=0,
        windows={"notion": SourceWindow(0, 0)},
    )
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion", page, {}, event_id="e1", debounce_seconds=0, max_wait_seconds=0, workspace_id=ws
            )
        ],
    )
    api.reset_usage()
    syncer = notion.SOURCE.build(settings)
    worker = Worker(settings, pool, {"notion": syncer})
    task = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + 20
        while worker.completed < 1:
            assert time.monotonic() < deadline, "not synced"
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await task
        await syncer.aclose()
    doc = await DocumentStore(pool).get("notion", page)
    assert doc is not None and "one.a.i" in doc["content"] and "two.a" in doc["content"]
    usage = api.usage()
    # Each request of the page once (users.me: the environment workspace learning its id).
    assert usage.by_endpoint["pages.retrieve"] == 1, usage.by_endpoint
    assert usage.by_endpoint["blocks.children.list"] == 4, usage.by_endpoint
    assert usage.rate_limited == 0
    (job,) = (await queue.list_jobs(pool, limit=5)).jobs
    assert job.status.value == "completed" and job.checkpoint is None
