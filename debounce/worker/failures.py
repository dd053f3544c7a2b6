"""What a failed sync means for its job: the one place a worker turns what a sync raised into
the job's next state (:func:`~debounce.worker.verdict.verdict` names the kind; this module
acts on it).

- **budget** (the bucket ran dry mid-sync): pending at its place in line, what was fetched
  kept;
- **credentials** (the token does not decrypt here): pending at its place, the attempt given
  back; the ``Decrypter`` marks the workspace;
- **lease lost**: nothing (another worker holds the job);
- **rate limited** (429): pending after ``Retry-After``, what was fetched kept; the workspace
  blocked for every worker (a job of no workspace: its source paused in this process);
- **revoked** (401): pending, the attempt given back; the workspace marked ``revoked`` (the
  claim skips it);
- **permanent**: failed (a dead letter); a missing scope (``ScopeMissing``) is also recorded on
  the workspace (``missing_scopes``: the dashboard and ``debounce workspaces list`` show it);
- anything else: pending after the backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.contract import Checkpoint, ScopeMissing
from debounce.infra.metrics import WORKER
from debounce.infra.retry import backoff_delay
from debounce.types import SyncJob
from debounce.worker import workspace_state
from debounce.worker.checkpoints import to_keep
from debounce.worker.outcomes import budget_yield_text
from debounce.worker.verdict import VerdictKind, verdict

__all__ = ["Failures", "observe"]

log = logging.getLogger("debounce.worker")

#: Records a failure (the job keeps its lease until it is); ``said``: the caller logged what
#: happens to the job already.
Record = Callable[[queue.Failure, bool], Awaitable[None]]


def observe(job: SyncJob, started: float, outcome: str) -> None:
    """Count a sync's seconds (``started``: ``time.monotonic()``) by source and outcome."""
    WORKER.sync_seconds.labels(job.source_type, outcome).observe(time.monotonic() - started)


class Failures:
    """Acts on failed syncs for one worker: ``pool`` (autocommit) for the workspace's marks,
    ``backoff_seconds`` the retry schedule, ``paused_until`` the worker's per-source pause
    (``time.monotonic()``, shared with its claim), ``record`` how an outcome is recorded.
    ``permanent`` counts the jobs failed for good."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        backoff_seconds: tuple[float, ...],
        paused_until: dict[str, float],
        record: Record,
    ) -> None:
        self.pool = pool
        self.backoff_seconds = backoff_seconds
        self.paused_until = paused_until
        self.record = record
        self.permanent = 0

    async def handle(self, job: SyncJob, started: float, checkpoint: Checkpoint, exc: Exception) -> None:
        """Record what ``exc`` (raised by ``job``'s sync, started at ``started``,
        ``time.monotonic()``) means for the job; ``checkpoint``: what the sync fetched."""
        v = verdict(exc)
        kind = v.kind
        if kind is VerdictKind.BUDGET:
            # The workspace's bucket ran dry mid-sync: hand the slot back, keeping the job's
            # place in line (the claim takes it again when the bucket can pay) and what was
            # fetched (the resumed sync does not pay twice).
            assert v.retry_after is not None
            observe(job, started, kind)
            WORKER.budget_yields.labels(job.source_type).inc()
            # Normal operation, said in one line: the job stays pending at its place in
            # line (its due time, already past, is not news) until the bucket can pay.
            log.info(budget_yield_text(job, v.retry_after, len(checkpoint.responses)), extra=job.log_fields())
            failure = queue.Failure(
                job, v.error, retry_after=v.retry_after, keep_place=True, checkpoint=to_keep(job, checkpoint)
            )
            await self.record(failure, True)
        elif kind is VerdictKind.CREDENTIALS:
            # Its workspace's token does not decrypt here (no key, another key): a
            # configuration problem, said once and marked on the workspace by the
            # ``Decrypter``. The attempt is given back and the job keeps its place;
            # the claim skips the workspace until a worker whose key decrypts it clears the mark.
            observe(job, started, kind)
            await self.record(queue.Failure(job, v.error, retry_after=0, keep_place=True), False)
        elif kind is VerdictKind.LEASE_LOST:
            # Stalled past the lease; another worker holds the job now and syncs the page.
            observe(job, started, kind)
            log.warning("lease lost during the sync, nothing written (%s)", exc, extra=job.log_fields())
        elif kind is VerdictKind.RATE_LIMITED:
            assert v.retry_after is not None and v.reason is not None
            observe(job, started, kind)
            WORKER.rate_limits.labels(job.source_type, v.reason).inc()
            if job.workspace_id is None or not await workspace_state.block(
                self.pool, job.workspace_id, v.retry_after, v.reason
            ):
                # No workspace to block (the source's settings): pause the source here.
                self.paused_until[job.source_type] = time.monotonic() + v.retry_after
            log.warning("rate limited (%s); retry in %.0f s", v.reason, v.retry_after, extra=job.log_fields())
            failure = queue.Failure(
                job, v.error, retry_after=v.retry_after, checkpoint=to_keep(job, checkpoint)
            )
            await self.record(failure, False)
        elif (
            kind is VerdictKind.REVOKED
            and job.workspace_id is not None
            and await workspace_state.revoke(self.pool, job.workspace_id, str(exc))
        ):
            # Parked: pending again, the attempt given back; the claim skips the jobs of a
            # revoked workspace, so nothing retries in a loop, and a re-install resumes it.
            observe(job, started, kind)
            await self.record(queue.Failure(job, v.error, retry_after=0), False)
        elif kind in (VerdictKind.REVOKED, VerdictKind.PERMANENT):
            observe(job, started, VerdictKind.PERMANENT)
            self.permanent += 1
            if isinstance(exc, ScopeMissing) and job.workspace_id is not None:
                await workspace_state.missing_scope(self.pool, job.workspace_id, exc.scope)
            log.error("permanent failure: %s", exc, extra=job.log_fields())
            await self.record(queue.Failure(job, f"PermanentError: {exc}", permanent=True), False)
        else:
            observe(job, started, kind)
            log.warning("sync failed: %s: %s", exc.__class__.__name__, exc, extra=job.log_fields())
            delay = backoff_delay(job.attempts, self.backoff_seconds)
            await self.record(queue.Failure(job, v.error, backoff_seconds=delay), False)
