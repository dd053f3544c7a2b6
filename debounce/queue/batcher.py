"""The web's enqueue batching: concurrent deliveries' events debounced by one statement
(:func:`debounce.queue.enqueue`), on the shared :class:`~debounce.infra.batcher.Batcher`, and
idle workers woken after each batch's commit, debounced across batches
(:class:`~debounce.queue.wakeups.Waker`)."""

from __future__ import annotations

from debounce.infra.batcher import Batcher
from debounce.infra.db import Db
from debounce.queue.lifecycle import enqueue as enqueue_events
from debounce.queue.wakeups import WAKE_INTERVAL_SECONDS, Waker, due_sources
from debounce.types import EnqueueBrief, JobEvent

__all__ = ["EnqueueBatcher"]


class EnqueueBatcher(Batcher[JobEvent, EnqueueBrief]):
    """The web's batcher: concurrent deliveries' events debounced by one
    :func:`debounce.queue.enqueue` statement (events must be validated before: they are not
    checked again). After a batch committed, each source with a job due within
    ``notify_within`` seconds is handed to the :attr:`waker`, which notifies idle workers at
    most once per source per ``wake_interval`` seconds."""

    def __init__(
        self,
        db: Db,
        *,
        flushers: int = 4,
        max_batch: int = 500,
        notify_within: float = 0.0,
        wake_interval: float = WAKE_INTERVAL_SECONDS,
    ) -> None:
        self.waker = Waker(db, interval=wake_interval)

        async def enqueue(events: list[JobEvent]) -> list[EnqueueBrief]:
            briefs = await enqueue_events(db, events, notify_within=None, validated=True)
            self.waker.request(due_sources(events, briefs, within=notify_within))
            return briefs

        super().__init__(enqueue, flushers=flushers, max_batch=max_batch, name="enqueue")
        self.db = db

    async def stop(self) -> None:
        """Cancel the flushers (pending submissions fail with ``CancelledError``), then send
        the notifications the waker still holds."""
        await super().stop()
        await self.waker.stop()
