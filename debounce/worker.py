"""The worker: claims due jobs and runs their integration's ``sync``.

One asyncio process (``debounce worker``, the Procfile's ``worker``) that

- claims due jobs (``queue.claim``, ``FOR UPDATE SKIP LOCKED``) and runs up to
  ``DEBOUNCE_WORKER_CONCURRENCY`` syncs at once, at most ``worker_source_concurrency`` of one
  source (default: three quarters of the slots), and none of a source that just answered 429
  until its ``Retry-After`` passed — one source's backlog or rate limit cannot starve another;
- sleeps until the earliest pending ``scheduled_at`` (bounded by ``poll_interval_seconds``) and
  wakes at once on ``LISTEN debounce_jobs`` (jobs that become due *now*: manual re-syncs,
  retries due now, released jobs) and whenever a slot frees;
- extends the lease of every running sync every ``lease_seconds / 3`` and periodically returns
  expired leases of dead workers (``queue.requeue_expired``);
- maps what ``sync`` raises: ``RateLimited`` → rescheduled at ``Retry-After`` without spending an
  attempt; ``PermanentError`` → failed at once; anything else → retried with backoff, the
  exception's type and message in ``last_error``;
- on SIGTERM/SIGINT stops claiming, lets running syncs finish within
  ``shutdown_grace_seconds`` (25 s, inside Heroku's 30 s), releases the rest untouched and
  returns;
- survives the database going away: logs, backs off, and goes on once the pool reconnects.

Several worker processes against one database are safe: that is how it scales out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.config import Settings
from debounce.db import is_transient
from debounce.documents import LeaseLost, claim_fence
from debounce.retry import Backoff
from debounce.types import SyncJob
from integrations.base import Integration, PermanentError, RateLimited

__all__ = ["Worker", "default_worker_id"]

log = logging.getLogger("debounce.worker")


def _log_db_error(what: str, exc: Exception, delay: float | None = None, **extra: Any) -> None:
    """One line for a database that is away (read-only, down, restarting); a traceback for
    anything else, which is a bug but must not kill the loop either."""
    retry = f"; retrying in {delay:.1f} s" if delay is not None else ""
    if is_transient(exc):
        log.warning("database unavailable: %s (%s: %s)%s", what, exc.__class__.__name__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else "", retry, extra=extra)
    else:
        log.error("unexpected error: %s%s", what, retry, exc_info=exc, extra=extra)


def default_worker_id() -> str:
    """``host:pid:random`` — unique per process, readable in ``locked_by``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """The claim loop of one process.

    ``pool``: an open ``AsyncConnectionPool`` (autocommit connections); ``sources``: the
    integrations by source type (with a document store); ``conninfo``: the database URL used
    for the ``LISTEN`` connection (default: the pool's).
    """

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[Any],
        sources: Mapping[str, Integration],
        *,
        worker_id: str | None = None,
        conninfo: str | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.sources = dict(sources)
        self.worker_id = worker_id or default_worker_id()
        if conninfo is None:
            if not isinstance(pool.conninfo, str):
                raise ValueError("pass conninfo: the pool's conninfo is not a string")
            conninfo = pool.conninfo
        self.conninfo: str = conninfo
        self.concurrency = max(1, settings.worker_concurrency)
        self.source_limit = settings.worker_source_concurrency or max(
            1, self.concurrency - self.concurrency // 4
        )
        self.running: dict[int, SyncJob] = {}
        #: Jobs whose sync returned and whose outcome is being recorded: their lease is given
        #: up by the recording statement itself, so its absence is no loss.
        self._finishing: set[int] = set()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._paused_until: dict[str, float] = {}
        self._stopping = asyncio.Event()
        #: Claim again only once this many slots are free (or nothing runs): claims in batches.
        self.claim_batch = max(1, self.concurrency // 4)
        self._completions: list[tuple[SyncJob, asyncio.Future[SyncJob | None]]] = []
        self._completion_wake = asyncio.Event()
        self.completed = 0
        self.failed = 0

    # --- public -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to stop claiming and shut down (signal handlers call this)."""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; then drain within the grace period, release the rest."""
        log.info("worker %s started (concurrency %d, per source %d)", self.worker_id,
                 self.concurrency, self.source_limit)
        helpers = [
            asyncio.create_task(self._listen(), name="listen"),
            asyncio.create_task(self._lease_keeper(), name="lease-keeper"),
            asyncio.create_task(self._reaper(), name="reaper"),
            asyncio.create_task(self._completion_flusher(), name="completions"),
        ]
        try:
            await self._claim_loop()
        finally:
            await self._drain()
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            log.info("worker %s stopped (%d completed, %d failed)", self.worker_id,
                     self.completed, self.failed)

    # --- the claim loop -----------------------------------------------------------------------

    def _eligible(self) -> list[tuple[str, int]]:
        """Sources we may claim for now, with how many slots each may take."""
        free = self.concurrency - len(self.running)
        if free <= 0:
            return []
        now = time.monotonic()
        per_source = Counter(j.source_type for j in self.running.values())
        out = []
        for source in self.sources:
            if self._paused_until.get(source, 0.0) > now:
                continue
            room = min(free, self.source_limit - per_source[source])
            if room > 0:
                out.append((source, room))
        return out

    async def _claim_loop(self) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            self._wake.clear()
            claimed_any = False
            try:
                eligible = self._eligible()
                free = self.concurrency - len(self.running)
                if eligible and (free >= self.claim_batch or not self.running):
                    jobs = await queue.claim(
                        self.pool,
                        self.worker_id,
                        limit=free,
                        lease_seconds=self.settings.lease_seconds,
                        source_limits=dict(eligible),
                    )
                    for job in jobs:
                        self._start(job)
                    claimed_any = bool(jobs)
                if claimed_any:
                    backoff.reset()
                    continue  # look again at once: more may be due
                delay = self.settings.poll_interval_seconds
                if eligible:
                    until = await queue.seconds_until_due(self.pool, [s for s, _ in eligible])
                    if until is not None:
                        delay = min(delay, max(until, 0.0) + 0.001)
                now = time.monotonic()
                pauses = [t - now for t in self._paused_until.values() if t > now]
                if pauses:  # a rate-limited source becomes claimable again
                    delay = min(delay, min(pauses) + 0.001)
                # With every slot busy, a finishing sync sets _wake.
                backoff.reset()
            except Exception as exc:
                delay = backoff.next()
                _log_db_error("claiming jobs", exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(delay, 0.0))

    def _start(self, job: SyncJob) -> None:
        self.running[job.id] = job
        log.debug("claimed (attempt %d, revision %d, %d events)", job.attempts,
                 job.claimed_revision or 0, job.event_count, extra=job.log_fields())
        task = asyncio.create_task(self._run_job(job), name=f"sync-{job.id}")
        self._tasks[job.id] = task

    async def _run_job(self, job: SyncJob) -> None:
        integration = self.sources.get(job.source_type)
        started = time.monotonic()
        try:
            if integration is None:
                raise PermanentError(f"no integration for source {job.source_type!r}")
            with claim_fence(job):
                result = await integration.sync(job)
        except asyncio.CancelledError:
            raise  # shutdown: _drain releases the job
        except LeaseLost as exc:
            # Stalled past the lease; another worker holds the job now and syncs the page.
            log.warning("lease lost during the sync, nothing written (%s)", exc,
                        extra=job.log_fields())
        except RateLimited as exc:
            self._paused_until[job.source_type] = time.monotonic() + exc.retry_after
            log.warning("rate limited; retry in %.0f s", exc.retry_after, extra=job.log_fields())
            await self._record_failure(job, str(exc), retry_after=exc.retry_after)
        except PermanentError as exc:
            self.failed += 1
            log.error("permanent failure: %s", exc, extra=job.log_fields())
            await self._record_failure(job, f"PermanentError: {exc}", permanent=True)
        except Exception as exc:
            log.warning("sync failed: %s: %s", exc.__class__.__name__, exc, extra=job.log_fields())
            await self._record_failure(job, f"{exc.__class__.__name__}: {exc}")
        else:
            self.completed += 1
            log.info("synced in %.2f s (%d written, %d unchanged, %d deleted)",
                     time.monotonic() - started, result.written, result.unchanged, result.deleted,
                     extra=job.log_fields())
            await self._complete(job)
        finally:
            if not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                self.running.pop(job.id, None)
                self._tasks.pop(job.id, None)
                self._finishing.discard(job.id)
                self._wake.set()

    async def _complete(self, job: SyncJob) -> None:
        """Hand a finished sync to the completion flusher and wait until it is recorded (the
        job keeps its slot and its lease meanwhile)."""
        self._finishing.add(job.id)
        fut: asyncio.Future[SyncJob | None] = asyncio.get_running_loop().create_future()
        self._completions.append((job, fut))
        self._completion_wake.set()
        row = await fut
        if row is None:
            log.warning("lease lost before the outcome was recorded", extra=job.log_fields())
        elif row.status.value != "completed":
            log.info("edited during the sync: follow-up due %s", row.scheduled_at.isoformat(),
                     extra=job.log_fields())

    async def _completion_flusher(self) -> None:
        """Record finished syncs in batches: one ``complete_many`` statement for everything
        that finished while the previous one ran; retried while the database is away."""
        while True:
            if not self._completions:
                self._completion_wake.clear()
                await self._completion_wake.wait()
                continue
            batch, self._completions = self._completions[:500], self._completions[500:]
            backoff = Backoff(cap=10.0)
            while True:
                try:
                    rows = await queue.complete_many(self.pool, [job for job, _ in batch])
                    break
                except Exception as exc:
                    delay = backoff.next()
                    _log_db_error(f"recording {len(batch)} completions", exc, delay)
                    await asyncio.sleep(delay)
            for job, fut in batch:
                if not fut.done():
                    fut.set_result(rows.get(job.id))

    async def _record_failure(
        self,
        job: SyncJob,
        error: str,
        *,
        retry_after: float | None = None,
        permanent: bool = False,
    ) -> None:
        """Write a failed sync's outcome, retrying while the database is away (the lease keeps
        the job ours meanwhile; if it runs out, another worker redoes the sync)."""
        self._finishing.add(job.id)
        backoff = Backoff(cap=10.0)
        for _ in range(8):
            try:
                row = await queue.fail(
                    self.pool, job, error, retry_after=retry_after, permanent=permanent,
                    backoff_seconds=self.settings.backoff_seconds,
                )
                if row is None:
                    log.warning("lease lost before the outcome was recorded", extra=job.log_fields())
                else:
                    log.info("now %s (due %s)", row.status.value, row.scheduled_at.isoformat(),
                             extra=job.log_fields())
                return
            except Exception as exc:
                delay = backoff.next()
                _log_db_error("recording the outcome", exc, delay, **job.log_fields())
                await asyncio.sleep(delay)
        log.error("gave up recording the outcome; the lease will expire", extra=job.log_fields())

    # --- helpers ------------------------------------------------------------------------------

    async def _listen(self) -> None:
        """LISTEN for jobs that become due now; reconnects with backoff. A missed notification
        only costs the poll interval (the timer on the earliest ``scheduled_at`` is the
        backstop)."""
        backoff = Backoff()
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True
                ) as conn:
                    await conn.execute(f"listen {queue.NOTIFY_CHANNEL}")  # constant name
                    backoff.reset()
                    self._wake.set()  # we may have missed some while disconnected
                    async for _ in conn.notifies():
                        self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next()
                _log_db_error("LISTEN connection lost", exc, delay)
                await asyncio.sleep(delay)

    async def _lease_keeper(self) -> None:
        interval = max(self.settings.lease_seconds / 3.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.renew_leases()
            except Exception as exc:
                _log_db_error("extending leases", exc)

    async def renew_leases(self) -> list[SyncJob]:
        """Extend the lease of every sync still running; returns (and logs) the ones whose
        claim was lost meanwhile. A job whose outcome is being recorded is no loss: recording
        it clears the lease, which the snapshot taken before may not show (issue 16, case 8).

        Raises:
            psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
        """
        jobs = [j for j in self.running.values() if j.id not in self._finishing]
        if not jobs:
            return []
        kept = await queue.extend_leases(self.pool, jobs, self.settings.lease_seconds)
        lost = [j for j in jobs
                if j.id not in kept and j.id in self.running and j.id not in self._finishing]
        for job in lost:
            log.warning("lease lost while syncing: the job was requeued or re-claimed; this "
                        "sync's writes will be refused", extra=job.log_fields())
        return lost

    async def _reaper(self) -> None:
        interval = max(min(self.settings.lease_seconds / 2.0, 30.0), 0.05)
        while True:
            try:
                for job in await queue.requeue_expired(self.pool):
                    log.warning("expired lease returned: now %s", job.status.value,
                                extra=job.log_fields())
                    self._wake.set()
            except Exception as exc:
                _log_db_error("requeueing expired leases", exc)
            await asyncio.sleep(interval)

    async def _drain(self) -> None:
        """Let running syncs finish within the grace period, then release what is left."""
        if self._tasks:
            log.info("stopping: waiting up to %.0f s for %d running syncs",
                     self.settings.shutdown_grace_seconds, len(self._tasks))
            await asyncio.wait(list(self._tasks.values()),
                               timeout=self.settings.shutdown_grace_seconds)
        leftover = [self.running[i] for i in list(self._tasks) if i in self.running]
        for job_id in list(self._tasks):
            self._tasks[job_id].cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if leftover:
            try:
                released = await queue.release(self.pool, leftover)
                for job in released:
                    log.info("released unfinished sync at shutdown", extra=job.log_fields())
            except Exception as exc:
                _log_db_error(f"releasing {len(leftover)} jobs (their leases will expire)", exc)
        self._tasks.clear()
        self.running.clear()
        self._finishing.clear()
