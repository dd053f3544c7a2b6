"""Backfill and reconciliation, the database side: backfills (``sql/queries/backfills.sql``,
migration 009) and the bulk jobs they enqueue.

A *backfill* walks what a workspace's token can see, one backfill page at a time
(``debounce.contract.backfill``), and enqueues a **bulk job** (priority :data:`BULK_PRIORITY`,
due at once, no debounce window) for each page whose document is missing or older than the
listing says; the fair claim takes bulk jobs after every live one. Its cursor and counts are
rows here, so it survives a deploy; a lease gives it to one worker at a time.

Kinds: ``backfill`` (the whole list: on connect, ``debounce backfill``,
``POST /workspaces/{id}/backfill``), ``reconcile`` (newest first, down to the last reconciliation's
watermark: catches lost webhooks cheaply), ``full_reconcile`` (the whole list on a longer
period: a document no whole list shows any more is re-checked once, which marks it deleted
when the source says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from debounce.contract import BackfillItem
from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = [
    "BULK_PRIORITY",
    "KINDS",
    "Progress",
    "defer",
    "fail",
    "finish",
    "latest",
    "lease",
    "record_page",
    "release",
    "request",
    "schedule_backfills",
    "schedule_reconciliations",
    "set_reconcile",
]

_Q = queries("backfills")

#: The priority of bulk jobs (backfill, reconciliation): below every live job (>= 0).
BULK_PRIORITY = -10
KINDS = ("backfill", "reconcile", "full_reconcile")


async def request(db: Db, workspace_id: int, kind: str = "backfill") -> dict[str, Any] | None:
    """Start a backfill of ``kind`` for ``workspace_id`` (a backfill replaces a running
    reconciliation); a backfill already running is returned instead (``inserted``
    False). ``None``: no such workspace, or it is removed.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "backfill":
        await fetch_all(db, _Q["cancel_reconciliations"], {"workspace_id": workspace_id})
    return await fetch_one(db, _Q["request_backfill"], {"workspace_id": workspace_id, "kind": kind})


async def schedule_reconciliations(
    db: Db,
    sources: Sequence[str],
    default_on: Sequence[str],
    *,
    interval: float,
    full_interval: float,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Start the reconciliations that are due (``sql/queries/backfills.sql``,
    ``schedule_reconciliations``; intervals in seconds). Returns the rows started."""
    return await fetch_all(
        db,
        _Q["schedule_reconciliations"],
        {
            "sources": list(sources),
            "default_on": list(default_on),
            "interval": float(interval),
            "full_interval": float(full_interval),
            "now": now,
        },
    )


async def schedule_backfills(db: Db, sources: Sequence[str]) -> list[dict[str, Any]]:
    """Start a backfill for each active workspace of ``sources`` that never had an
    backfill (a workspace just connected). Returns the rows started."""
    return await fetch_all(db, _Q["schedule_backfills"], {"sources": list(sources)})


async def lease(
    db: Db, owner: str, sources: Sequence[str], lease_seconds: float, *, now: datetime | None = None
) -> dict[str, Any] | None:
    """Take one running backfill for ``owner`` (those of kind backfill first), or ``None``."""
    return await fetch_one(
        db,
        _Q["lease_backfill"],
        {"owner": owner, "sources": list(sources), "lease_seconds": float(lease_seconds), "now": now},
    )


async def record_page(
    db: Db,
    backfill_id: int,
    owner: str,
    items: Sequence[BackfillItem],
    cursor: str | None,
    *,
    lease_seconds: float,
    max_attempts: int,
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """Record one backfill page (enqueue what is stale, move the cursor), in one statement.
    Returns the backfill row (with ``page_enqueued``), or ``None`` when ``owner`` lost
    the lease or the workspace is removed (nothing written)."""
    return await fetch_one(
        db,
        _Q["record_backfill_page"],
        {
            "id": backfill_id,
            "owner": owner,
            "page_ids": [i.source_page_id for i in items],
            "edited_ats": [i.edited_at for i in items],
            "payloads": [Jsonb(i.payload) for i in items],
            "cursor": cursor,
            "priority": BULK_PRIORITY,
            "max_attempts": max_attempts,
            "lease_seconds": float(lease_seconds),
            "now": now,
        },
    )


async def finish(
    db: Db, backfill_id: int, owner: str, *, max_attempts: int, now: datetime | None = None
) -> dict[str, Any] | None:
    """Complete a backfill (re-checks of vanished documents after a whole list). Returns its
    row, or ``None`` when ``owner`` lost the lease or the workspace is removed (nothing
    written)."""
    return await fetch_one(
        db,
        _Q["finish_backfill"],
        {
            "id": backfill_id,
            "owner": owner,
            "priority": BULK_PRIORITY,
            "max_attempts": max_attempts,
            "now": now,
        },
    )


async def defer(
    db: Db, backfill_id: int, owner: str, seconds: float, error: str, *, now: datetime | None = None
) -> dict[str, Any] | None:
    """Free the lease; the backfill continues from its cursor in ``seconds``."""
    return await fetch_one(
        db,
        _Q["defer_backfill"],
        {"id": backfill_id, "owner": owner, "seconds": float(seconds), "error": error[:2000], "now": now},
    )


async def fail(db: Db, backfill_id: int, owner: str, error: str) -> dict[str, Any] | None:
    """Give up a backfill the source refuses (``failed``, ``error`` kept)."""
    return await fetch_one(
        db, _Q["fail_backfill"], {"id": backfill_id, "owner": owner, "error": error[:2000]}
    )


async def release(db: Db, owner: str) -> int:
    """Free every lease ``owner`` holds (shutdown). Returns how many."""
    return len(await fetch_all(db, _Q["release_backfills"], {"owner": owner}))


async def set_reconcile(db: Db, workspace_id: int, on: bool | None) -> dict[str, Any] | None:
    """Reconciliation of a workspace on, off, or (``None``) its source's default."""
    return await fetch_one(db, _Q["set_reconcile"], {"id": workspace_id, "reconcile": on})


@dataclass(frozen=True)
class Progress:
    """A workspace's latest backfill: ``kind``, ``status``, the counts (items
    ``discovered``, bulk jobs ``enqueued``, ``current`` and ``active`` items skipped,
    ``rechecks``), ``remaining`` (the workspace's bulk jobs not finished), ``synced``
    (enqueued and finished), ``eta_seconds`` (``remaining`` × the source's requests per page ÷
    the budget's rate; ``None`` when unmetered or nothing remains), times as ISO 8601 UTC."""

    id: int
    kind: str
    status: str
    discovered: int
    enqueued: int
    current: int
    active: int
    rechecks: int
    remaining: int
    synced: int
    listing_pages: int
    eta_seconds: float | None
    started_at: str
    finished_at: str | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        """The fields as a dict."""
        return dict(self.__dict__)


async def latest(
    db: Db, workspace_id: int, *, per_minute: float = 0.0, requests_per_page: float = 1.0
) -> Progress | None:
    """The latest backfill of ``workspace_id`` with its progress (``per_minute``: the
    workspace's budget, for the ETA). ``None``: it never had one."""
    row = await fetch_one(db, _Q["latest_backfill"], {"workspace_id": workspace_id})
    if row is None:
        return None
    remaining = int(row["remaining"])
    eta = remaining * requests_per_page / (per_minute / 60.0) if per_minute > 0 and remaining else None
    return Progress(
        id=row["id"],
        kind=row["kind"],
        status=row["status"],
        discovered=row["discovered"],
        enqueued=row["enqueued"],
        current=row["current"],
        active=row["active"],
        rechecks=row["rechecks"],
        remaining=remaining,
        synced=max(0, row["enqueued"] + row["rechecks"] - remaining),
        listing_pages=row["listing_pages"],
        eta_seconds=round(eta, 1) if eta else None,
        started_at=row["started_at"].isoformat(),
        finished_at=row["finished_at"].isoformat() if row["finished_at"] else None,
        error=row["error"],
    )
