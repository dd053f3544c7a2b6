"""Deletions held when they look like a mistake (issue 40, point 3; docs/consumers.md,
"Deletions held").

Every deletion of a document goes through one guard, the SQL function
``debounce_delete_documents`` (migration 027) that :meth:`DocumentStore.mark_deleted
<debounce.documents.store.DocumentStore.mark_deleted>` and :meth:`~debounce.documents.store.
DocumentStore.mark_page_deleted` call (the syncers' only ways to delete; a sweep's deletions
are its re-checks' syncs). Per workspace, the deletions of the last ``window_seconds`` — those
applied, those held and the new ones — are compared with ``max_count`` and with ``max_share``
of the workspace's documents (live, plus those deleted in the window). When they exceed
**both**, the new deletions are **held**: the documents stay live (the feed and the read API
show them as they were), each marked by the workspace's open hold, whose reason says what
happened ("212 notion documents answered object_not_found within 10 minutes: 38 % of the
workspace"). The syncs that asked report them as not deleted. An operator then applies the
hold (the documents are deleted: the feed serves their deletions) or dismisses it (they stay
live; a later sync that finds them gone asks the guard again) — :func:`resolve`, from the
admin API (``/admin/deletions``), the CLI (``debounce deletions``) and the dashboard. A
document written again while held (its page is back: a share restored) is released.

Connapse's guard (10 documents and 10 %, issue 40) is the model for the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from debounce.infra.db import Db, connection, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = [
    "DECISIONS",
    "DEFAULT_GUARD",
    "DeletionGuard",
    "Hold",
    "HoldNotOpen",
    "get",
    "held_documents",
    "list_holds",
    "resolve",
]

_Q = queries("deletions")

#: An operator's decisions on a hold: the status it ends in.
DECISIONS = {"apply": "applied", "dismiss": "dismissed"}
#: The statuses a hold can have.
STATUSES = ("held", "applied", "dismissed")


@dataclass(frozen=True)
class DeletionGuard:
    """When deletions are held: more than ``max_count`` documents AND more than ``max_share``
    (0..1) of a workspace's documents deleted within ``window_seconds``
    (``DEBOUNCE_DELETION_GUARD_*``, docs/configuration.md).

    Raises (construction):
        ValueError: a negative count or window, or a share outside 0..1.
    """

    max_count: int = 10
    max_share: float = 0.10
    window_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.max_count < 0 or self.window_seconds < 0:
            raise ValueError("the deletion guard's count and window must be >= 0")
        if not 0.0 <= self.max_share <= 1.0:
            raise ValueError("the deletion guard's share must be between 0 and 1")


#: The defaults (Connapse's: 10 documents and 10 %, within 10 minutes).
DEFAULT_GUARD = DeletionGuard()


@dataclass(frozen=True)
class Hold:
    """One hold: ``status`` ``held`` (open), ``applied`` or ``dismissed``; ``held`` the
    documents it holds now (0 once resolved), ``resolved`` how many the decision deleted or
    kept; times UTC."""

    id: int
    workspace_id: int | None
    workspace_name: str | None
    source_type: str
    status: str
    reason: str
    held: int
    created_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    resolved: int | None

    @classmethod
    def from_row(cls, row: Any) -> Hold:
        """A ``list_holds`` row (``held``: the count of documents it holds)."""
        return cls(
            int(row["id"]),
            row["workspace_id"],
            row.get("workspace_name"),
            row["source_type"],
            row["status"],
            row["reason"],
            int(row.get("held") or 0),
            row["created_at"],
            row["updated_at"],
            row["resolved_at"],
            row["resolved"],
        )

    def to_json(self) -> dict[str, Any]:
        """The hold as the admin API's JSON object (times ISO 8601 UTC)."""
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "workspace_name": self.workspace_name,
            "source": self.source_type,
            "status": self.status,
            "reason": self.reason,
            "held": self.held,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "resolved_at": self.resolved_at.isoformat() if self.resolved_at else None,
            "resolved": self.resolved,
        }


class HoldNotOpen(LookupError):
    """The hold is not there, or an operator resolved it already."""


async def list_holds(
    db: Db, *, status: str | None = "held", workspace_id: int | None = None, limit: int = 100
) -> list[Hold]:
    """Holds newest first, of ``status`` (``None``: any) and ``workspace_id`` (``None``: any).

    Raises:
        ValueError: an unknown status, or ``limit`` outside 1..1000.
    """
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}")
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be between 1 and 1000")
    rows = await fetch_all(
        db, _Q["list_holds"], {"status": status, "workspace_id": workspace_id, "limit": limit}
    )
    return [Hold.from_row(dict(r)) for r in rows]


async def get(db: Db, hold_id: int) -> Hold | None:
    """Hold ``hold_id`` (``None``: none, or its workspace was removed)."""
    row = await fetch_one(db, _Q["get_hold"], {"id": hold_id})
    return Hold.from_row(dict(row)) if row is not None else None


async def held_documents(db: Db, hold_id: int, *, limit: int = 100) -> list[dict[str, Any]]:
    """The documents hold ``hold_id`` holds now (``source_type``, ``document_id``,
    ``source_page_id``, ``title``, ``url``), in id order, at most ``limit``."""
    return [dict(r) for r in await fetch_all(db, _Q["held_documents"], {"id": hold_id, "limit": limit})]


async def resolve(db: Db, hold_id: int, decision: str) -> Hold:
    """Apply (``"apply"``: delete the held documents) or dismiss (``"dismiss"``: keep them
    live) open hold ``hold_id``, in one transaction of two ordered steps (its documents, then
    the hold). Returns the closed hold (``resolved``: the
    documents deleted or kept).

    Raises:
        ValueError: ``decision`` is neither ``apply`` nor ``dismiss``.
        HoldNotOpen: no such hold, or it was resolved already.
    """
    if decision not in DECISIONS:
        raise ValueError("decision must be apply or dismiss")
    async with connection(db) as conn, conn.transaction():  # two ordered steps, one commit
        await fetch_all(conn, _Q["lock_held_documents"], {"id": hold_id})
        row = await fetch_one(conn, _Q["resolve_hold"], {"id": hold_id, "decision": DECISIONS[decision]})
    if row is None:
        raise HoldNotOpen(f"no open hold {hold_id} (GET /admin/deletions lists them)")
    return Hold.from_row({**dict(row), "held": 0, "workspace_name": None})
