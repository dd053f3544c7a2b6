"""Workspaces' rows: connect (an install flow, ``debounce workspaces add``), pause, resume,
revoke, remove, list with their figures, and the 429 block every worker honours. Never the
credentials in what is returned (``token_fingerprint`` stands for the token); reading and
checking those is :mod:`debounce.workspaces.tokens`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.secrets import Keyring, fingerprint
from debounce.infra.sql import queries
from debounce.types import ApiBudget
from debounce.workspaces.budgets import budget_params

__all__ = [
    "WorkspaceBeingRemoved",
    "WorkspaceNotFound",
    "block",
    "finish_removals",
    "list_workspaces",
    "name_and_source",
    "remove",
    "revoke_by_external_id",
    "save",
    "set_status",
]

_Q = queries("workspaces")


class WorkspaceNotFound(LookupError):
    """No workspace has this id."""


class WorkspaceBeingRemoved(RuntimeError):
    """The workspace's removal has begun and not finished (see :func:`remove`)."""


async def save(
    db: Db, keyring: Keyring, *, source_type: str, external_id: str, name: str,
    credentials: dict[str, Any], origin: str = "oauth", enterprise_id: str | None = None,
    bot_user_id: str | None = None,
) -> dict[str, Any]:
    """Connect a workspace (or re-connect it: reactivated, credentials replaced).
    ``credentials`` must hold ``access_token``; it is stored encrypted with ``keyring``'s
    first key. Returns the row (without credentials) and ``inserted`` (a new row, not a
    re-connect).

    Raises:
        KeyError: ``credentials`` has no ``access_token``.
        WorkspaceBeingRemoved: its row is being removed by another process right now.
    """
    params = {
        "source_type": source_type, "external_id": external_id, "enterprise_id": enterprise_id,
        "name": name, "origin": origin, "credentials": keyring.encrypt(credentials),
        "fingerprint": fingerprint(str(credentials["access_token"])), "bot_user_id": bot_user_id}
    row = await fetch_one(db, _Q["save_workspace"], params)
    if row is None:
        # Its earlier row is being removed (a removal a crash interrupted, or one under way):
        # that removal ends first, then the workspace is connected as a new row.
        await finish_removals(db, older_than=0.0)
        row = await fetch_one(db, _Q["save_workspace"], params)
        if row is None:
            raise WorkspaceBeingRemoved(f"{source_type} workspace {external_id} is being "
                                        "removed; connect it again once that has finished")
    return _public(row)


async def set_status(db: Db, workspace_id: int, status: str, error: str | None = None) -> dict[str, Any]:
    """Set a workspace's status (``active``, ``paused``, ``revoked``; ``error``: why it was
    revoked, its last auth error). Returns its row, without credentials.

    Raises:
        WorkspaceNotFound: no such workspace (or its removal has begun).
        ValueError: unknown status.
    """
    if status not in ("active", "paused", "revoked"):
        raise ValueError(f"status must be active, paused or revoked, got {status!r}")
    row = await fetch_one(db, _Q["set_status"], {"id": workspace_id, "status": status, "error": error})
    if row is None:
        raise WorkspaceNotFound(workspace_id)
    return _public(row)


async def revoke_by_external_id(db: Db, source_type: str, external_id: str, error: str) -> list[int]:
    """Mark the workspace ``external_id`` of ``source_type`` revoked; returns the ids changed."""
    rows = await fetch_all(db, _Q["revoke_by_external_id"],
                           {"source_type": source_type, "external_id": external_id, "error": error})
    return [int(r["id"]) for r in rows]


async def remove(db: Db, workspace_id: int) -> int:
    """Disconnect a workspace: its pending jobs are dropped, its documents stay (their
    workspace becomes ``None``), its running syncs finish. Two transactions, in this order
    (``db`` must not be inside a transaction): ``begin_removal`` marks it ``removing`` (from
    then on nothing new refers to it), then ``remove_workspace`` deletes it — the order that
    keeps a removal out of deadlocks (docs/claim.md, "Removing a workspace"). A removal
    interrupted between the two is finished by :func:`finish_removals`. Returns how many
    pending jobs were dropped.

    Raises:
        WorkspaceNotFound: no such workspace.
    """
    begun = await fetch_one(db, _Q["begin_removal"], {"id": workspace_id})
    if begun is None or begun["id"] is None:
        raise WorkspaceNotFound(workspace_id)
    row = await fetch_one(db, _Q["remove_workspace"], {"id": workspace_id})
    if row is None or row["id"] is None:
        return 0       # a connect of the same workspace finished this removal in between
    return int(row["dropped_jobs"])


async def finish_removals(db: Db, *, older_than: float = 0.0) -> list[int]:
    """Finish the removals whose first step is at least ``older_than`` seconds old (a crash
    interrupted them between their two steps; the pruner passes a minute, so a removal under
    way finishes its own second step). Returns the ids removed."""
    done = []
    for r in await fetch_all(db, _Q["removals"], {"older_than": older_than}):
        row = await fetch_one(db, _Q["remove_workspace"], {"id": r["id"]})
        if row is not None and row["id"] is not None:
            done.append(int(row["id"]))
    return done


async def list_workspaces(db: Db, workspace_id: int | None = None, *,
                          budgets: Mapping[str, ApiBudget] | None = None,
                          now: datetime | None = None) -> list[dict[str, Any]]:
    """Every workspace (or one) with its figures: jobs by state, documents, last sync, last
    error, ``credentials_error`` / ``credentials_error_at`` (a worker cannot decrypt its
    stored token: why and since when; ``None``: no such problem), and ``budget``
    ``{"per_minute", "burst", "available", "source_default"}`` (requests; ``budgets``: the
    sources' default budgets, see ``debounce.workspaces.budgets``; ``available`` is the bucket at ``now``,
    UTC, default the database clock). Never the credentials: ``token_fingerprint`` stands for
    the token."""
    rows = await fetch_all(db, _Q["list_workspaces"], {"id": workspace_id, "now": now,
                                                       **budget_params(budgets)})
    out = []
    for r in rows:
        row = _public(r)
        row["budget"] = {"per_minute": row.pop("budget_per_minute"),
                         "burst": row.pop("budget_burst"),
                         "available": round(row.pop("budget_available"), 2),
                         "source_default": not row.pop("budget_overridden")}
        out.append(row)
    return out


async def block(db: Db, workspace_id: int, seconds: float, reason: str) -> dict[str, Any] | None:
    """A source rate-limited this workspace: no worker claims its jobs for ``seconds`` (a
    later block never shortens an earlier one; ``reason``: at most 200 characters are kept).
    Returns ``{"id", "blocked_until", "rate_limit_reason"}`` or ``None`` if it no longer
    exists."""
    row = await fetch_one(db, _Q["block_workspace"], {"id": workspace_id, "seconds": float(seconds),
                                                      "reason": reason[:200]})
    return dict(row) if row else None


def _public(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "credentials"}


async def name_and_source(db: Db, workspace_id: int) -> tuple[str, str] | None:
    """Workspace ``workspace_id``'s name (``"(unnamed)"`` when it has none) and source type, or
    ``None`` when there is no such workspace."""
    row = await fetch_one(db, _Q["workspace_name"], {"id": workspace_id})
    if row is None:
        return None
    return str(row["name"] or "(unnamed)"), str(row["source_type"])
