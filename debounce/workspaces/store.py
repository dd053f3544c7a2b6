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
    "WorkspaceNotFound",
    "block",
    "list_workspaces",
    "name_and_source",
    "remove",
    "revoke_by_external_id",
    "save",
    "set_status",
    "add_missing_scope",
]

_Q = queries("workspaces")


class WorkspaceNotFound(LookupError):
    """No workspace has this id."""


async def save(
    db: Db,
    keyring: Keyring,
    *,
    source_type: str,
    external_id: str,
    name: str,
    credentials: dict[str, Any],
    origin: str = "oauth",
    enterprise_id: str | None = None,
    bot_user_id: str | None = None,
) -> dict[str, Any]:
    """Connect a workspace (or re-connect it: reactivated, credentials replaced; a removed
    workspace comes back as the same row, with its documents and history). ``credentials``
    must hold ``access_token``; it is stored encrypted with ``keyring``'s first key. Returns
    the row (without credentials) and ``inserted`` (a new row, not a re-connect).

    Raises:
        KeyError: ``credentials`` has no ``access_token``.
    """
    params = {
        "source_type": source_type,
        "external_id": external_id,
        "enterprise_id": enterprise_id,
        "name": name,
        "origin": origin,
        "credentials": keyring.encrypt(credentials),
        "fingerprint": fingerprint(str(credentials["access_token"])),
        "bot_user_id": bot_user_id,
    }
    row = await fetch_one(db, _Q["save_workspace"], params)
    assert row is not None  # an upsert returns its row
    return _public(row)


async def set_status(db: Db, workspace_id: int, status: str, error: str | None = None) -> dict[str, Any]:
    """Set a workspace's status (``active``, ``paused``, ``revoked``; ``error``: why it was
    revoked, its last auth error). Returns its row, without credentials.

    Raises:
        WorkspaceNotFound: no such workspace (or it is removed: connect it again instead).
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
    rows = await fetch_all(
        db,
        _Q["revoke_by_external_id"],
        {"source_type": source_type, "external_id": external_id, "error": error},
    )
    return [int(r["id"]) for r in rows]


async def remove(db: Db, workspace_id: int, *, purge_documents: bool = False) -> dict[str, Any]:
    """Remove a workspace, one statement that changes its row only (docs/claim.md, "Removing
    a workspace"): status ``removed``, its credentials erased, its name and ids kept. From
    then on the claim, the web's routes and the backfills pass it by; its running syncs
    finish, and their documents keep their workspace. Its pending jobs and running backfills
    are finished in batches by ``queue.cancel_removed`` (the caller, or the pruner); with
    ``purge_documents`` its documents are marked deleted in batches too
    (``documents.purge_removed``). Connecting it again (:func:`save`) revives the same row.
    Idempotent. Returns its row (without credentials) with ``pending_jobs``, how many of its
    jobs were pending then.

    Raises:
        WorkspaceNotFound: no such workspace.
    """
    row = await fetch_one(db, _Q["remove"], {"id": workspace_id, "purge_documents": purge_documents})
    if row is None:
        raise WorkspaceNotFound(workspace_id)
    return _public(row)


async def list_workspaces(
    db: Db,
    workspace_id: int | None = None,
    *,
    budgets: Mapping[str, ApiBudget] | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Every workspace (or one) with its figures: jobs by state, documents, last sync, last
    error, ``credentials_error`` / ``credentials_error_at`` (a worker cannot decrypt its
    stored token: why and since when; ``None``: no such problem), ``missing_scopes`` /
    ``missing_scopes_at`` (scopes its token was refused, sorted; ``[]``: none), and ``budget``
    ``{"per_minute", "burst", "available", "source_default"}`` (requests; ``budgets``: the
    sources' default budgets, see ``debounce.workspaces.budgets``; ``available`` is the bucket at ``now``,
    UTC, default the database clock). Never the credentials: ``token_fingerprint`` stands for
    the token."""
    rows = await fetch_all(
        db, _Q["list_workspaces"], {"id": workspace_id, "now": now, **budget_params(budgets)}
    )
    out = []
    for r in rows:
        row = _public(r)
        row["budget"] = {
            "per_minute": row.pop("budget_per_minute"),
            "burst": row.pop("budget_burst"),
            "available": round(row.pop("budget_available"), 2),
            "source_default": not row.pop("budget_overridden"),
        }
        out.append(row)
    return out


async def block(db: Db, workspace_id: int, seconds: float, reason: str) -> dict[str, Any] | None:
    """A source rate-limited this workspace: no worker claims its jobs for ``seconds`` (a
    later block never shortens an earlier one; ``reason``: at most 200 characters are kept).
    Returns ``{"id", "blocked_until", "rate_limit_reason"}`` or ``None`` if it no longer
    exists."""
    row = await fetch_one(
        db, _Q["block_workspace"], {"id": workspace_id, "seconds": float(seconds), "reason": reason[:200]}
    )
    return dict(row) if row else None


async def add_missing_scope(db: Db, workspace_id: int, scope: str) -> list[str] | None:
    """The token of ``workspace_id`` lacks ``scope`` (a sync was refused it): record it in the
    workspace's ``missing_scopes`` (cleared by a re-install or a new environment token).
    Returns the missing scopes now, or ``None`` when the workspace is gone or the scope was
    recorded already."""
    row = await fetch_one(db, _Q["add_missing_scope"], {"id": workspace_id, "scope": scope[:100]})
    return list(row["missing_scopes"]) if row else None


def _public(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "credentials"}


async def name_and_source(db: Db, workspace_id: int) -> tuple[str, str] | None:
    """Workspace ``workspace_id``'s name (``"(unnamed)"`` when it has none) and source type, or
    ``None`` when there is no such workspace."""
    row = await fetch_one(db, _Q["workspace_name"], {"id": workspace_id})
    if row is None:
        return None
    return str(row["name"] or "(unnamed)"), str(row["source_type"])
