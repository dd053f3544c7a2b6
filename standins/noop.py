"""A source that syncs nothing: ``noop``, for worker tests and benchmarks.

It stands in for a real integration so the worker's own costs and behaviour (claims, leases,
retries, coalescing) can be measured without any API. It ships in the wheel (unlike
``tests/``) so the benchmarks run from an installed package too. Register it in a worker
process with ``integrations.register("noop", lambda settings, store: NoopIntegration(store))``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from debounce.documents import DocumentStore
from debounce.types import SyncJob
from integrations.base import SyncResult

__all__ = ["NoopIntegration", "Recorder"]

#: Called at the start of each sync with the store and the job; returns how many earlier syncs
#: of the same job it had recorded (0 on the first).
Recorder = Callable[[DocumentStore, SyncJob], Awaitable[int]]


class NoopIntegration:
    """The ``noop`` source: every sync succeeds with ``SyncResult(written=1)``.

    ``record``: if given, called first with the store (which must then not be ``None``) and
    the job, e.g. to log the call in a table. ``{"sleep": s}`` in the job's payload makes the
    sync sleep ``s`` seconds (a slow sync); with ``sleep_first_only`` only on the job's first
    recorded sync (so a job a killed worker left behind completes quickly elsewhere).
    Webhooks are not supported (``parse_webhook`` raises ``NotImplementedError``).
    """

    source_type = "noop"

    def __init__(
        self,
        store: DocumentStore | None,
        *,
        record: Recorder | None = None,
        sleep_first_only: bool = False,
    ) -> None:
        self.store = store
        self.record = record
        self.sleep_first_only = sleep_first_only

    def parse_webhook(self, headers: Any, body: bytes) -> Any:
        """Not supported: ``noop`` jobs are enqueued directly."""
        raise NotImplementedError

    async def sync(self, job: SyncJob) -> SyncResult:
        """Record the call (if configured), sleep as the payload asks, report one write."""
        earlier = 0
        if self.record is not None:
            assert self.store is not None
            earlier = await self.record(self.store, job)
        sleep = float(job.payload.get("sleep", 0) or 0)
        if sleep and (earlier == 0 or not self.sleep_first_only):
            await asyncio.sleep(sleep)
        return SyncResult(written=1)

    async def aclose(self) -> None:
        """Nothing to release."""
        return None
