"""Waking idle workers after an enqueue: ``NOTIFY debounce_jobs`` sent by the application,
after the batch's commit, never from inside the enqueue statement.

A NOTIFY takes a global lock at commit, so a notification inside the web's enqueue made
concurrent enqueue transactions commit one at a time while they held their row locks. Now the
enqueue only answers due times; :func:`due_sources` picks the sources with a job due within
``notify_within`` seconds, and :func:`wake` sends one notification per source in a statement
of its own. The web sends through a :class:`Waker`, which debounces across batches: at most one
notification per source per ``interval`` (:data:`WAKE_INTERVAL_SECONDS`).

What this guarantees: a notification is sent only after the commit of the jobs it announces,
so a woken worker's claim sees them. What it does not: a process that dies between the commit
and the notification (or whose notification fails) loses it; the job then starts at the
workers' next poll (``DEBOUNCE_POLL_INTERVAL_SECONDS``) instead of at its due time — a delay,
never a lost job (docs/design.md, "NOTIFY").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from debounce.infra.db import Db, fetch_one
from debounce.infra.sql import queries
from debounce.types import EnqueueBrief, EnqueueOutcome, JobEvent

__all__ = ["WAKE_INTERVAL_SECONDS", "Waker", "due_sources", "wake"]

log = logging.getLogger("debounce.queue")

_Q = queries("queue")

#: The web's debounce of notifications, per source (seconds). A woken worker spends about one
#: claim round trip (1.5–3 ms measured, docs/claim.md) before it reads the queue again, so a
#: second notification sooner than that wakes a worker that is already awake; 5 ms caps a busy
#: web at 200 notifications per source per second (from thousands of batches) and adds at most
#: 5 ms to the wake-up of a job announced just after another (goal: p99 <= 100 ms).
WAKE_INTERVAL_SECONDS = 0.005

_WAKING = (EnqueueOutcome.CREATED, EnqueueOutcome.DEBOUNCED)


def due_sources(
    events: Sequence[JobEvent],
    briefs: Sequence[EnqueueBrief],
    *,
    within: float,
    now: datetime | None = None,
) -> list[str]:
    """The sources (sorted, each once) of ``events`` whose pending job is due within ``within``
    seconds of ``now`` (default: the current time, UTC), from ``briefs`` (``queue.enqueue``'s
    answer, in the same order). A duplicate, a removed workspace's event and a job in flight
    (its follow-up waits for the running sync) wake nobody."""
    limit = (now or datetime.now(UTC)) + timedelta(seconds=within)
    return sorted(
        {
            event.source_type
            for event, brief in zip(events, briefs, strict=True)
            if brief.outcome in _WAKING and brief.scheduled_at is not None and brief.scheduled_at <= limit
        }
    )


async def wake(db: Db, sources: Sequence[str]) -> int:
    """Send one notification on ``debounce_jobs`` per source of ``sources`` (no statement when
    empty); returns how many. On a pool or an autocommit connection the notifications are
    delivered at once; inside a caller's transaction, at its commit.

    Raises:
        psycopg.Error: the statement failed (the database is unavailable).
    """
    if not sources:
        return 0
    row = await fetch_one(db, _Q["wake"], {"sources": list(sources)})
    return int(row["sent"]) if row is not None else 0


class Waker:
    """Sends :func:`wake` for the sources it is asked to, at most one notification per source
    per ``interval`` seconds: the first request of a source is sent at once; requests of the
    same source within ``interval`` of its last notification are held and sent together at its
    end (a batch committed after a worker was woken still wakes it). A failed notification is
    logged and dropped (the workers' poll is the backstop). Use inside a running event loop;
    :meth:`stop` sends what is held."""

    def __init__(self, db: Db, *, interval: float = WAKE_INTERVAL_SECONDS) -> None:
        self.db = db
        self.interval = interval
        self._held: set[str] = set()
        self._last: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._sleeping = False

    def request(self, sources: Iterable[str]) -> None:
        """Ask for ``sources`` to be notified (after the commit of their jobs); returns at once."""
        self._held.update(sources)
        if self._held and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._send_loop(), name="waker")

    async def stop(self) -> None:
        """Send the held notifications now (the interval not waited for) and return after."""
        self._stopping = True
        task = self._task
        if task is not None and not task.done():
            if self._sleeping:  # nothing in flight: the held sources are sent below
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._held:
            held = sorted(self._held)
            self._held.clear()
            await self._send(held)

    async def _send_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._held and not self._stopping:
            now = loop.time()
            ready = sorted(s for s in self._held if now - self._last.get(s, -math.inf) >= self.interval)
            if not ready:
                self._sleeping = True
                try:
                    await asyncio.sleep(min(self._last[s] for s in self._held) + self.interval - now)
                finally:
                    self._sleeping = False
                continue
            self._held.difference_update(ready)
            for source in ready:
                self._last[source] = now
            await self._send(ready)

    async def _send(self, sources: list[str]) -> None:
        try:
            await wake(self.db, sources)
        except Exception as exc:  # the poll interval is the backstop: never fail a webhook
            log.warning(
                "could not wake the workers for %s (%s): they find the jobs at their next poll",
                ", ".join(sources),
                exc.__class__.__name__,
            )
