"""Group concurrent webhook deliveries into one ``enqueue_many`` statement.

Each request submits its events and waits for its own results; a few flusher tasks take
whatever has accumulated while they were busy and debounce it in one statement and one commit.
An idle service flushes a lone request at once (no added delay); a busy one amortises the
round trip and the commit over many requests. A request is answered only after its batch
committed, so an acknowledged event is never lost.

One request cannot fail its neighbours: when a batch statement fails for a reason other than
the database being unavailable (:func:`debounce.db.is_transient`), each request of the batch
is retried in a statement of its own, so only the request that cannot be stored fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from debounce import queue
from debounce.db import Db, is_transient
from debounce.types import EnqueueResult, JobEvent

__all__ = ["EnqueueBatcher"]

log = logging.getLogger("debounce.batcher")


class EnqueueBatcher:
    """Batches :func:`debounce.queue.enqueue_many` calls.

    ``flushers`` statements may be in flight at once (each needs a pool connection);
    ``max_batch`` bounds the events of one statement.
    """

    def __init__(self, db: Db, *, flushers: int = 4, max_batch: int = 500) -> None:
        self.db = db
        self.flushers = flushers
        self.max_batch = max_batch
        self._pending: list[tuple[Sequence[JobEvent], asyncio.Future[list[EnqueueResult]]]] = []
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the flusher tasks (inside a running event loop)."""
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._flush_loop(), name=f"enqueue-flusher-{i}")
                for i in range(self.flushers)
            ]

    async def stop(self) -> None:
        """Cancel the flushers; pending submissions fail with ``CancelledError``."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for _, fut in self._pending:
            if not fut.done():
                fut.cancel()
        self._pending.clear()

    async def submit(self, events: Sequence[JobEvent]) -> list[EnqueueResult]:
        """Debounce ``events`` (already validated) and return their results in order.

        Raises whatever the statement raised (``psycopg.OperationalError``,
        ``psycopg_pool.PoolTimeout`` when the database is unavailable).
        """
        if not events:
            return []
        if not self._tasks:  # not started (e.g. used outside the app's lifespan)
            return await queue.enqueue_many(self.db, events)
        fut: asyncio.Future[list[EnqueueResult]] = asyncio.get_running_loop().create_future()
        self._pending.append((events, fut))
        self._wakeup.set()
        return await fut

    async def _flush_loop(self) -> None:
        while True:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch: list[tuple[Sequence[JobEvent], asyncio.Future[list[EnqueueResult]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self.max_batch):
                item = self._pending.pop(0)
                batch.append(item)
                size += len(item[0])
            await self._flush(batch)

    async def _flush(
        self, batch: list[tuple[Sequence[JobEvent], asyncio.Future[list[EnqueueResult]]]]
    ) -> None:
        flat = [e for events, _ in batch for e in events]
        try:
            results = await queue.enqueue_many(self.db, flat)
        except Exception as exc:
            if len(batch) > 1 and not is_transient(exc):
                log.warning("batch of %d requests failed (%s); retrying each on its own",
                            len(batch), exc.__class__.__name__)
                for item in batch:
                    await self._flush([item])
                return
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        offset = 0
        for events, fut in batch:
            if not fut.done():
                fut.set_result(results[offset : offset + len(events)])
            offset += len(events)
