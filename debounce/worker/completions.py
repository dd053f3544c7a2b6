"""The flush buffer of one worker process: the outcomes of its syncs (completions, failures)
and the renewals of its leases, buffered and written as ONE statement (``queue.settle``) a few
milliseconds after the first of them, or at once when ``max_outcomes`` are waiting, whichever
comes first; a lease renewal is written at once (with whatever is buffered). The line
moves once per flush.

What it guarantees:

- **One outcome per job, written at most once.** Every outcome carries its claim's lease
  token, and the statement changes only the rows whose token still matches (the lease fence):
  an outcome whose lease was lost meanwhile changes nothing (answered ``None``), and an
  outcome written twice (a flush retried after a commit whose answer was lost) matches nothing
  the second time. A renewal buffered for a job whose outcome arrives is dropped (answered
  ``None``: the outcome ends the lease).
- **A failed flush is retried, never half applied.** One statement is one transaction: a
  flush that fails changed nothing. While the database is unavailable
  (:func:`~debounce.infra.db.is_transient`) the same outcomes are flushed again with backoff;
  a flush refused for another reason is split, each outcome flushed on its own, so only the
  one that cannot be stored fails (its caller gets the exception). Meanwhile each job keeps
  its lease; if the wait outlasts it, the reaper returns the job and the late outcome is
  fenced off.
- **A crash loses at most the unflushed outcomes** (at most ``delay`` seconds' or
  ``max_outcomes`` worth, plus a flush in flight): their jobs are still ``processing`` and come
  back through their leases (``queue.requeue_expired``), to be synced again. A sync is
  idempotent (docs/claim.md, "Outcomes in batches"), so the cost is one sync more per lost
  outcome, and a document written by the lost sync is written again with the same content.

Callers await their own answer: ``complete`` / ``fail`` return the job's row after the change
(``None``: the claim was no longer held); ``renew`` returns the rows of the leases renewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.infra.db import is_transient
from debounce.infra.retry import Backoff
from debounce.types import SyncJob
from debounce.worker.errors import log_db_error

__all__ = ["FLUSH_DELAY_SECONDS", "Completions"]

log = logging.getLogger("debounce.worker")

#: How long the first buffered outcome waits for others before its flush, seconds.
FLUSH_DELAY_SECONDS = 0.005


def _claim(job: SyncJob) -> tuple[int, str | None]:
    return job.id, job.lease_token


@dataclass
class _Entry:
    """One buffered outcome: a completion (``failure`` and ``renewal`` unset), a failure or a
    renewal of ``job``'s lease, with the future its caller awaits."""

    job: SyncJob
    future: asyncio.Future[SyncJob | None] = field(repr=False)
    failure: queue.Failure | None = None
    renewal: bool = False


class Completions:
    """The flush buffer (see the module docstring).

    ``pool``: autocommit connections; ``lease_seconds``: the lease a renewal grants;
    ``delay`` (seconds, ``DEBOUNCE_WORKER_FLUSH_SECONDS``) and ``max_outcomes``: a flush runs
    ``delay`` after the first buffered outcome, as soon as ``max_outcomes`` are buffered, or at
    once for a renewal. One flush runs at a time (one
    connection); what arrives meanwhile goes into the next.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        lease_seconds: float,
        delay: float = FLUSH_DELAY_SECONDS,
        max_outcomes: int = 64,
    ) -> None:
        self.pool = pool
        self.lease_seconds = lease_seconds
        self.delay = delay
        self.max_outcomes = max(1, max_outcomes)
        #: Buffered outcomes by claim (job id, lease token), in arrival order.
        self._buffer: dict[tuple[int, str | None], _Entry] = {}
        self._waiting = asyncio.Event()
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Statements run (for the worker's figures).
        self.flushes = 0

    def start(self) -> None:
        """Start the flusher (inside a running event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._flush_loop(), name="completions-flusher")

    async def stop(self) -> None:
        """Flush what is buffered (once: a failure leaves those jobs to their leases), then
        stop; callers still waiting get ``CancelledError``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        entries = self._take(len(self._buffer))
        if entries:
            try:
                self._answer(entries, await self._statement(entries))
            except Exception as exc:
                log_db_error(f"recording {len(entries)} outcomes at shutdown (their leases will expire)", exc)
        for entry in entries:
            if not entry.future.done():
                entry.future.cancel()

    async def complete(self, job: SyncJob) -> SyncJob | None:
        """Record a successful sync (``queue.settle``'s rule for a completion)."""
        return await self._submit(_Entry(job, self._future()))

    async def fail(self, failure: queue.Failure) -> SyncJob | None:
        """Record a failed sync (``queue.Failure``)."""
        return await self._submit(_Entry(failure.job, self._future(), failure=failure))

    async def renew(self, jobs: Sequence[SyncJob]) -> dict[int, SyncJob]:
        """Extend the leases of running syncs to ``now + lease_seconds``; returns the rows of
        those still held (a job missing has lost its lease, or its outcome came first)."""
        if self._task is None:  # not started: one statement
            return await queue.settle(self.pool, renewed=jobs, lease_seconds=self.lease_seconds)
        entries = [_Entry(j, self._future(), renewal=True) for j in jobs if _claim(j) not in self._buffer]
        rows = await asyncio.gather(*(self._submit(e) for e in entries))
        return {e.job.id: row for e, row in zip(entries, rows, strict=True) if row is not None}

    # --- inside ---------------------------------------------------------------------------------

    @staticmethod
    def _future() -> asyncio.Future[SyncJob | None]:
        return asyncio.get_running_loop().create_future()

    async def _submit(self, entry: _Entry) -> SyncJob | None:
        if self._task is None:  # not started: one statement for this outcome alone
            return (await self._statement([entry])).get(entry.job.id)
        earlier = self._buffer.pop(_claim(entry.job), None)
        if earlier is not None and not earlier.future.done():
            earlier.future.set_result(None)  # a renewal the outcome makes moot
        self._buffer[_claim(entry.job)] = entry
        self._waiting.set()
        if entry.renewal or len(self._buffer) >= self.max_outcomes:
            self._full.set()  # a lease is time-critical: flush now, outcomes included
        return await entry.future

    def _take(self, n: int) -> list[_Entry]:
        claims = list(self._buffer)[:n]
        return [self._buffer.pop(c) for c in claims]

    async def _flush_loop(self) -> None:
        while True:
            await self._waiting.wait()
            if len(self._buffer) < self.max_outcomes:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.delay)
            entries = self._take(self.max_outcomes)
            if len(self._buffer) < self.max_outcomes:
                self._full.clear()
            if not self._buffer:
                self._waiting.clear()
            if entries:
                await self._flush(entries)

    async def _flush(self, entries: list[_Entry]) -> None:
        """Store ``entries`` (retried while the database is away; split when refused) and
        answer their callers."""
        backoff = Backoff(cap=10.0)
        while True:
            try:
                rows = await self._statement(entries)
            except Exception as exc:
                if is_transient(exc):
                    delay = backoff.next()
                    log_db_error(f"recording {len(entries)} outcomes", exc, delay)
                    await asyncio.sleep(delay)
                    continue
                if len(entries) > 1:
                    log.warning(
                        "a flush of %d outcomes failed (%s); flushing each on its own",
                        len(entries),
                        exc.__class__.__name__,
                    )
                    for entry in entries:
                        await self._flush([entry])
                    return
                if not entries[0].future.done():
                    entries[0].future.set_exception(exc)
                return
            self._answer(entries, rows)
            return

    async def _statement(self, entries: list[_Entry]) -> dict[int, SyncJob]:
        self.flushes += 1
        return await queue.settle(
            self.pool,
            completed=[e.job for e in entries if e.failure is None and not e.renewal],
            failed=[e.failure for e in entries if e.failure is not None],
            renewed=[e.job for e in entries if e.renewal],
            lease_seconds=self.lease_seconds,
        )

    @staticmethod
    def _answer(entries: list[_Entry], rows: dict[int, SyncJob]) -> None:
        for entry in entries:
            if not entry.future.done():
                entry.future.set_result(rows.get(entry.job.id))
