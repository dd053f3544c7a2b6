"""The debounced job queue on Postgres: every statement on ``sync_jobs``.

Functions take ``db`` (an ``AsyncConnection`` in autocommit mode, or an
``AsyncConnectionPool``) and run one statement from ``sql/queue.sql`` each: one round trip,
one transaction. Semantics (docs/design.md, "Job states"):

- one *active* (``pending``/``processing``) job per ``(source_type, source_page_id)``, enforced
  by the partial unique index ``sync_jobs_active_page``;
- an event pushes its page's pending job to ``now + debounce_seconds``, never past
  ``first_event_at + max_wait_seconds``; the job keeps the latest payload and counts events;
- an event for a ``processing`` job bumps its ``revision``; :func:`complete` then turns the row
  back to ``pending`` (a follow-up sync) instead of ``completed``, so no edit is lost however the
  event interleaves with :func:`claim` and :func:`complete` (row locks serialise them; the
  follow-up is decided inside the completing UPDATE, on the latest row version);
- an event id already seen for its source changes nothing (idempotency, ``seen_events``).

Every function accepts ``now`` (timezone-aware datetime, default: the database's ``now()``) so
tests control time without sleeping. Durations are seconds (float).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from debounce.db import Db, fetch_all, fetch_one
from debounce.retry import DEFAULT_BACKOFF_SECONDS, backoff_delay
from debounce.sql import queries
from debounce.types import (
    EnqueueOutcome,
    EnqueueResult,
    JobEvent,
    JobStatus,
    SyncJob,
)

__all__ = [
    "DEFAULT_BACKOFF_SECONDS",
    "NOTIFY_CHANNEL",
    "RESYNC_PRIORITY",
    "JobConflict",
    "JobNotFound",
    "JobPage",
    "active_for_page",
    "backoff_delay",
    "check_payload",
    "claim",
    "complete",
    "enqueue",
    "enqueue_many",
    "extend_lease",
    "extend_leases",
    "fail",
    "get",
    "list_jobs",
    "next_due",
    "prune",
    "release",
    "requeue_expired",
    "resync",
    "retry",
    "seconds_until_due",
    "stats",
    "unstorable",
    "validate_event",
]

_Q = queries("queue")

#: LISTEN/NOTIFY channel on which a job that becomes due *now* is announced (payload: source).
NOTIFY_CHANNEL = "debounce_jobs"
#: Priority of a manual re-sync (webhook events default to 0; higher is claimed first).
RESYNC_PRIORITY = 100
#: Longest text kept in ``last_error``.
MAX_ERROR_CHARS = 2000
#: Longest source type, page id or event id accepted, in UTF-8 bytes. They are index keys
#: (``sync_jobs_active_page``, ``seen_events``, ``documents``), and a B-tree entry must fit in
#: a third of a page (about 2 700 bytes, PostgreSQL's ``ProgramLimitExceeded`` beyond): the
#: sources' ids are far shorter (UUIDs, short opaque ids).
MAX_KEY_BYTES = 512
#: Deepest JSON nesting accepted in a payload (PostgreSQL's jsonb parser recurses, and a
#: body nested thousands deep exhausts its stack).
MAX_PAYLOAD_DEPTH = 64
#: Largest value of a bigint column (job ids, cursors).
MAX_BIGINT = 2**63 - 1


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


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store ``text`` (a NUL character, which ``text`` and ``jsonb``
    refuse; a lone surrogate, which is not valid UTF-8), or ``None`` when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
    return None


def _check_text(name: str, value: object, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    problem = unstorable(value)
    if problem:
        raise ValueError(f"{name} {problem}")
    if max_bytes is not None and len(value.encode("utf-8")) > max_bytes:
        raise ValueError(f"{name} is longer than {max_bytes} bytes")
    return value


def check_payload(payload: object) -> None:
    """Check that ``payload`` (parsed JSON) can be stored as ``jsonb``: every key and string
    storable (:func:`unstorable`), nesting at most :data:`MAX_PAYLOAD_DEPTH`. Iterative, so a
    hostile depth cannot exhaust Python's stack either.

    Raises:
        ValueError: names the first problem and where it is (a JSON path such as ``$.event.text``).
    """
    stack: list[tuple[object, str, int]] = [(payload, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_PAYLOAD_DEPTH:
            raise ValueError(f"payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels at {path}")
        if isinstance(value, str):
            problem = unstorable(value)
            if problem:
                raise ValueError(f"payload text at {path} {problem}")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                problem = unstorable(str(key))
                if problem:
                    raise ValueError(f"payload key under {path} {problem}")
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def _check_seconds(name: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} seconds, got {value!r}")
    return float(value)


def _check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def _check_now(now: datetime | None) -> datetime | None:
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    return now


def validate_event(event: JobEvent) -> None:
    """Check one event before it is sent.

    Raises:
        ValueError: empty source or page id, empty event id, an id longer than
            :data:`MAX_KEY_BYTES`, text the database cannot store (NUL, lone surrogates) in an
            id or anywhere in the payload, payload not a dict or nested too deep, negative or
            non-finite window, priority not an int, max_attempts < 1.
    """
    _check_text("source_type", event.source_type, max_bytes=MAX_KEY_BYTES)
    _check_text("source_page_id", event.source_page_id, max_bytes=MAX_KEY_BYTES)
    if event.event_id is not None:
        _check_text("event_id", event.event_id, max_bytes=MAX_KEY_BYTES)
    if not isinstance(event.payload, Mapping):
        raise ValueError(f"payload must be a JSON object (dict), got {type(event.payload).__name__}")
    check_payload(event.payload)
    _check_seconds("debounce_seconds", event.debounce_seconds)
    _check_seconds("max_wait_seconds", event.max_wait_seconds)
    _check_int("priority", event.priority)
    _check_int("max_attempts", event.max_attempts, minimum=1)


def _job(row: Mapping[str, Any] | None) -> SyncJob | None:
    if row is None or row.get("id") is None:
        return None
    return SyncJob.from_row(dict(row))


async def enqueue(
    db: Db,
    source_type: str,
    source_page_id: str,
    *,
    payload: Mapping[str, Any],
    event_id: str | None,
    debounce_seconds: float,
    max_wait_seconds: float,
    priority: int = 0,
    max_attempts: int = 5,
    now: datetime | None = None,
) -> EnqueueResult:
    """Debounce one event into its page's active job (one statement).

    Returns the :class:`EnqueueOutcome` (``created``, ``debounced``, ``duplicate``,
    ``requeued_after_running``) and the page's job after the change.

    Raises:
        ValueError: empty source or page id, negative or non-finite window, payload not a dict.
    """
    event = JobEvent(
        source_type=source_type,
        source_page_id=source_page_id,
        payload=dict(payload) if isinstance(payload, Mapping) else payload,
        event_id=event_id,
        debounce_seconds=debounce_seconds,
        max_wait_seconds=max_wait_seconds,
        priority=priority,
        max_attempts=max_attempts,
    )
    (result,) = await enqueue_many(db, [event], now=now)
    return result


async def enqueue_many(
    db: Db, events: Sequence[JobEvent], *, now: datetime | None = None
) -> list[EnqueueResult]:
    """Debounce a batch of events in one statement and one transaction.

    Events of one page are merged first (the latest in ``events`` order wins; counts add up),
    since one ``ON CONFLICT DO UPDATE`` cannot touch a row twice. Returns one result per event,
    in order. All events are validated before anything is sent: one bad event rejects the batch.

    Raises:
        ValueError: an event is invalid (see :func:`enqueue`).
    """
    _check_now(now)
    if not events:
        return []
    for event in events:
        validate_event(event)
    params = {
        "now": now,
        "source_types": [e.source_type for e in events],
        "source_page_ids": [e.source_page_id for e in events],
        "payloads": [Jsonb(dict(e.payload)) for e in events],
        "event_ids": [e.event_id for e in events],
        "debounce_seconds": [float(e.debounce_seconds) for e in events],
        "max_wait_seconds": [float(e.max_wait_seconds) for e in events],
        "priorities": [e.priority for e in events],
        "max_attempts": [e.max_attempts for e in events],
    }
    # One statement: all-or-nothing. It cannot deadlock with the other statements that lock
    # several jobs: they all lock them in (source_type, source_page_id) order.
    rows = await fetch_all(db, _Q["enqueue_many"], params)
    results: list[EnqueueResult] = []
    for row in rows:
        results.append(EnqueueResult(outcome=EnqueueOutcome(row["outcome"]), job=_job(row)))
    return results


async def claim(
    db: Db,
    worker_id: str,
    *,
    limit: int,
    lease_seconds: float,
    source_types: Sequence[str] | None = None,
    source_limits: Mapping[str, int] | None = None,
    now: datetime | None = None,
) -> list[SyncJob]:
    """Claim up to ``limit`` due jobs for ``worker_id`` (``FOR UPDATE SKIP LOCKED``).

    Due means ``scheduled_at <= now``; order is priority (high first), then ``scheduled_at``.
    Each claimed job is ``processing`` with ``lease_expires_at = now + lease_seconds``,
    ``attempts + 1``, a fresh ``lease_token`` and ``claimed_revision = revision``. Returned in
    claim order. ``source_types`` restricts the claim to those sources; ``source_limits``
    (``{source: n}``) restricts it to those sources *and* caps each at ``n`` jobs, in the same
    single statement (the worker's per-source share of its slots).

    Raises:
        ValueError: empty worker id, ``limit < 1``, ``lease_seconds <= 0``.
    """
    _check_text("worker_id", worker_id)
    _check_int("limit", limit, minimum=1)
    _check_seconds("lease_seconds", lease_seconds, positive=True)
    _check_now(now)
    if source_limits is not None:
        rooms = {s: n for s, n in source_limits.items() if n > 0}
    elif source_types is not None:
        rooms = dict.fromkeys(source_types, limit)
    else:
        rooms = None
    if rooms is not None and not rooms:
        return []
    rows = await fetch_all(
        db,
        _Q["claim"],
        {
            "now": now,
            "worker_id": worker_id,
            "limit": limit,
            "lease_seconds": float(lease_seconds),
            "sources": list(rooms) if rooms is not None else None,
            "rooms": list(rooms.values()) if rooms is not None else None,
        },
    )
    return _claimed(rows)


def _claimed(rows: Sequence[Mapping[str, Any]]) -> list[SyncJob]:
    jobs = [SyncJob.from_row(dict(r)) for r in rows]
    jobs.sort(key=lambda j: (-j.priority, j.scheduled_at, j.id))
    return jobs


def _lease_token(job: SyncJob) -> str:
    if job.lease_token is None:
        raise ValueError(f"job {job.id} carries no lease token: pass the job returned by claim()")
    return job.lease_token


async def complete(db: Db, job: SyncJob, *, now: datetime | None = None) -> SyncJob | None:
    """Record a successful sync of a claimed ``job``.

    The row becomes ``completed``, or ``pending`` again (a follow-up sync with fresh attempts)
    when events arrived since the claim. Returns the row after the change, or ``None`` when
    this claim no longer holds the job (its lease expired and it was requeued or re-claimed).
    """
    return (await complete_many(db, [job], now=now)).get(job.id)


async def complete_many(
    db: Db, jobs: Sequence[SyncJob], *, now: datetime | None = None
) -> dict[int, SyncJob]:
    """:func:`complete` for a batch of claimed jobs in one statement (the worker buffers
    finished syncs). Returns ``{job_id: row after the change}`` for the claims still held."""
    _check_now(now)
    if not jobs:
        return {}
    rows = await fetch_all(
        db,
        _Q["complete_many"],
        {"ids": [j.id for j in jobs], "lease_tokens": [_lease_token(j) for j in jobs], "now": now},
    )
    return {r["id"]: SyncJob.from_row(dict(r)) for r in rows}


async def fail(
    db: Db,
    job: SyncJob,
    error: str,
    *,
    retry_after: float | None = None,
    permanent: bool = False,
    backoff_seconds: Sequence[float] = DEFAULT_BACKOFF_SECONDS,
    jitter: float = 0.2,
    rng: random.Random | None = None,
    now: datetime | None = None,
) -> SyncJob | None:
    """Record a failed sync of a claimed ``job``.

    - ``permanent``: ``failed`` at once;
    - ``retry_after`` (seconds, the source's ``Retry-After``): ``pending`` at ``now +
      retry_after`` without spending an attempt;
    - otherwise: ``pending`` after :func:`backoff_delay` of the attempt, or ``failed`` once
      ``attempts >= max_attempts``.

    An event that arrived during the sync still gets its follow-up (see ``sql/queue.sql``).
    ``error`` is stored in ``last_error`` (truncated to 2000 characters). Returns the row, or
    ``None`` if this claim no longer holds the job.

    Raises:
        ValueError: ``retry_after`` negative or not finite.
    """
    _check_now(now)
    if retry_after is not None:
        retry_after = _check_seconds("retry_after", retry_after)
    delay = backoff_delay(job.attempts, backoff_seconds, jitter=jitter, rng=rng)
    row = await fetch_one(
        db,
        _Q["fail"],
        {
            "id": job.id,
            "lease_token": _lease_token(job),
            "error": (error or "error")[:MAX_ERROR_CHARS],
            "retry_after": retry_after,
            "permanent": bool(permanent),
            "backoff_seconds": delay,
            "now": now,
        },
    )
    return _job(row)


async def extend_leases(
    db: Db, jobs: Iterable[SyncJob], seconds: float, *, now: datetime | None = None
) -> dict[int, datetime]:
    """Extend the leases of running syncs to ``now + seconds`` in one statement.

    Returns ``{job_id: new lease_expires_at}`` for the claims still held; a job missing from
    the result has lost its lease.
    """
    _check_seconds("seconds", seconds, positive=True)
    _check_now(now)
    tokens = [_lease_token(j) for j in jobs]
    if not tokens:
        return {}
    rows = await fetch_all(
        db, _Q["extend_leases"], {"lease_tokens": tokens, "lease_seconds": float(seconds), "now": now}
    )
    return {r["id"]: r["lease_expires_at"] for r in rows}


async def extend_lease(
    db: Db, job: SyncJob, seconds: float, *, now: datetime | None = None
) -> datetime | None:
    """Extend one job's lease to ``now + seconds``; the new expiry, or ``None`` if lost."""
    return (await extend_leases(db, [job], seconds, now=now)).get(job.id)


async def release(
    db: Db, jobs: SyncJob | Iterable[SyncJob], *, now: datetime | None = None
) -> list[SyncJob]:
    """Give claimed jobs back untouched (shutdown): ``pending`` at their due time, the attempt
    not counted. Returns the rows released (claims no longer held are skipped)."""
    _check_now(now)
    batch = [jobs] if isinstance(jobs, SyncJob) else list(jobs)
    tokens = [_lease_token(j) for j in batch]
    if not tokens:
        return []
    rows = await fetch_all(db, _Q["release"], {"lease_tokens": tokens, "now": now})
    return [SyncJob.from_row(dict(r)) for r in rows]


async def requeue_expired(
    db: Db, *, limit: int = 1000, now: datetime | None = None
) -> list[SyncJob]:
    """Return jobs whose lease expired (dead workers) to ``pending`` (due now), or ``failed``
    when their attempts are spent. Returns the rows changed (at most ``limit``)."""
    _check_int("limit", limit, minimum=1)
    _check_now(now)
    rows = await fetch_all(db, _Q["requeue_expired"], {"limit": limit, "now": now})
    return [SyncJob.from_row(dict(r)) for r in rows]


async def resync(
    db: Db,
    source_type: str,
    source_page_id: str,
    *,
    priority: int = RESYNC_PRIORITY,
    max_attempts: int = 5,
    payload: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> SyncJob:
    """Manual re-sync: the page's job due now with at least ``priority``.

    Creates a job when the page has no active one (including a page whose last job failed);
    a ``processing`` job gets a follow-up due now. Wakes idle workers (NOTIFY).

    Raises:
        ValueError: empty source or page id.
    """
    _check_text("source_type", source_type, max_bytes=MAX_KEY_BYTES)
    _check_text("source_page_id", source_page_id, max_bytes=MAX_KEY_BYTES)
    _check_int("priority", priority)
    _check_int("max_attempts", max_attempts, minimum=1)
    _check_now(now)
    row = await fetch_one(
        db,
        _Q["resync"],
        {
            "source_type": source_type,
            "source_page_id": source_page_id,
            "priority": priority,
            "max_attempts": max_attempts,
            "payload": Jsonb(dict(payload or {"type": "manual_resync"})),
            "now": now,
        },
    )
    job = _job(row)
    assert job is not None
    return job


async def retry(db: Db, job_id: int, *, now: datetime | None = None) -> SyncJob:
    """Manual retry of a ``failed`` job: ``pending``, due now, attempts reset.

    Raises:
        JobNotFound: no such job.
        JobConflict: the job is not ``failed``, or its page already has an active job.
    """
    _check_int("job_id", job_id, minimum=1)
    _check_now(now)
    try:
        row = await fetch_one(db, _Q["retry"], {"id": job_id, "now": now})
    except pg_errors.UniqueViolation:
        row = None
    job = _job(row)
    if job is not None:
        return job
    current = await get(db, job_id)
    if current is None:
        raise JobNotFound(job_id)
    if current.status is not JobStatus.FAILED:
        raise JobConflict(f"job {job_id} is {current.status.value}; only failed jobs can be retried")
    raise JobConflict(
        f"page {current.source_type}/{current.source_page_id} already has an active job; "
        "it will sync the page"
    )


async def get(db: Db, job_id: int) -> SyncJob | None:
    """The job with id ``job_id``, or ``None``."""
    return _job(await fetch_one(db, _Q["get"], {"id": job_id}))


async def active_for_page(db: Db, source_type: str, source_page_id: str) -> SyncJob | None:
    """The page's active (``pending``/``processing``) job, or ``None``."""
    return _job(
        await fetch_one(
            db, _Q["active_for_page"], {"source_type": source_type, "source_page_id": source_page_id}
        )
    )


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
    _check_int("limit", limit, minimum=1)
    if limit > 1000:
        raise ValueError(f"limit must be <= 1000, got {limit}")
    if cursor is not None:
        _check_int("cursor", cursor, minimum=1)
        if cursor > MAX_BIGINT:
            raise ValueError(f"cursor must be <= {MAX_BIGINT}, got {cursor}")
    for name, value in (("source", source_type), ("page_id", source_page_id)):
        if value is not None:
            _check_text(name, value, max_bytes=MAX_KEY_BYTES)
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
    jobs = [SyncJob.from_row(dict(r)) for r in rows[:limit]]
    return JobPage(jobs=jobs, next_cursor=jobs[-1].id if len(rows) > limit else None)


async def stats(db: Db, *, now: datetime | None = None) -> dict[str, Any]:
    """Queue statistics::

        {"by_source": {"<source>": {"pending": 3, "processing": 1, "completed": 10, "failed": 0,
                                  "oldest_due_age_seconds": 4.2}, ...},
         "totals": {"pending": .., "processing": .., "completed": .., "failed": ..},
         "oldest_due_age_seconds": 4.2}

    ``oldest_due_age_seconds``: how long the oldest due pending job has waited past its due
    time (0 when none is due) — the queue's lag.
    """
    _check_now(now)
    rows = await fetch_all(db, _Q["stats"], {"now": now})
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
    return {"by_source": by_source, "totals": totals, "oldest_due_age_seconds": oldest}


async def next_due(db: Db) -> datetime | None:
    """Due time of the earliest pending job (possibly in the past), or ``None``."""
    row = await fetch_one(db, _Q["next_due"], {})
    return row["next_due"] if row else None


async def prune(
    db: Db,
    older_than: float,
    *,
    event_older_than: float | None = None,
    now: datetime | None = None,
) -> dict[str, int]:
    """Delete finished (``completed``/``failed``) jobs finished more than ``older_than``
    seconds ago, and remembered event ids older than ``event_older_than`` seconds (default:
    ``older_than``). Returns ``{"jobs": n, "events": m}``."""
    _check_seconds("older_than", older_than)
    events_age = older_than if event_older_than is None else event_older_than
    _check_seconds("event_older_than", events_age)
    _check_now(now)
    row = await fetch_one(
        db,
        _Q["prune"],
        {"job_older_than": float(older_than), "event_older_than": float(events_age), "now": now},
    )
    assert row is not None
    return {"jobs": int(row["jobs"]), "events": int(row["events"])}


async def seconds_until_due(db: Db, source_types: Sequence[str] | None = None) -> float | None:
    """Seconds until the earliest pending job (of ``source_types``, default any) is due by the
    database's clock (negative when overdue), or ``None`` when nothing is pending."""
    row = await fetch_one(
        db,
        _Q["seconds_until_due"],
        {"source_types": list(source_types) if source_types is not None else None},
    )
    return float(row["seconds"]) if row and row["seconds"] is not None else None
