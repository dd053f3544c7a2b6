"""The worker's maintenance loops: keeping the leases of running syncs, returning the jobs
of dead workers whose leases expired, and pruning what is past retention (finished jobs, event
ids, the change feed's changes) with the workspace removals a crash left half done; and a
worker's start: the wait for the schema, then for its workspaces to be prepared; and its
shutdown (:func:`drain`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool, PoolTimeout

from debounce import queue
from debounce.documents import feed
from debounce.documents.store import purge_removed
from debounce.infra.db import is_transient, unreachable_reason, why_unreachable
from debounce.infra.metrics import WORKER
from debounce.infra.retry import Backoff
from debounce.infra.secrets import SecretKeyError
from debounce.migrate import schema_status
from debounce.types import SyncJob
from debounce.worker.ahead import LocalQueue
from debounce.worker.completions import Completions
from debounce.worker.errors import log_db_error, stop_if_cancelled

__all__ = [
    "PRUNE_BATCH",
    "drain",
    "lease_keeper",
    "prune_once",
    "pruner",
    "reaper",
    "renew_leases",
    "wait_for_schema",
    "wait_until_prepared",
]

#: Event ids deleted per prune statement: a long backlog is pruned in short statements rather
#: than one that holds locks for minutes (finished jobs go by whole partitions).
PRUNE_BATCH = 5000

log = logging.getLogger("debounce.worker")


async def renew_leases(
    completions: Completions,
    running: Mapping[int, SyncJob],
    finishing: Collection[int],
    ahead: LocalQueue | None = None,
) -> list[SyncJob]:
    """Extend the lease of every sync in ``running`` that is not ``finishing`` (its outcome
    being recorded: recording clears the lease, which a snapshot taken before may not show)
    and of every job held in the local queue ``ahead``, through the flush buffer; returns (and
    logs) the running ones whose claim was lost meanwhile. A held job whose lease was lost is
    dropped from the local queue: it is never synced here.

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
    """
    jobs = [j for j in running.values() if j.id not in finishing]
    held = ahead.jobs() if ahead is not None else []
    if not jobs and not held:
        return []
    sent = time.monotonic()
    kept = await completions.renew([*jobs, *held])
    WORKER.lease_renewals.inc(len(kept))
    if ahead is not None:
        for job in ahead.renewed([j.id for j in held], kept, sent):
            log.warning(
                "lease lost while the job waited in the local queue: not synced", extra=job.log_fields()
            )
    lost = [j for j in jobs if j.id not in kept and j.id in running and j.id not in finishing]
    for job in lost:
        log.warning(
            "lease lost while syncing: the job was requeued or re-claimed; this sync's "
            "writes will be refused",
            extra=job.log_fields(),
        )
    return lost


async def lease_keeper(
    completions: Completions,
    running: Mapping[int, SyncJob],
    finishing: Collection[int],
    lease_seconds: float,
    ahead: LocalQueue | None = None,
) -> None:
    """Run forever: :func:`renew_leases` every ``lease_seconds / 3``."""
    interval = max(lease_seconds / 3.0, 0.05)
    while True:
        await asyncio.sleep(interval)
        try:
            await renew_leases(completions, running, finishing, ahead)
        except Exception as exc:
            log_db_error("extending leases", exc)
        stop_if_cancelled()


async def drain(
    pool: AsyncConnectionPool[Any],
    tasks: Mapping[int, asyncio.Task[None]],
    running: Mapping[int, SyncJob],
    held: list[SyncJob],
    grace: float,
) -> None:
    """A worker's shutdown: release the ``held`` jobs (claimed ahead, never started) at once, so
    other workers take them during the grace period; let the running syncs (``tasks`` by job
    id) finish within ``grace`` seconds; cancel the rest and release their jobs untouched.
    Never raises (a job not released comes back when its lease expires)."""
    await _release(pool, held, "released a job claimed ahead at shutdown")
    if tasks:
        log.info("stopping: waiting up to %.0f s for %d running syncs", grace, len(tasks))
        await asyncio.wait(list(tasks.values()), timeout=grace)
    leftover = [running[i] for i in list(tasks) if i in running]
    for task in list(tasks.values()):
        task.cancel()
    for task in list(tasks.values()):
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    await _release(pool, leftover, "released unfinished sync at shutdown")


async def _release(pool: AsyncConnectionPool[Any], jobs: list[SyncJob], said: str) -> None:
    if not jobs:
        return
    try:
        for job in await queue.release(pool, jobs):
            log.info(said, extra=job.log_fields())
    except Exception as exc:
        log_db_error(f"releasing {len(jobs)} jobs (their leases will expire)", exc)


async def reaper(pool: AsyncConnectionPool[Any], lease_seconds: float, wake: Callable[[], None]) -> None:
    """Run forever: every ``min(lease / 2, 30)`` seconds return expired leases to the queue
    (``queue.requeue_expired``), waking the claim loop when some came back."""
    interval = max(min(lease_seconds / 2.0, 30.0), 0.05)
    while True:
        try:
            for job in await queue.requeue_expired(pool):
                log.warning("expired lease returned: now %s", job.status.value, extra=job.log_fields())
                wake()
        except Exception as exc:
            log_db_error("requeueing expired leases", exc)
        stop_if_cancelled()
        await asyncio.sleep(interval)


async def prune_once(
    pool: AsyncConnectionPool[Any],
    job_retention: float,
    event_retention: float,
    *,
    change_retention: float | None = None,
    batch: int = PRUNE_BATCH,
    now: datetime | None = None,
) -> dict[str, int] | None:
    """Prune finished jobs older than ``job_retention`` seconds (``queue.prune``: whole
    partitions of ``finished_jobs``, made ahead there too), event ids older than
    ``event_retention`` seconds (in statements of at most ``batch`` rows each) and, unless
    ``change_retention`` is ``None``, the change feed's changes older than ``change_retention``
    seconds (``feed.prune_changes``: whole partitions of the log, made ahead there too; cursors
    below them then answer 410) — unless another worker is pruning
    (then ``None``). Returns the counts deleted (``jobs``, ``events``,
    ``changes``).

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
    """
    total = {"jobs": 0, "events": 0, "changes": 0}
    ran = False
    while True:
        done = await queue.prune(
            pool, job_retention, event_older_than=event_retention, limit=batch, exclusive=True, now=now
        )
        if done is None:
            break
        ran = True
        total = {
            "jobs": total["jobs"] + done["jobs"],
            "events": total["events"] + done["events"],
            "changes": total["changes"],
        }
        if done["overflow"]:  # expected at a new database's first prune: nothing to act on
            log.info(
                "finished_jobs' DEFAULT partition held %d jobs (no partition covered their "
                "finished_at yet: a new database's first prune, or pruning was off): moved into "
                "partitions of their own",
                done["overflow"],
            )
        if done["events"] < batch:  # finished jobs: one partition drop, done
            break
    if change_retention is not None and ran:
        pruned = await feed.prune_changes(pool, change_retention, exclusive=True, now=now)
        if pruned is not None:
            total["changes"] = pruned.changes
            if pruned.overflow:
                log.warning(
                    "the change log's DEFAULT partition held %d changes (writes outran the "
                    "partitions made ahead since the last prune): moved into a partition of their own",
                    pruned.overflow,
                )
    return total if ran else None


async def pruner(
    pool: AsyncConnectionPool[Any],
    interval: float,
    job_retention: float,
    event_retention: float,
    change_retention: float | None = None,
    *,
    workspace_concurrency: int,
) -> None:
    """Run forever: :func:`prune_once` every ``interval`` seconds (the first soon after
    start, so a deployment that restarts often still prunes); the worker that pruned then
    runs :func:`upkeep` (``workspace_concurrency``: the workers' K, as the claim uses it)."""
    await asyncio.sleep(min(interval, 30.0))
    while True:
        try:
            done = await prune_once(pool, job_retention, event_retention, change_retention=change_retention)
            if done and any(done.values()):
                log.info(
                    "pruned %d finished jobs, %d event ids and %d feed changes past retention",
                    done["jobs"],
                    done["events"],
                    done["changes"],
                )
            if done is not None:
                await upkeep(pool, workspace_concurrency=workspace_concurrency)
        except Exception as exc:
            log_db_error("pruning", exc)
        stop_if_cancelled()
        await asyncio.sleep(interval)


async def upkeep(pool: AsyncConnectionPool[Any], *, workspace_concurrency: int) -> dict[str, int]:
    """What the worker that pruned does next, in batches that wait for no lock: finish what
    removed workspaces left (their pending jobs and running backfills: ``queue.cancel_removed``;
    their documents, when the removal asked: ``documents.store.purge_removed``), then repair
    the claim's lines (``queue.repair_lines`` with the workers' ``workspace_concurrency``, so
    a workspace at its limit keeps its flag). Returns the counts
    ``{"jobs", "backfills", "documents", "lines"}``."""
    done = await queue.cancel_removed(pool)
    done["documents"] = await purge_removed(pool)
    if any(done.values()):
        log.info(
            "removed workspaces: %d pending jobs and %d backfills cancelled, %d documents marked deleted",
            done["jobs"],
            done["backfills"],
            done["documents"],
        )
    done["lines"] = await queue.repair_lines(pool, workspace_concurrency=workspace_concurrency)
    if done["lines"]:
        log.info("recomputed the claim's line of %d workspaces", done["lines"])
    return done


async def wait_for_schema(pool: AsyncConnectionPool[Any], stopping: asyncio.Event) -> bool:
    """Wait until the database has every migration of this release (a worker started before
    the release phase, or against a fresh database, says so once and waits instead of
    crashing; a database it cannot connect to is ``worker cannot start: …`` in one line with
    libpq's reason, each try). Returns ``False`` when ``stopping`` is set while waiting."""
    backoff = Backoff(initial=1.0, cap=10.0)
    said = ""
    while not stopping.is_set():
        try:
            async with pool.connection() as conn:
                status = await schema_status(conn)
            if status.ok:
                if said:
                    log.info("database schema is current (version %d): starting", status.current)
                return True
            if not said:
                # Once: a migration in progress shows intermediate versions, which are the
                # same problem, not news.
                said = status.problem()
                log.error("%s; waiting", said)
            delay = backoff.next()
        except Exception as exc:
            delay = backoff.next()
            cause = unreachable_reason(exc)
            if cause is None and isinstance(exc, PoolTimeout):
                stop_if_cancelled()
                cause = await why_unreachable(str(pool.conninfo))
            if cause is not None:  # the line docs/deploying.md's alerts table promises
                log.error(
                    "worker cannot start: cannot connect to the database at DATABASE_URL: "
                    "%s (retrying in %.1f s)",
                    cause,
                    delay,
                )
            else:
                log_db_error("checking the database schema", exc, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=delay)
    return False


async def wait_until_prepared(prepare: Callable[[], Awaitable[None]], stopping: asyncio.Event) -> bool:
    """Run ``prepare()`` (the worker's side of workspaces: the environment's workspaces, the
    stored tokens' check) until it succeeds; returns ``False`` when ``stopping`` is set first.

    A database that is away is retried quietly (one warning a try); any other error is a
    worker that cannot start: said in one line at ERROR naming the cause (the traceback at
    DEBUG), retried every 1 → 60 s, since an operator may fix the cause without a restart.

    Raises:
        SecretKeyError: a configuration error the process stops with (the CLI's boundary says
            it in one line; logging it too would say it twice).
    """
    backoff = Backoff(initial=1.0, cap=60.0)
    while not stopping.is_set():
        try:
            await prepare()
            return True
        except SecretKeyError:
            raise
        except Exception as exc:
            delay = backoff.next()
            if is_transient(exc):
                log_db_error("preparing the workspaces", exc, delay)
            else:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                log.error(
                    "worker cannot start: preparing the workspaces failed with %s: %s; "
                    "retrying in %.1f s (expired leases are still returned meanwhile)",
                    exc.__class__.__name__,
                    first,
                    delay,
                )
                log.debug("preparing the workspaces failed", exc_info=exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=delay)
    return False
