"""Group concurrent submissions into one statement: the web's enqueue batching runs on this
machine (the worker's outcomes have their own flush buffer, ``debounce.worker.completions``).

Each caller submits its items and waits for its own results; a few flusher tasks take whatever
has accumulated while they were busy and run it through one ``flush(items) -> results``
call (one statement, one commit). An idle process flushes a lone submission at once (no
added delay); a busy one amortises the round trip and the commit over many. A caller is
answered only after its batch's statement committed.

One submission cannot fail its neighbours: when a batch fails for a reason other than the
database being unavailable (:func:`debounce.infra.db.is_transient`), each submission of the batch is
flushed on its own, so only the one that cannot be stored fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from debounce.infra.db import is_transient

__all__ = ["Batcher"]

log = logging.getLogger("debounce.batcher")

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """Batches calls of ``flush`` (``items -> one result per item, in order``).

    ``flushers`` calls may be in flight at once (each needs a pool connection); ``max_batch``
    bounds the items of one call; ``name`` appears in logs and task names.
    """

    def __init__(
        self,
        flush: Callable[[list[T]], Awaitable[Sequence[R]]],
        *,
        flushers: int = 4,
        max_batch: int = 500,
        name: str = "batcher",
    ) -> None:
        self.flush = flush
        self.flushers = flushers
        self.max_batch = max_batch
        self.name = name
        self._pending: deque[tuple[Sequence[T], asyncio.Future[list[R]]]] = deque()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the flusher tasks (inside a running event loop)."""
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._flush_loop(), name=f"{self.name}-flusher-{i}")
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

    async def submit(self, items: Sequence[T]) -> list[R]:
        """Run ``items`` through ``flush`` (batched with concurrent submissions) and return
        their results in order.

        Raises whatever ``flush`` raised for this submission's batch (for a batch that failed
        for a non-transient reason: what it raised for this submission alone).
        """
        if not items:
            return []
        if not self._tasks:  # not started (e.g. used outside the app's lifespan)
            return list(await self.flush(list(items)))
        fut: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        self._pending.append((items, fut))
        self._wakeup.set()
        return await fut

    async def _flush_loop(self) -> None:
        while True:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch: list[tuple[Sequence[T], asyncio.Future[list[R]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self.max_batch):
                item = self._pending.popleft()
                batch.append(item)
                size += len(item[0])
            await self._run(batch)

    async def _run(self, batch: list[tuple[Sequence[T], asyncio.Future[list[R]]]]) -> None:
        flat = [item for items, _ in batch for item in items]
        try:
            results = await self.flush(flat)
        except Exception as exc:
            if len(batch) > 1 and not is_transient(exc):
                log.warning(
                    "%s: batch of %d submissions failed (%s); retrying each on its own",
                    self.name,
                    len(batch),
                    exc.__class__.__name__,
                )
                for one in batch:
                    await self._run([one])
                return
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        offset = 0
        for items, fut in batch:
            if not fut.done():
                fut.set_result(list(results[offset : offset + len(items)]))
            offset += len(items)
