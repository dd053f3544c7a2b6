"""What a sync or a backfill page tells of its workspace, recorded for every worker: a 429 blocks
the workspace (no worker claims its jobs until the block ends), a revoked token marks it
``revoked`` (its jobs wait for a re-install), a scope the token lacks is added to its
``missing_scopes`` (its other jobs go on). All are best effort: they answer whether it was
recorded, and the caller decides what the job at hand does."""

from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import workspaces

__all__ = ["block", "missing_scope", "revoke"]

log = logging.getLogger("debounce.worker")


async def block(pool: AsyncConnectionPool[Any], workspace_id: int, seconds: float, reason: str) -> bool:
    """The source rate-limited ``workspace_id`` (``reason``: its own word for it): block it
    for every worker for ``seconds``. Returns ``False`` when that failed (the workspace is
    gone, or the database is away: then only the job or backfill at hand waits); never
    raises for a database error."""
    try:
        blocked = await workspaces.block(pool, workspace_id, seconds, reason)
    except Exception as exc:
        log.warning("could not block workspace %d (%s)", workspace_id, exc.__class__.__name__)
        return False
    return blocked is not None


async def revoke(pool: AsyncConnectionPool[Any], workspace_id: int, error: str) -> bool:
    """The token of ``workspace_id`` no longer works (``error``: what the source said, at
    most 500 characters kept): mark it revoked (its jobs wait until a re-install). Returns
    ``False`` when the workspace is gone.

    Raises:
        Exception: the database's error (the caller's outcome handling logs and goes on).
    """
    try:
        await workspaces.set_status(pool, workspace_id, "revoked", error[:500])
    except workspaces.WorkspaceNotFound:
        return False
    log.error("workspace %d revoked: %s; its jobs wait until it is re-installed", workspace_id, error)
    return True


async def missing_scope(pool: AsyncConnectionPool[Any], workspace_id: int, scope: str) -> bool:
    """The token of ``workspace_id`` lacks ``scope`` (a sync raised
    :class:`~debounce.contract.ScopeMissing`): record it on the workspace. Returns whether it
    was recorded now (``False``: recorded before, the workspace is gone, or the database is
    away); never raises for a database error."""
    try:
        now = await workspaces.add_missing_scope(pool, workspace_id, scope)
    except Exception as exc:
        log.warning(
            "could not record missing scope of workspace %d (%s)", workspace_id, exc.__class__.__name__
        )
        return False
    if now is not None:
        log.error(
            "workspace %d: its token lacks the %s scope (missing: %s); add it to the app and reinstall",
            workspace_id,
            scope,
            ", ".join(now),
        )
    return now is not None
