"""Waiting in end-to-end tests: for a condition the real worker brings about, and a real worker
running for the length of a test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce.config import Settings
from debounce.worker import Worker


async def until(predicate: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Await ``predicate()`` every 50 ms until it returns something truthy, and return that.

    Raises:
        AssertionError: ``timeout`` seconds passed first.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def e2e_settings(**overrides: Any) -> Settings:
    """The end-to-end tests' worker settings: 5 s leases, 0.2 s polls, 4 sync slots, a 2 s
    shutdown grace; ``overrides`` replace any of them or add others (``Settings`` fields)."""
    fields: dict[str, Any] = {
        "database_url": "unused",
        "lease_seconds": 5,
        "poll_interval_seconds": 0.2,
        "worker_concurrency": 4,
        "shutdown_grace_seconds": 2,
    }
    return Settings(**{**fields, **overrides})


@asynccontextmanager
async def running_worker(
    settings: Settings, pool: AsyncConnectionPool[Any], sources: Mapping[str, Any], database_url: str
) -> AsyncIterator[Worker]:
    """A real :class:`~debounce.worker.Worker` of ``sources`` running (``Worker.run`` in a task)
    until the block ends; then stopped, its shutdown awaited (15 s at most)."""
    worker = Worker(settings, pool, dict(sources), conninfo=database_url)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
