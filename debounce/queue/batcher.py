"""The web's enqueue batching: concurrent deliveries' events debounced by one statement
(:func:`debounce.queue.enqueue`), on the shared :class:`~debounce.infra.batcher.Batcher`."""

from __future__ import annotations

from debounce.infra.batcher import Batcher
from debounce.infra.db import Db
from debounce.queue.lifecycle import enqueue as enqueue_events
from debounce.types import EnqueueBrief, JobEvent

__all__ = ["EnqueueBatcher"]


class EnqueueBatcher(Batcher[JobEvent, EnqueueBrief]):
    """The web's batcher: concurrent deliveries' events debounced by one
    :func:`debounce.queue.enqueue` statement (events must be validated before: they are not
    checked again); a batch
    with a job due within ``notify_within`` seconds wakes idle workers."""

    def __init__(
        self, db: Db, *, flushers: int = 4, max_batch: int = 500, notify_within: float = 0.0
    ) -> None:
        async def enqueue(events: list[JobEvent]) -> list[EnqueueBrief]:
            return await enqueue_events(db, events, notify_within=notify_within, validated=True)

        super().__init__(enqueue, flushers=flushers, max_batch=max_batch, name="enqueue")
        self.db = db
