"""A job's life: the debounce upsert, the claim, leases, and the outcome of a sync
(complete, fail, release, requeue of expired leases). One statement of ``sql/queries/queue.sql`` each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries
from debounce.queue.checks import (
    MAX_ERROR_CHARS,
    check_int,
    check_now,
    check_seconds,
    check_text,
    payload_text,
    validate_event,
)
from debounce.queue.wakeups import due_sources, wake
from debounce.types import (
    ApiBudget,
    Claimed,
    ClaimedWorkspace,
    EnqueueBrief,
    EnqueueOutcome,
    JobEvent,
    SyncJob,
)
from debounce.workspaces.budgets import UNLIMITED, budget_params

__all__ = [
    "Failure",
    "claim",
    "enqueue",
    "repair_lines",
    "release",
    "requeue_expired",
    "settle",
    "settle_params",
]

_Q = queries("queue")
_CLAIM = queries("claim")


def job_of(row: Mapping[str, Any] | None) -> SyncJob | None:
    if row is None or row.get("id") is None:
        return None
    return SyncJob.from_row(row)


async def enqueue(
    db: Db,
    events: Sequence[JobEvent],
    *,
    now: datetime | None = None,
    notify_within: float | None = 0.0,
    validated: bool = False,
) -> list[EnqueueBrief]:
    """Debounce a batch of events in one statement and one transaction; answer per event, in
    order, only what a webhook's answer needs: the outcome, the page's active job id and its due
    time (UTC) — not the job's row (read it with :func:`~debounce.queue.operations.get`).

    Events of one page are merged first (the latest in ``events`` order wins; counts add up),
    since one ``ON CONFLICT DO UPDATE`` cannot touch a row twice. All events are validated
    before anything is sent: one bad event rejects the batch. After the statement (on a pool or
    an autocommit connection: after its commit), idle workers are woken with one NOTIFY per
    source that has a job due within ``notify_within`` seconds
    (:func:`~debounce.queue.wakeups.wake`, a second statement, sent only then); ``None``: no
    notification, the caller sends them (the web does, debounced across batches:
    :class:`~debounce.queue.wakeups.Waker`, given the workers' poll interval). ``validated``:
    the caller already ran :func:`validate_event` on each (the web does, before batching).

    Raises:
        ValueError: an event is invalid (:func:`~debounce.queue.checks.validate_event`: empty
            source or page id, negative or non-finite window, payload not a dict), or
            ``notify_within`` is negative or not finite.
    """
    if not events:
        check_now(now)
        return []
    if notify_within is not None:
        check_seconds("notify_within", notify_within)
    rows = await fetch_all(db, _Q["enqueue"], _enqueue_params(events, now, validated))
    briefs = [
        EnqueueBrief(
            EnqueueOutcome(row["outcome"]),
            row["id"],
            row["scheduled_at"].astimezone(UTC) if row["scheduled_at"] is not None else None,
        )
        for row in rows
    ]
    if notify_within is not None:
        await wake(db, due_sources(events, briefs, within=notify_within, now=now))
    return briefs


def _enqueue_params(events: Sequence[JobEvent], now: datetime | None, validated: bool) -> dict[str, Any]:
    """The statement's parameters; each payload serialised (and checked) once: the event's
    ``payload_json`` when the caller made it, else :func:`payload_text`.

    Raises:
        ValueError: an event is invalid (see :func:`enqueue`).
    """
    check_now(now)
    if not validated:
        for event in events:
            validate_event(event, payload=False)
    return {
        "now": now,
        "source_types": [e.source_type for e in events],
        "source_page_ids": [e.source_page_id for e in events],
        "payloads": [
            e.payload_json if e.payload_json is not None else payload_text(e.payload) for e in events
        ],
        "event_ids": [e.event_id for e in events],
        "debounce_seconds": [float(e.debounce_seconds) for e in events],
        "max_wait_seconds": [float(e.max_wait_seconds) for e in events],
        "priorities": [e.priority for e in events],
        "max_attempts": [e.max_attempts for e in events],
        "workspace_ids": [e.workspace_id for e in events],
        "change_kinds": [",".join(e.kinds) for e in events],
    }


async def claim(
    db: Db,
    worker_id: str,
    *,
    limit: int,
    lease_seconds: float,
    source_slots: Mapping[str, int],
    budgets: Mapping[str, ApiBudget] | None = None,
    workspace_concurrency: int = UNLIMITED,
    costs: Mapping[str, float] | None = None,
    now: datetime | None = None,
) -> list[Claimed]:
    """Claim up to ``limit`` due jobs for ``worker_id`` (``FOR UPDATE SKIP LOCKED``), fairly:
    what the claim guarantees is docs/claim.md; the statement is ``sql/queries/claim.sql``, ``claim``.

    Due means ``scheduled_at <= now``. Jobs of a workspace are taken only while it is active,
    not blocked by a 429, holds budget (``budgets``: each source's default
    :class:`~debounce.types.ApiBudget`; a source missing from it is unmetered unless the
    workspace sets its own) for a whole sync (``costs``: requests per sync of each source,
    default 1) and has fewer than ``workspace_concurrency`` jobs in flight; workspaces are
    served in turn, live jobs (priority >= 0) before bulk ones (priority < 0). Each claimed job is
    ``processing`` with ``lease_expires_at = now + lease_seconds``, ``attempts + 1``, a fresh
    ``lease_token`` and ``claimed_revision = revision``; returned highest priority first, then
    oldest ``scheduled_at``, then id (the order the worker starts them in), each with
    what its sync needs of its workspace, read by the same statement (a
    :class:`~debounce.types.ClaimedWorkspace`: status, origin, ids, the still encrypted
    token), or ``None`` for a job of no workspace.
    ``source_slots`` (``{source: n}``, required) says which sources to claim: only those, each
    capped at ``n`` jobs (the slots of the worker each source may fill now: at most its source
    concurrency); a source with ``n <= 0`` is skipped, and with none left nothing is claimed
    (``[]``, no statement run).

    The claim never waits for another statement: a claim that would (PostgreSQL's SKIP LOCKED
    still waits for the locker of a newer version of a row whose updater commits at that very
    moment) gives way after 100 ms (``lock_timeout``, migration 037) and answers ``[]``, its
    transaction rolled back, nothing claimed; the caller claims again. On a connection inside a
    transaction of the caller's, that transaction is then aborted.

    Raises:
        ValueError: empty worker id, ``limit < 1``, ``lease_seconds <= 0``.
    """
    check_text("worker_id", worker_id)
    check_int("limit", limit, minimum=1)
    check_seconds("lease_seconds", lease_seconds, positive=True)
    check_now(now)
    check_int("workspace_concurrency", workspace_concurrency, minimum=1)
    slots = {s: n for s, n in source_slots.items() if n > 0}
    if not slots:
        return []
    params = {
        "now": now,
        "worker_id": worker_id,
        "limit": limit,
        "lease_seconds": float(lease_seconds),
        "sources": list(slots),
        "source_slots": list(slots.values()),
        **budget_params(budgets, costs),
        "workspace_concurrency": workspace_concurrency,
    }
    try:
        rows = await fetch_all(db, _CLAIM["claim"], params)
    except pg_errors.LockNotAvailable:
        return []  # gave way (docstring): the statement it waited for goes on
    claimed = [Claimed(SyncJob.from_row(r), ClaimedWorkspace.from_row(r)) for r in rows]
    claimed.sort(key=lambda c: (-c.job.priority, c.job.scheduled_at, c.job.id))
    return claimed


def _lease_token(job: SyncJob) -> str:
    if job.lease_token is None:
        raise ValueError(f"job {job.id} carries no lease token: pass the job returned by claim()")
    return job.lease_token


@dataclass(frozen=True)
class Failure:
    """A failed sync of a claimed ``job``, as :func:`settle` records it.

    - ``permanent``: ``failed`` at once;
    - ``retry_after`` (seconds, the source's ``Retry-After``): ``pending`` at ``now +
      retry_after`` without spending an attempt;
    - otherwise: ``pending`` after ``backoff_seconds`` (seconds, decided by the worker from
      its backoff schedule, :func:`debounce.infra.retry.backoff_delay`; ``None``: due at once), or
      ``failed`` once ``attempts >= max_attempts``.

    ``error`` is stored in ``last_error`` (truncated to 2000 characters). ``checkpoint`` (a
    JSON object: what the sync had fetched when it yielded, ``debounce.contract.metering``) is kept
    with a job that goes back to ``pending`` and served to its next sync; ``None`` clears it.
    ``keep_place`` (with ``retry_after``: a sync that yielded to its workspace's budget) keeps
    the job's due time, so it stays ahead of jobs due later; the claim's budget check, not the
    due time, holds it back until the bucket can pay.

    Raises (construction):
        ValueError: ``retry_after`` or ``backoff_seconds`` negative or not finite.
    """

    job: SyncJob
    error: str
    retry_after: float | None = None
    permanent: bool = False
    backoff_seconds: float | None = None
    checkpoint: dict[str, Any] | None = None
    keep_place: bool = False

    def __post_init__(self) -> None:
        if self.retry_after is not None:
            check_seconds("retry_after", self.retry_after)
        if self.backoff_seconds is not None:
            check_seconds("backoff_seconds", self.backoff_seconds)


async def settle(
    db: Db,
    *,
    completed: Sequence[SyncJob] = (),
    failed: Sequence[Failure] = (),
    renewed: Sequence[SyncJob] = (),
    lease_seconds: float | None = None,
    now: datetime | None = None,
) -> dict[int, SyncJob]:
    """Record the outcomes of claimed jobs in one statement and one transaction
    (``sql/queries/queue.sql``, ``settle``): the ``completed`` syncs (each ``completed``, or
    ``pending`` again — a follow-up with fresh attempts — when events arrived since the claim),
    the ``failed`` ones (see :class:`Failure`; an event that arrived during a sync still gets
    its follow-up) and the leases ``renewed`` to ``now + lease_seconds`` of syncs still
    running; the line moves once for all of them. At most one
    outcome per claim (job and lease token). Returns ``{job_id: row after the change}`` for
    the claims still held (the lease fence: an outcome whose lease token no longer matches
    changes nothing and is missing).

    Raises:
        ValueError: a job without a lease token, a claim given two outcomes, renewals without
            a positive ``lease_seconds``.
    """
    params = settle_params(completed, failed, renewed, lease_seconds, now)
    if not params["ids"]:
        return {}
    rows = await fetch_all(db, _Q["settle"], params)
    return {r["id"]: SyncJob.from_row(r) for r in rows}


def settle_params(
    completed: Sequence[SyncJob],
    failed: Sequence[Failure],
    renewed: Sequence[SyncJob],
    lease_seconds: float | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The parameters of ``settle`` (see :func:`settle`; ``bench/growth.py`` binds them too).

    Raises:
        ValueError: see :func:`settle`.
    """
    check_now(now)
    if renewed:
        if lease_seconds is None:
            raise ValueError("renewing leases needs lease_seconds")
        check_seconds("lease_seconds", lease_seconds, positive=True)
    jobs = [*completed, *(f.job for f in failed), *renewed]
    claims = [(j.id, _lease_token(j)) for j in jobs]
    if len(set(claims)) != len(claims):
        raise ValueError("a claim has two outcomes in one settle")
    n_done, n_renew = len(completed), len(renewed)
    return {
        "ids": [j.id for j in jobs],
        "lease_tokens": [t for _, t in claims],
        "outcomes": ["completed"] * n_done + ["failed"] * len(failed) + ["renewed"] * n_renew,
        "errors": [None] * n_done
        + [(f.error or "error")[:MAX_ERROR_CHARS] for f in failed]
        + [None] * n_renew,
        "retry_afters": [None] * n_done
        + [float(f.retry_after) if f.retry_after is not None else None for f in failed]
        + [None] * n_renew,
        "permanents": [False] * n_done + [bool(f.permanent) for f in failed] + [False] * n_renew,
        "backoffs": [0.0] * n_done + [float(f.backoff_seconds or 0.0) for f in failed] + [0.0] * n_renew,
        "checkpoints": [None] * n_done
        + [Jsonb(f.checkpoint) if f.checkpoint is not None else None for f in failed]
        + [None] * n_renew,
        "keep_places": [False] * n_done
        + [bool(f.keep_place and f.retry_after is not None) for f in failed]
        + [False] * n_renew,
        "lease_seconds": float(lease_seconds or 0.0),
        "now": now,
    }


async def release(db: Db, jobs: SyncJob | Iterable[SyncJob], *, now: datetime | None = None) -> list[SyncJob]:
    """Give claimed jobs back untouched (shutdown): ``pending`` at their due time, the attempt
    not counted. Returns the rows released (claims no longer held are skipped)."""
    check_now(now)
    batch = [jobs] if isinstance(jobs, SyncJob) else list(jobs)
    tokens = [_lease_token(j) for j in batch]
    if not tokens:
        return []
    rows = await fetch_all(db, _Q["release"], {"lease_tokens": tokens, "now": now})
    return [SyncJob.from_row(r) for r in rows]


async def requeue_expired(db: Db, *, limit: int = 1000, now: datetime | None = None) -> list[SyncJob]:
    """Return jobs whose lease expired (dead workers) to ``pending`` (due now), or ``failed``
    when their attempts are spent. Returns the rows changed (at most ``limit``)."""
    check_int("limit", limit, minimum=1)
    check_now(now)
    rows = await fetch_all(db, _Q["requeue_expired"], {"limit": limit, "now": now})
    return [SyncJob.from_row(r) for r in rows]


async def repair_lines(db: Db, *, workspace_concurrency: int, batch: int = 1000) -> int:
    """Recompute every workspace's place in the claim's line from its jobs (``sql/queries/claim.sql``,
    ``repair_lines``), ``batch`` workspaces per statement; returns how many rows changed.

    The queue's statements move the line only earlier and the claim sets it exactly for the
    workspaces it looks at (docs/claim.md, "Keeping the line"); this is the safety net for rows
    that other statements changed (a hand-written UPDATE, a restore). The worker's pruner runs
    it after each prune. ``workspace_concurrency`` (the workers' K: required, as a smaller one
    than the claim's would clear the flag of every workspace at its limit) clears
    ``at_concurrency_limit`` of a workspace whose jobs in flight are fewer than it.

    Raises:
        ValueError: ``batch < 1`` or ``workspace_concurrency < 1``.
    """
    check_int("batch", batch, minimum=1)
    check_int("workspace_concurrency", workspace_concurrency, minimum=1)
    changed, after = 0, 0
    while True:
        row = await fetch_one(
            db,
            _CLAIM["repair_lines"],
            {"after": after, "batch": batch, "workspace_concurrency": workspace_concurrency},
        )
        if row is None or row["last_id"] is None:
            return changed
        changed += int(row["changed"] or 0)
        after = int(row["last_id"])
