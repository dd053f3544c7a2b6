"""Recording the outcome of syncs: completions and failures, each batched into one statement
(``queue.complete_many``, ``queue.fail_many``) by the shared :class:`~debounce.infra.batcher.Batcher`,
and retried while the database is away (the job keeps its lease meanwhile; its sync slot is
free for the next claim); and the words of the worker's log lines for a claim and a sync
(:func:`claimed_text`, :func:`written_text`)."""

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

__all__ = ["Outcomes", "claimed_text", "written_text"]

T = TypeVar("T")


def _until_stored(
    what: str,
    statement: Callable[[list[T]], Awaitable[dict[int, SyncJob]]],
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
            flushers=flushers,
            name="completions",
        )
        self.failures: Batcher[queue.Failure, SyncJob | None] = Batcher(
            _until_stored("failures", fail_many, lambda failure: failure.job),
            flushers=flushers,
            name="failures",
        )

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


def written_text(wrote: list[tuple[str, str, str]]) -> str:
    """The documents a sync wrote, for its log line: ``: 'Title' (notion/<id>)``, the first
    two and how many more."""
    if not wrote:
        return ""
    shown = ", ".join(f"{title!r} ({source}/{document_id})" for source, document_id, title in wrote[:2])
    return f": {shown}" + (f" and {len(wrote) - 2} more" if len(wrote) > 2 else "")


def claimed_text(job: SyncJob) -> str:
    """A claimed job for the claim's log line: its id, page, and why it was due (its events'
    debounce window ended; a bulk job of a backfill or a re-check has no events)."""
    why = (
        f"{job.event_count} event{'s' * (job.event_count != 1)}, its window ended"
        if job.event_count
        else "bulk"
        if job.priority < 0
        else "due"
    )
    if job.attempts > 1:
        why += f", attempt {job.attempts}"
    return f"job {job.id} ({job.source_type} {job.source_page_id}: {why})"
