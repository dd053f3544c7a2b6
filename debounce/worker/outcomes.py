"""Recording the outcome of syncs: completions and failures, each batched into one statement
(``queue.complete_many``, ``queue.fail_many``) by the shared :class:`~debounce.infra.batcher.Batcher`,
and retried while the database is away (the job keeps its lease meanwhile; its sync slot is
free for the next claim)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.infra.batcher import Batcher
from debounce.infra.db import is_transient
from debounce.infra.retry import Backoff
from debounce.types import SyncJob
from debounce.worker.errors import log_db_error

__all__ = ["Outcomes"]

T = TypeVar("T")


def _until_stored(
    what: str, statement: Callable[[list[T]], Awaitable[dict[int, SyncJob]]],
    job_of: Callable[[T], SyncJob],
) -> Callable[[list[T]], Awaitable[list[SyncJob | None]]]:
    async def flush(items: list[T]) -> list[SyncJob | None]:
        backoff = Backoff(cap=10.0)
        while True:
            try:
                rows = await statement(items)
                return [rows.get(job_of(item).id) for item in items]
            except Exception as exc:
                if not is_transient(exc):
                    raise
                delay = backoff.next()
                log_db_error(f"recording {len(items)} {what}", exc, delay)
                await asyncio.sleep(delay)

    return flush


class Outcomes:
    """The two batchers of one worker process. ``complete(job)`` and ``fail(failure)`` return
    the job's row after the change, or ``None`` when the claim no longer held the job."""

    def __init__(self, pool: AsyncConnectionPool[Any], *, flushers: int = 1) -> None:
        async def complete_many(jobs: list[SyncJob]) -> dict[int, SyncJob]:
            return await queue.complete_many(pool, jobs)

        async def fail_many(failures: list[queue.Failure]) -> dict[int, SyncJob]:
            return await queue.fail_many(pool, failures)

        self.completions: Batcher[SyncJob, SyncJob | None] = Batcher(
            _until_stored("completions", complete_many, lambda job: job),
            flushers=flushers, name="completions")
        self.failures: Batcher[queue.Failure, SyncJob | None] = Batcher(
            _until_stored("failures", fail_many, lambda failure: failure.job),
            flushers=flushers, name="failures")

    def start(self) -> None:
        """Start both batchers (inside a running event loop)."""
        self.completions.start()
        self.failures.start()

    async def stop(self) -> None:
        """Stop both batchers."""
        await self.completions.stop()
        await self.failures.stop()

    async def complete(self, job: SyncJob) -> SyncJob | None:
        """Record a successful sync (see ``queue.complete_many``)."""
        (row,) = await self.completions.submit([job])
        return row

    async def fail(self, failure: queue.Failure) -> SyncJob | None:
        """Record a failed sync (see ``queue.Failure``)."""
        (row,) = await self.failures.submit([failure])
        return row
