"""Operating the queue: manual re-sync and retry, inspection (get, list, stats), prune, and the
worker's due-time query. One statement of ``sql/queries/queue.sql`` each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries
from debounce.queue.checks import (
    MAX_BIGINT,
    MAX_KEY_BYTES,
    RESYNC_PRIORITY,
    check_int,
    check_now,
    check_seconds,
    check_text,
)
from debounce.queue.lifecycle import job_of
from debounce.types import JobStatus, SyncJob

__all__ = [
    "JOB_PARTITIONS_PER_RETENTION",
    "PRUNE_LOCK_ID",
    "JobConflict",
    "JobNotFound",
    "JobPage",
    "get",
    "list_jobs",
    "prune",
    "resync",
    "retry",
    "seconds_until_due",
    "cancel_removed",
    "stats",
]

_Q = queries("queue")
_WORKERS = queries("workers")

#: Seconds between two heartbeats of a worker process (debounce/worker/heartbeat.py).
HEARTBEAT_SECONDS = 5.0
#: A worker seen within this many seconds counts as alive in :func:`stats` (three beats).
ALIVE_WITHIN_SECONDS = 3 * HEARTBEAT_SECONDS
_CLAIM = queries("claim")
_BACKFILLS = queries("backfills")


class JobNotFound(LookupError):
    """No job has this id."""


class JobConflict(RuntimeError):
    """The job is not in a state that allows the operation (e.g. retry of a job that is not
    ``failed``, or whose page already has another active job)."""


@dataclass(frozen=True)
class JobPage:
    """One page of :func:`list_jobs`: jobs newest first and the cursor of the next page
    (``None`` when this is the last)."""

    jobs: list[SyncJob]
    next_cursor: int | None


async def resync(
    db: Db,
    source_type: str,
    source_page_id: str,
    *,
    priority: int = RESYNC_PRIORITY,
    max_attempts: int = 5,
    payload: Mapping[str, Any] | None = None,
    workspace_id: int | None = None,
    now: datetime | None = None,
) -> SyncJob:
    """Manual re-sync: the page's job due now with at least ``priority``.

    Creates a job when the page has no active one (including a page whose last job failed),
    of workspace ``workspace_id`` when given (a page never synced: whose token reads it), else
    of the workspace whose token wrote its document; an active job keeps its workspace. A
    ``processing`` job gets a follow-up due now. Wakes idle workers (NOTIFY).

    Raises:
        ValueError: empty source or page id.
        JobConflict: the job's workspace is removed (nothing changed).
    """
    check_text("source_type", source_type, max_bytes=MAX_KEY_BYTES)
    check_text("source_page_id", source_page_id, max_bytes=MAX_KEY_BYTES)
    check_int("priority", priority)
    check_int("max_attempts", max_attempts, minimum=1)
    check_now(now)
    row = await fetch_one(
        db,
        _Q["resync"],
        {
            "source_type": source_type,
            "source_page_id": source_page_id,
            "priority": priority,
            "max_attempts": max_attempts,
            "payload": Jsonb(dict(payload or {"type": "manual_resync"})),
            "workspace_id": workspace_id,
            "now": now,
        },
    )
    job = job_of(row)
    if job is None:
        raise JobConflict(
            f"the workspace of {source_type} page {source_page_id} is removed; nothing was re-synced"
        )
    return job


async def retry(db: Db, job_id: int, *, now: datetime | None = None) -> SyncJob:
    """Manual retry of a ``failed`` job: ``pending``, due now, attempts reset.

    Raises:
        JobNotFound: no such job.
        JobConflict: the job is not ``failed``, its page already has an active job, or its
            workspace is removed.
    """
    check_int("job_id", job_id, minimum=1)
    check_now(now)
    try:
        row = await fetch_one(db, _Q["retry"], {"id": job_id, "now": now})
    except pg_errors.UniqueViolation:
        row = None
    job = job_of(row)
    if job is not None:
        return job
    current = await get(db, job_id)
    if current is None:
        raise JobNotFound(job_id)
    if current.status is not JobStatus.FAILED:
        raise JobConflict(f"job {job_id} is {current.status.value}; only failed jobs can be retried")
    raise JobConflict(
        f"page {current.source_type}/{current.source_page_id} already has an active job (it "
        "will sync the page), or its workspace is removed"
    )


async def get(db: Db, job_id: int) -> SyncJob | None:
    """The job with id ``job_id``, or ``None``."""
    return job_of(await fetch_one(db, _Q["get"], {"id": job_id}))


async def list_jobs(
    db: Db,
    *,
    status: str | JobStatus | None = None,
    source_type: str | None = None,
    source_page_id: str | None = None,
    limit: int = 50,
    cursor: int | None = None,
) -> JobPage:
    """Jobs newest first, filtered by state, source and page; cursor paging by id.

    Raises:
        ValueError: unknown ``status``, ``limit`` outside 1..1000, cursor < 1.
    """
    parsed = JobStatus.parse(status) if isinstance(status, str) else status
    check_int("limit", limit, minimum=1)
    if limit > 1000:
        raise ValueError(f"limit must be <= 1000, got {limit}")
    if cursor is not None:
        check_int("cursor", cursor, minimum=1)
        if cursor > MAX_BIGINT:
            raise ValueError(f"cursor must be <= {MAX_BIGINT}, got {cursor}")
    for name, value in (("source", source_type), ("page_id", source_page_id)):
        if value is not None:
            check_text(name, value, max_bytes=MAX_KEY_BYTES)
    rows = await fetch_all(
        db,
        _Q["list"],
        {
            "status": parsed.value if parsed else None,
            "source_type": source_type,
            "source_page_id": source_page_id,
            "cursor": cursor,
            "limit": limit + 1,
        },
    )
    jobs = [SyncJob.from_row(r) for r in rows[:limit]]
    return JobPage(jobs=jobs, next_cursor=jobs[-1].id if len(rows) > limit else None)


async def stats(
    db: Db, *, now: datetime | None = None, alive_within: float = ALIVE_WITHIN_SECONDS
) -> dict[str, Any]:
    """Queue statistics::

        {"by_source": {"<source>": {"pending": 3, "processing": 1, "completed": 10, "failed": 0,
                                  "oldest_due_age_seconds": 4.2}, ...},
         "totals": {"pending": .., "processing": .., "completed": .., "failed": ..},
         "oldest_due_age_seconds": 4.2}

    ``oldest_due_age_seconds``: how long the oldest due pending job has waited past its due
    time (0 when none is due) — the queue's lag. ``workers``: ``{"alive": 2,
    "last_claim_age_seconds": 0.8}``, the worker processes that said they were alive within
    ``alive_within`` seconds (their heartbeat, debounce/worker/heartbeat.py) and how long ago
    any worker last claimed a job (``None``: none has). ``now`` moves the jobs' clock only:
    the heartbeats are read against the database's clock.
    """
    check_now(now)
    rows = await fetch_all(db, _Q["stats"], {"now": now})
    seen = await fetch_one(db, _WORKERS["summary"], {"alive_within": alive_within})
    empty = {s.value: 0 for s in JobStatus}
    by_source: dict[str, dict[str, Any]] = {}
    totals = dict(empty)
    oldest = 0.0
    for r in rows:
        entry = by_source.setdefault(r["source_type"], {**empty, "oldest_due_age_seconds": 0.0})
        entry[r["status"]] = int(r["jobs"])
        totals[r["status"]] += int(r["jobs"])
        age = float(r["oldest_due_age_seconds"] or 0.0)
        entry["oldest_due_age_seconds"] = max(entry["oldest_due_age_seconds"], age)
        oldest = max(oldest, age)
    claimed = None if seen is None else seen["last_claim_age_seconds"]
    workers = {
        "alive": 0 if seen is None else int(seen["alive"]),
        "last_claim_age_seconds": None if claimed is None else float(claimed),
    }
    return {"by_source": by_source, "totals": totals, "oldest_due_age_seconds": oldest, "workers": workers}


#: Advisory lock of the scheduled prune (one worker at a time): "prune" in ASCII.
PRUNE_LOCK_ID = 0x7072756E65

#: A partition of ``finished_jobs`` spans this share of the jobs' retention (the change log's
#: figure, ``feed.PARTITIONS_PER_RETENTION``): about nine partitions exist, and a finished job
#: stays at most about an eighth of the retention past it.
JOB_PARTITIONS_PER_RETENTION = 8


async def prune(
    db: Db,
    older_than: float,
    *,
    event_older_than: float | None = None,
    limit: int | None = None,
    exclusive: bool = False,
    now: datetime | None = None,
) -> dict[str, int] | None:
    """Retention of finished (``completed``/``failed``) jobs, by whole partitions of
    ``finished_jobs`` (migration 034): move what its DEFAULT partition holds into partitions
    of their own, make partitions ahead (each ``older_than / JOB_PARTITIONS_PER_RETENTION``
    seconds wide, at least a minute), and drop those whose jobs all finished more than ``older_than`` seconds
    before ``now`` (default: the database's clock) — so a job is kept at least ``older_than``
    seconds and about a partition's width longer at most. Also delete remembered event ids
    older than ``event_older_than`` seconds (default: ``older_than``), at most ``limit``
    (``None``: all). Returns ``{"jobs": n, "events": m, "partitions_dropped": d,
    "partitions_added": a, "overflow": o}`` (``overflow``: rows the DEFAULT partition held);
    with ``exclusive``, ``None`` when another session holds the prune lock
    (:data:`PRUNE_LOCK_ID`, so concurrent workers do not prune at once). Calling it again
    at once drops nothing more: ``limit`` only bounds the event ids.

    Raises:
        ValueError: negative ages, ``limit < 1``.
        psycopg.errors.LockNotAvailable: a partition's DDL waited 1 s for a lock on
            finished_jobs (a long transaction reading it): the next prune tries again.
    """
    check_seconds("older_than", older_than)
    events_age = older_than if event_older_than is None else event_older_than
    check_seconds("event_older_than", events_age)
    if limit is not None:
        check_int("limit", limit, minimum=1)
    check_now(now)
    row = await fetch_one(
        db,
        _Q["prune"],
        {
            "job_older_than": float(older_than),
            "span": float(older_than) / JOB_PARTITIONS_PER_RETENTION,
            "event_older_than": float(events_age),
            "now": now,
            "limit": limit,
            "exclusive": exclusive,
            "lock_id": PRUNE_LOCK_ID,
        },
    )
    assert row is not None
    if not row["ran"]:
        return None
    return {
        "jobs": int(row["jobs"]),
        "events": int(row["events"]),
        "partitions_dropped": int(row["dropped"]),
        "partitions_added": int(row["added"]),
        "overflow": int(row["overflow"]),
    }


async def seconds_until_due(db: Db, source_types: Sequence[str]) -> float | None:
    """Seconds until the claim could take a job of ``source_types`` by the
    database's clock (zero or negative when one is claimable now), or ``None`` when nothing
    is pending. Constant cost: it reads the head of each line (docs/claim.md, "When to claim
    next"). A workspace counts from when it can take a job as the last claim that looked at it
    found (429 block over, its bucket able to pay for a sync, fewer syncs in flight than its
    workspace concurrency): a bucket drained since then costs one empty claim, which then holds
    the workspace until its refill."""
    row = await fetch_one(
        db,
        _CLAIM["seconds_until_due"],
        {"source_types": list(source_types)},
    )
    return float(row["seconds"]) if row and row["seconds"] is not None else None


async def cancel_removed(db: Db, *, workspace_id: int | None = None, batch: int = 500) -> dict[str, int]:
    """Finish the pending jobs (failed, ``last_error`` saying why) and running backfills
    (cancelled) of removed workspaces (``workspace_id``'s only, or every removed one), in
    statements of at most ``batch`` rows, each its own transaction when ``db`` is a pool. Rows
    another statement holds are left to a later call (the pruner's). Returns
    ``{"jobs": n, "backfills": n}``, how many were finished."""
    done = {"jobs": 0, "backfills": 0}
    for kind, sql in (("jobs", _Q["cancel_removed"]), ("backfills", _BACKFILLS["cancel_removed"])):
        while True:
            rows = await fetch_all(db, sql, {"workspace_id": workspace_id, "limit": batch})
            done[kind] += len(rows)
            if len(rows) < batch:
                break
    return done
