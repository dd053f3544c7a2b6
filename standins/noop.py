"""A source that syncs nothing: ``noop``, for worker tests and benchmarks.

It stands in for a real syncer so the worker's own costs and behaviour (claims, leases,
retries, coalescing) can be measured without any API. It ships in the wheel (unlike
``tests/``) so the benchmarks run from an installed package too. Register it in a worker
process with ``registry.register("noop", lambda settings: NoopSyncer())``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from debounce.contract import SyncContext, SyncResult
from debounce.documents.store import DocumentStore
from debounce.types import SyncJob

__all__ = ["NoopSyncer", "Recorder"]

#: Called at the start of each sync with the store and the job; returns how many earlier syncs
#: of the same job it had recorded (0 on the first).
Recorder = Callable[[DocumentStore, SyncJob], Awaitable[int]]


class NoopSyncer:
    """The ``noop`` source: every sync succeeds with ``SyncResult(written=1)``.

    ``record``: if given, called first with the sync context's store (the worker's
    :class:`~debounce.documents.store.DocumentStore`) and the job, e.g. to log the call in a table.
    ``{"sleep": s}`` in the job's payload makes the sync sleep ``s`` seconds (a slow sync);
    with ``sleep_first_only`` only on the job's first recorded sync (so a job a killed worker
    left behind completes quickly elsewhere).
    It takes no webhooks (``noop`` jobs are enqueued directly).
    """

    source_type = "noop"

    def __init__(
        self,
        *,
        record: Recorder | None = None,
        sleep_first_only: bool = False,
    ) -> None:
        self.record = record
        self.sleep_first_only = sleep_first_only

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        """Record the call (if configured), sleep as the payload asks, report one write."""
        earlier = 0
        if self.record is not None:
            assert isinstance(context.store, DocumentStore)
            earlier = await self.record(context.store, job)
        sleep = float(job.payload.get("sleep", 0) or 0)
        if sleep and (earlier == 0 or not self.sleep_first_only):
            await asyncio.sleep(sleep)
        return SyncResult(written=1)

    async def aclose(self) -> None:
        """Nothing to release."""
        return None
