"""The claim loop of one worker process: claims due jobs, runs their syncer's ``sync``
inside the claim fence, maps what it raises to an outcome, and shuts down cleanly."""

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

from psycopg_pool import AsyncConnectionPool

from debounce import queue, registry
from debounce.config import Settings
from debounce.contract import (
    Checkpoint,
    PermanentError,
    ScopeMissing,
    SyncContext,
    Syncer,
)
from debounce.delivery.deliverer import DeliveryRunner, DeliverySettings
from debounce.documents.audiences import AudienceStore
from debounce.documents.deletions import DeletionGuard
from debounce.documents.store import DocumentStore
from debounce.infra.metrics import WORKER
from debounce.infra.retry import Backoff, backoff_delay
from debounce.infra.secrets import Keyring
from debounce.types import ApiBudget, ClaimedWorkspace, SyncJob
from debounce.worker import env_workspaces, heartbeat, key_check, maintenance, workspace_state
from debounce.worker.backfiller import Backfiller
from debounce.worker.checkpoints import resumed, to_keep
from debounce.worker.decrypter import Decrypter
from debounce.worker.env_workspaces import Learner
from debounce.worker.errors import log_db_error
from debounce.worker.files import FileJobs, is_file_job
from debounce.worker.notifier import listen
from debounce.worker.outcomes import Outcomes, claimed_text, written_text
from debounce.worker.verdict import VerdictKind, verdict
from debounce.workspaces.budgets import WorkspaceMeter
from debounce.workspaces.sync_costs import SyncCosts

__all__ = ["MIN_RECHECK_SECONDS", "Worker", "default_worker_id"]

#: Shortest sleep of a worker that found jobs due but could claim none, seconds.
MIN_RECHECK_SECONDS = 0.02

log = logging.getLogger("debounce.worker")


def default_worker_id() -> str:
    """``host:pid:random`` — unique per process, readable in ``locked_by``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """The claim loop of one process (see the package docstring).

    ``pool``: an open ``AsyncConnectionPool`` (autocommit connections); ``syncers``: the
    sources' syncers by source type (``registry.create_all``); each sync gets a
    :class:`~debounce.contract.SyncContext` with the store fenced by its claim, the
    workspace's credentials, its meter and its checkpoint. ``conninfo``: the database URL used
    for the ``LISTEN`` connection (default: the pool's).

    Raises (construction):
        ValueError: no ``conninfo`` given and the pool's is not a string.
        SecretKeyError: ``settings.secret_key`` is malformed.
    """

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[Any],
        syncers: Mapping[str, Syncer],
        *,
        worker_id: str | None = None,
        conninfo: str | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.syncers = dict(syncers)
        self.store = DocumentStore(
            pool,
            guard=DeletionGuard(
                settings.deletion_guard_count,
                settings.deletion_guard_share,
                settings.deletion_guard_window_seconds,
            ),
        )
        #: Files as documents of their own: enqueued after a sync, run as file jobs.
        self.files = FileJobs(settings, pool, self.store)
        self.worker_id = worker_id or default_worker_id()
        if conninfo is None:
            if not isinstance(pool.conninfo, str):
                raise ValueError("pass conninfo: the pool's conninfo is not a string")
            conninfo = pool.conninfo
        self.conninfo: str = conninfo
        self.concurrency = max(1, settings.worker_concurrency)
        self.source_concurrency = settings.worker_source_concurrency or max(
            1, self.concurrency - self.concurrency // 4
        )
        #: Syncs in flight by job id.
        self.running: dict[int, SyncJob] = {}
        #: Jobs whose sync returned and whose outcome is being recorded.
        self.finishing: set[int] = set()
        self.outcomes = Outcomes(pool)
        #: The workspaces' side: this worker's key (``None``: none), one concern each.
        self.keyring = Keyring(settings.secret_key) if settings.secret_key else None
        self.marks = key_check.CredentialMarks(pool)
        self.decrypter = Decrypter(self.keyring, self.marks, pool)
        self.learner = Learner(
            settings,
            pool,
            lambda workspace_id, source_type: WorkspaceMeter(
                pool, workspace_id, self.budgets.get(source_type)
            ),
        )
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._paused_until: dict[str, float] = {}
        #: Sources a claim found nothing for, with when (``time.monotonic()``) the due-time
        #: query said one could be claimable (at most a poll interval): not asked before, unless
        #: :meth:`wake` (a notification, a requeued lease) or a follow-up says otherwise. Spares
        #: the empty claim and due-time query per claim round for sources with nothing to do
        #: while another source fills its share of the slots.
        self._nothing_until: dict[str, float] = {}
        self._stopping = asyncio.Event()
        #: Claim again only once this many slots are free (or nothing runs): claims in batches.
        self.claim_batch = max(1, self.concurrency // 4)
        self.completed = 0
        self.failed = 0
        #: ``time.monotonic()`` of the last claim that took a job (``None``: none yet), for
        #: the heartbeat.
        self.last_claim: float | None = None
        #: Each source's default API budget (``Source.budget`` or its environment override).
        self.budgets: dict[str, ApiBudget] = {
            s: b for s in self.syncers if (b := settings.budget(s)) is not None
        }
        self.workspace_concurrency = max(1, settings.workspace_concurrency)
        #: Requests a typical sync of each source costs (``Source.requests_per_page``).
        known = registry.sources()
        self.costs = {s: known[s].requests_per_page for s in self.syncers if s in known}
        #: Requests and pages synced per workspace and lane, written about once a second
        #: (``debounce.workspaces.sync_costs``: requests per synced page on /metrics and the dashboard).
        self.sync_costs = SyncCosts(pool)

    # --- public -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to stop claiming and shut down (signal handlers call this)."""
        self._stopping.set()
        self._wake.set()

    def wake(self) -> None:
        """Look for due jobs now (a notification arrived, a slot freed, a lease came back):
        every source is asked again."""
        self._nothing_until.clear()
        self._wake.set()

    def _ask_again(self, source_type: str) -> None:
        """A job of ``source_type`` may be claimable again (a follow-up, a retry, a sync of a
        workspace at its workspace concurrency ended): ask for it."""
        self._nothing_until.pop(source_type, None)
        self._wake.set()

    async def run(self) -> None:
        """Run until :meth:`stop`; then drain within the grace period, release the rest."""
        log.info(
            "worker %s started (concurrency %d, per source %d)",
            self.worker_id,
            self.concurrency,
            self.source_concurrency,
        )
        self.outcomes.start()
        helpers: list[asyncio.Task[None]] = []
        try:
            if await maintenance.wait_for_schema(self.pool, self._stopping):
                # Liveness first: the jobs of dead workers come back whatever else fails at
                # start (a workspace row this worker cannot prepare must not keep them away).
                helpers.append(
                    asyncio.create_task(
                        maintenance.reaper(self.pool, self.settings.lease_seconds, self.wake), name="reaper"
                    )
                )
                helpers.append(
                    asyncio.create_task(
                        heartbeat.heartbeat(self.pool, self.worker_id, lambda: self.last_claim),
                        name="heartbeat",
                    )
                )
                if await maintenance.wait_until_prepared(self._prepare, self._stopping):
                    helpers += self._start_helpers()
                    await self._claim_loop()
        finally:
            await self._drain()
            await self.sync_costs.flush()
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if helpers:
                try:
                    await heartbeat.leave(self.pool, self.worker_id)
                except Exception as exc:
                    log_db_error("saying the worker stopped", exc)
            await self.learner.close()
            await self.outcomes.stop()
            log.info(
                "worker %s stopped (%d completed, %d failed)", self.worker_id, self.completed, self.failed
            )

    async def _prepare(self) -> None:
        """At start: the environment's workspaces exist, each stored token is tried with
        the key (:mod:`.key_check`). Raises ``SecretKeyError``: tokens stored, no key."""
        await env_workspaces.ensure(self.pool, self.settings)
        await key_check.require_key(self.pool, self.keyring)
        await key_check.check_stored(self.pool, self.keyring, self.marks)

    def _start_helpers(self) -> list[asyncio.Task[None]]:
        """The loops beside the claim loop (the reaper runs from the start already): LISTEN,
        lease keeper, the re-check of stored tokens, the backfiller, pruner."""
        lease = self.settings.lease_seconds
        helpers = [
            asyncio.create_task(listen(self.conninfo, self.wake), name="listen"),
            asyncio.create_task(
                maintenance.lease_keeper(self.pool, self.running, self.finishing, lease), name="lease-keeper"
            ),
        ]
        helpers.append(
            asyncio.create_task(
                key_check.watch(self.pool, self.keyring, self.marks, self._stopping), name="credentials"
            )
        )
        backfiller = Backfiller(
            self.settings, self.pool, self.syncers, self.decrypter, self.worker_id, self.budgets
        )
        helpers.append(asyncio.create_task(backfiller.run(self._stopping), name="backfiller"))
        if self.settings.prune_interval_seconds > 0:
            helpers.append(
                asyncio.create_task(
                    maintenance.pruner(
                        self.pool,
                        self.settings.prune_interval_seconds,
                        self.settings.job_retention_seconds,
                        self.settings.event_retention_seconds,
                        self.settings.change_retention_seconds,
                        workspace_concurrency=self.workspace_concurrency,
                    ),
                    name="pruner",
                )
            )
        delivery = DeliveryRunner(DeliverySettings.of(self.settings), self.conninfo, self.worker_id)
        helpers.append(asyncio.create_task(delivery.run(self._stopping), name="delivery"))
        return helpers

    # --- the claim loop -----------------------------------------------------------------------

    def _syncing(self) -> list[SyncJob]:
        """The jobs whose sync is running: a job whose sync returned and whose outcome is being
        recorded (``finishing``) keeps its lease but no longer holds a sync slot, so the next
        claim overlaps the recording of the last outcomes."""
        if not self.finishing:
            return list(self.running.values())
        return [j for i, j in self.running.items() if i not in self.finishing]

    def _eligible(self) -> list[tuple[str, int]]:
        """Sources we may claim for now, with how many slots each may take."""
        syncing = self._syncing()
        free = self.concurrency - len(syncing)
        if free <= 0:
            return []
        now = time.monotonic()
        per_source = Counter(j.source_type for j in syncing)
        out = []
        for source in self.syncers:
            if self._paused_until.get(source, 0.0) > now or self._nothing_until.get(source, 0.0) > now:
                continue
            slots = min(free, self.source_concurrency - per_source[source])
            if slots > 0:
                out.append((source, slots))
        return out

    async def _claim_loop(self) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                delay = await self._claim_round()
                backoff.reset()
            except Exception as exc:
                delay = backoff.next()
                log_db_error("claiming jobs", exc, delay)
            if delay == 0:
                continue  # look again at once: more may be due
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(delay, 0.0))

    async def _claim_round(self) -> float:
        """Claim what is due for the free slots; returns how long to sleep (0: claimed some,
        look again now). With every slot busy, a finishing sync wakes the loop."""
        eligible = self._eligible()
        syncing = self._syncing()
        free = self.concurrency - len(syncing)
        asked = False
        if eligible and (free >= self.claim_batch or not syncing):
            jobs = await queue.claim(
                self.pool,
                self.worker_id,
                limit=free,
                lease_seconds=self.settings.lease_seconds,
                source_slots=dict(eligible),
                budgets=self.budgets,
                workspace_concurrency=self.workspace_concurrency,
                costs=self.costs,
            )
            for job, workspace in jobs:
                self._start(job, workspace)
            if jobs and log.isEnabledFor(logging.INFO):  # one line a claim, not a job
                log.info("claimed %s", ", ".join(claimed_text(j) for j, _ in jobs))
            if jobs:
                self.last_claim = time.monotonic()
                return 0.0
            asked = True
        delay = self.settings.poll_interval_seconds
        # Fewer free slots than a claim batch while syncs run: the end of one wakes the loop,
        # and nothing would be claimed before it, so the due time is not asked for.
        if asked:
            until = await queue.seconds_until_due(self.pool, [s for s, _ in eligible])
            if until is not None:
                # Due but not claimed (rows another worker holds, a bucket refilling this very
                # moment): look again shortly, never in a busy loop.
                delay = min(delay, max(until, MIN_RECHECK_SECONDS))
            again = time.monotonic() + delay
            for source, _ in eligible:
                self._nothing_until[source] = again
        now = time.monotonic()
        # a rate-limited source becomes claimable again; a source found empty may have a job
        # due (woken early, the loop sleeps only until the first of them)
        waits = [t - now for t in (*self._paused_until.values(), *self._nothing_until.values()) if t > now]
        if waits:
            delay = min(delay, min(waits) + 0.001)
        return max(delay, 0.001)

    def _start(self, job: SyncJob, workspace: ClaimedWorkspace | None) -> None:
        self.running[job.id] = job
        WORKER.jobs_claimed.labels(job.source_type).inc()
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "claimed (attempt %d, revision %d, %d events)",
                job.attempts,
                job.claimed_revision or 0,
                job.event_count,
                extra=job.log_fields(),
            )
        self._tasks[job.id] = asyncio.create_task(self._run_job(job, workspace), name=f"sync-{job.id}")

    async def _run_job(self, job: SyncJob, workspace: ClaimedWorkspace | None) -> None:
        """Sync ``job`` with its ``workspace`` as the claim read it (``None``: no workspace)
        and record the outcome; never raises but for cancellation (shutdown)."""
        syncer = self.syncers.get(job.source_type)
        started = time.monotonic()
        credentials: Mapping[str, Any] | None = None
        checkpoint = resumed(job)
        meter = self._meter(job)
        try:
            if syncer is None:
                raise PermanentError(f"no syncer for source {job.source_type!r}")
            credentials = await self.decrypter.credentials(workspace)
            store = self.store.fenced(job)
            context = SyncContext(
                store=store,
                credentials=credentials,
                meter=meter,
                checkpoint=checkpoint,
                audiences=AudienceStore.fenced(self.store.db, job),
            )
            if is_file_job(job):  # a file the source's documents show (debounce/worker/files.py)
                result = await self.files.run(job, context, syncer)
            else:
                result = await syncer.sync(job, context)
                await self.files.after_sync(job, result, context.writer())
        except asyncio.CancelledError:
            raise  # shutdown: _drain releases the job
        except Exception as exc:
            await self._failed(job, started, checkpoint, exc)
            await self._count_cost(job, meter, synced=False)
        else:
            self._observe(job, started, "completed")
            self.completed += 1
            log.info(
                "synced in %.2f s (%d written%s, %d unchanged, %d deleted)",
                time.monotonic() - started,
                result.written,
                written_text(store.wrote),
                result.unchanged,
                result.deleted,
                extra=job.log_fields(),
            )
            await self._complete(job)
            await self._count_cost(job, meter, synced=True)
            if workspace is not None and workspace.unlearned:
                await self.learner.learn(workspace, job.source_type, meter)
        finally:
            if not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                self.running.pop(job.id, None)
                self._tasks.pop(job.id, None)
                self.finishing.discard(job.id)
                self._wake.set()

    async def _failed(self, job: SyncJob, started: float, checkpoint: Checkpoint, exc: Exception) -> None:
        """Record what ``exc`` (raised by ``job``'s sync) means for the job
        (:func:`~debounce.worker.verdict.verdict`, the one mapping)."""
        v = verdict(exc)
        kind = v.kind
        if kind is VerdictKind.BUDGET:
            # The workspace's bucket ran dry mid-sync: hand the slot back, keeping the job's
            # place in line (the claim takes it again when the bucket can pay) and what was
            # fetched (the resumed sync does not pay twice).
            assert v.retry_after is not None
            self._observe(job, started, kind)
            WORKER.budget_yields.labels(job.source_type).inc()
            # Normal operation, said in one line: the job stays pending at its place in
            # line (its due time, already past, is not news) until the bucket can pay.
            whose = (
                f"workspace {job.workspace_id}'s"
                if job.workspace_id is not None
                else f"the {job.source_type} source's"
            )
            fetched = len(checkpoint.responses)
            kept = (
                f" (it keeps the {fetched} response{'s' if fetched != 1 else ''} fetched so far)"
                if fetched
                else ""
            )
            log.info(
                "%s API budget is spent: job %d waits for a request, due in %.1f s%s",
                whose,
                job.id,
                v.retry_after,
                kept,
                extra=job.log_fields(),
            )
            await self._record_failure(
                queue.Failure(
                    job,
                    v.error,
                    retry_after=v.retry_after,
                    keep_place=True,
                    checkpoint=to_keep(job, checkpoint),
                ),
                said=True,
            )
        elif kind is VerdictKind.CREDENTIALS:
            # Its workspace's token does not decrypt here (no key, another key): a
            # configuration problem, said once and marked on the workspace by the
            # ``Decrypter``. The attempt is given back and the job keeps its place;
            # the claim skips the workspace until a worker whose key decrypts it clears the mark.
            self._observe(job, started, kind)
            await self._record_failure(queue.Failure(job, v.error, retry_after=0, keep_place=True))
        elif kind is VerdictKind.LEASE_LOST:
            # Stalled past the lease; another worker holds the job now and syncs the page.
            self._observe(job, started, kind)
            log.warning("lease lost during the sync, nothing written (%s)", exc, extra=job.log_fields())
        elif kind is VerdictKind.RATE_LIMITED:
            assert v.retry_after is not None and v.reason is not None
            self._observe(job, started, kind)
            WORKER.rate_limits.labels(job.source_type, v.reason).inc()
            if job.workspace_id is None or not await workspace_state.block(
                self.pool, job.workspace_id, v.retry_after, v.reason
            ):
                # No workspace to block (the source's settings): pause the source here.
                self._paused_until[job.source_type] = time.monotonic() + v.retry_after
            log.warning("rate limited (%s); retry in %.0f s", v.reason, v.retry_after, extra=job.log_fields())
            await self._record_failure(
                queue.Failure(job, v.error, retry_after=v.retry_after, checkpoint=to_keep(job, checkpoint))
            )
        elif (
            kind is VerdictKind.REVOKED
            and job.workspace_id is not None
            and await workspace_state.revoke(self.pool, job.workspace_id, str(exc))
        ):
            # Parked: pending again, the attempt given back; the claim skips the jobs of a
            # revoked workspace, so nothing retries in a loop, and a re-install resumes it.
            self._observe(job, started, kind)
            await self._record_failure(queue.Failure(job, v.error, retry_after=0))
        elif kind in (VerdictKind.REVOKED, VerdictKind.PERMANENT):
            self._observe(job, started, VerdictKind.PERMANENT)
            self.failed += 1
            if isinstance(exc, ScopeMissing) and job.workspace_id is not None:
                await workspace_state.missing_scope(self.pool, job.workspace_id, exc.scope)
            log.error("permanent failure: %s", exc, extra=job.log_fields())
            await self._record_failure(queue.Failure(job, f"PermanentError: {exc}", permanent=True))
        else:
            self._observe(job, started, kind)
            log.warning("sync failed: %s: %s", exc.__class__.__name__, exc, extra=job.log_fields())
            delay = backoff_delay(job.attempts, self.settings.backoff_seconds)
            await self._record_failure(queue.Failure(job, v.error, backoff_seconds=delay))

    async def _count_cost(self, job: SyncJob, meter: WorkspaceMeter | None, *, synced: bool) -> None:
        """Add the requests ``job``'s sync sent (and its page, when it ``synced``) to its
        workspace's counts (a job of no workspace has no meter: not counted)."""
        if meter is None or job.workspace_id is None:
            return
        self.sync_costs.add(job.workspace_id, job.priority, meter.taken, 1 if synced else 0)
        await self.sync_costs.maybe_flush()

    def _meter(self, job: SyncJob) -> WorkspaceMeter | None:
        """The budget meter of ``job``'s workspace (``None``: a job of no workspace)."""
        if job.workspace_id is None:
            return None
        # The claim reserved one sync's requests (sql/queries/claim.sql); a resumed sync that already
        # holds responses in its checkpoint spends them first and its reservation after.
        return WorkspaceMeter(
            self.pool,
            job.workspace_id,
            self.budgets.get(job.source_type),
            reserved=self.costs.get(job.source_type, 1.0),
        )

    @staticmethod
    def _observe(job: SyncJob, started: float, outcome: str) -> None:
        WORKER.sync_seconds.labels(job.source_type, outcome).observe(time.monotonic() - started)

    async def _complete(self, job: SyncJob) -> None:
        """Record a finished sync; the job keeps its lease (not its sync slot) until it is."""
        self.finishing.add(job.id)
        self._wake.set()  # its sync slot is free: the claim may take the next job now
        row = await self.outcomes.complete(job)
        if row is not None and row.finished_at is not None:
            lag = (row.finished_at - job.first_event_at).total_seconds()
            WORKER.sync_lag.labels(job.source_type).observe(max(lag, 0.0))
        if row is None:
            log.warning("lease lost before the outcome was recorded", extra=job.log_fields())
        elif row.status.value != "completed":
            self._ask_again(job.source_type)
            log.info(
                "edited during the sync: follow-up due %s",
                row.scheduled_at.isoformat(),
                extra=job.log_fields(),
            )
        elif job.workspace_id is not None:
            # One of its workspace's syncs in flight ended: its other jobs may be claimable now
            self._ask_again(job.source_type)

    async def _record_failure(self, failure: queue.Failure, *, said: bool = False) -> None:
        """Record a failed sync; the job keeps its lease (not its sync slot) until it is.
        Logs the job's new state unless the caller ``said`` what happens to it already."""
        job = failure.job
        self.finishing.add(job.id)
        self._wake.set()  # its sync slot is free: the claim may take the next job now
        row = await self.outcomes.fail(failure)
        if row is None:
            log.warning("lease lost before the outcome was recorded", extra=job.log_fields())
        else:
            if row.status.value == "pending" or job.workspace_id is not None:
                self._ask_again(job.source_type)  # a retry, or one of its workspace's syncs ended
            if not said:
                log.info(
                    "now %s (due %s)", row.status.value, row.scheduled_at.isoformat(), extra=job.log_fields()
                )

    async def _drain(self) -> None:
        """Let running syncs finish within the grace period, then release what is left."""
        if self._tasks:
            log.info(
                "stopping: waiting up to %.0f s for %d running syncs",
                self.settings.shutdown_grace_seconds,
                len(self._tasks),
            )
            await asyncio.wait(list(self._tasks.values()), timeout=self.settings.shutdown_grace_seconds)
        leftover = [self.running[i] for i in list(self._tasks) if i in self.running]
        for task in list(self._tasks.values()):
            task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if leftover:
            try:
                for job in await queue.release(self.pool, leftover):
                    log.info("released unfinished sync at shutdown", extra=job.log_fields())
            except Exception as exc:
                log_db_error(f"releasing {len(leftover)} jobs (their leases will expire)", exc)
        self._tasks.clear()
        self.running.clear()
        self.finishing.clear()
