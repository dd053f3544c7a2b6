"""One-job forms of the queue's batch statements, for tests: the product enqueues, completes and
fails in batches (``queue.enqueue``, ``queue.settle``) and finds a page's
job with ``list_jobs``; these call exactly those with one item. :func:`enqueue_events` is the
web's ``enqueue`` followed by the job rows (``queue.get``, the inspection read) for tests
that look at more than the webhook's answer. And the documents of one page, as a test inspects
them."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from debounce import queue
from debounce.documents.store import DocumentStore
from debounce.infra.db import Db, execute, fetch_all
from debounce.infra.retry import DEFAULT_BACKOFF_SECONDS, backoff_delay
from debounce.types import EnqueueOutcome, JobEvent, JobStatus, SyncJob


@dataclass(frozen=True)
class EnqueueResult:
    """What enqueuing did with one event: the outcome and the page's active job, read right
    after the statement (``None`` only for a duplicate whose page has no active job)."""

    outcome: EnqueueOutcome
    job: SyncJob | None


async def enqueue_events(
    db: Db, events: Sequence[JobEvent], *, now: datetime | None = None, notify_within: float = 0.0
) -> list[EnqueueResult]:
    """``queue.enqueue`` (the web's statement), then each answer's job row read with
    ``queue.get``: one result per event, in order."""
    briefs = await queue.enqueue(db, events, now=now, notify_within=notify_within)
    rows = {i: await queue.get(db, i) for i in {b.job_id for b in briefs if b.job_id is not None}}
    return [EnqueueResult(b.outcome, rows[b.job_id] if b.job_id is not None else None) for b in briefs]


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
    """:func:`enqueue_events` with one event."""
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
    (result,) = await enqueue_events(db, [event], now=now)
    return result


async def complete(db: Db, job: SyncJob, *, now: datetime | None = None) -> SyncJob | None:
    """``queue.settle`` of one completion: the row after the change, ``None`` if lost."""
    return (await queue.settle(db, completed=[job], now=now)).get(job.id)


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
    """``queue.settle`` of one failure, its backoff from ``backoff_seconds`` (the
    schedule, jittered) as the worker decides it."""
    delay = backoff_delay(job.attempts, backoff_seconds, jitter=jitter, rng=rng)
    failure = queue.Failure(job, error, retry_after=retry_after, permanent=permanent, backoff_seconds=delay)
    return (await queue.settle(db, failed=[failure], now=now)).get(job.id)


async def active_for_page(db: Db, source_type: str, source_page_id: str) -> SyncJob | None:
    """The page's active (pending or processing) job, or ``None`` (``queue.list_jobs``)."""
    page = await queue.list_jobs(db, source_type=source_type, source_page_id=source_page_id)
    active = [j for j in page.jobs if j.status in (JobStatus.PENDING, JobStatus.PROCESSING)]
    return active[0] if active else None


async def page_documents(store: DocumentStore, source_type: str, source_page_id: str) -> list[dict[str, Any]]:
    """Every document of one job key (deleted ones too), by ``document_id``."""
    rows = await fetch_all(
        store.db,  # test-only SQL: the product reads documents one by one or by listing
        "select * from documents where source_type = %(s)s and source_page_id = %(p)s order by document_id",
        {"s": source_type, "p": source_page_id},
    )
    return [dict(r) for r in rows]


#: A sync that ended without the queue (test-only SQL): the job moves out of ``sync_jobs`` into
#: ``finished_jobs`` as completed, as ``settle`` moves it (migration 034). Parameter: its id
#: (NULL: every active job).
MARK_COMPLETED = (
    "with g as (delete from sync_jobs where %(id)s::bigint is null or id = %(id)s::bigint returning *) "
    "insert into finished_jobs select g.id, g.source_type, g.source_page_id, 'completed', g.payload, "
    "g.event_id, g.event_count, g.priority, g.attempts, g.max_attempts, g.scheduled_at, "
    "g.first_event_at, g.max_wait_until, null, null, null, null, g.revision, g.claimed_revision, "
    "g.last_error, g.created_at, now(), now(), g.workspace_id, null, g.change_kinds from g"
)


async def mark_completed(db: Db, job_id: int | None) -> None:
    """Move job ``job_id`` (``None``: every active job) to ``finished_jobs`` as completed now,
    as a sync that ended outside the queue."""
    await execute(db, MARK_COMPLETED, {"id": job_id})
