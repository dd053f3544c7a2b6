"""The admin API of workspaces: list and inspect them (status, jobs, documents, API budget,
backfill progress), pause and resume them, start a backfill.

Every endpoint starts with :func:`~debounce.web.admin_api.require_admin`. Errors are raised as
:class:`~debounce.web.errors.ApiError` and rendered once by the app.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce import queue, registry, workspaces
from debounce.documents.store import purge_removed
from debounce.queue import backfills
from debounce.web.admin_api import DIGITS, require_admin
from debounce.web.errors import ApiError
from debounce.web.state import WebState

__all__ = ["backfill", "get_workspace", "list_workspaces", "set_workspace_status"]

log = logging.getLogger("debounce.web")


def _workspace_id(request: Request) -> int:
    raw = request.path_params["workspace_id"]
    if not DIGITS.fullmatch(raw) or not 0 < int(raw) <= queue.MAX_BIGINT:
        raise ApiError(404, "not_found", f"no workspace {raw!r}")
    return int(raw)


def _json(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items() if k != "inserted"}


async def _one(state: WebState, workspace_id: int) -> dict[str, Any]:
    """The workspace with its budget and its latest backfill (``backfill``: progress).

    Raises:
        ApiError: 404, no such workspace.
    """
    rows = await workspaces.list_workspaces(state.db, workspace_id, budgets=state.settings.source_budgets())
    if not rows:
        raise ApiError(404, "not_found", f"no workspace {workspace_id}")
    row = _json(rows[0])
    source = registry.sources().get(row["source_type"])
    progress = await backfills.latest(
        state.db,
        workspace_id,
        per_minute=float(row["budget"]["per_minute"] or 0),
        requests_per_page=source.requests_per_page if source else 1.0,
    )
    row["backfill"] = progress.to_json() if progress else None
    return row


async def list_workspaces(request: Request) -> Response:
    """``GET /workspaces``: every workspace with status, jobs by state, documents, last sync,
    last error, API budget; the token as a fingerprint only."""
    state = require_admin(request)
    rows = await workspaces.list_workspaces(state.db, budgets=state.settings.source_budgets())
    return JSONResponse({"workspaces": [_json(r) for r in rows]})


async def get_workspace(request: Request) -> Response:
    """``GET /workspaces/{id}``: one workspace, with ``budget`` (``per_minute``, ``burst``,
    ``available`` requests now) and ``backfill``: its latest backfill (``kind``
    backfill/reconcile/full_reconcile, ``status``, ``discovered``, ``enqueued``, ``current``,
    ``synced``, ``remaining``, ``eta_seconds``) or ``null``. 404 if there is none."""
    state = require_admin(request)
    return JSONResponse({"workspace": await _one(state, _workspace_id(request))})


async def set_workspace_status(request: Request) -> Response:
    """``POST /workspaces/{id}/pause`` and ``…/resume``: stop or restart syncing it;
    ``POST /workspaces/{id}/backfill``: see :func:`backfill`; ``…/remove``: see
    :func:`remove`."""
    state = require_admin(request)
    action = request.path_params["action"]
    if action == "backfill":
        return await backfill(request)
    if action == "remove":
        return await remove(request)
    status = {"pause": "paused", "resume": "active"}.get(action)
    if status is None:
        raise ApiError(404, "not_found", f"no action {action!r} (pause, resume, backfill or remove)")
    try:
        row = await workspaces.set_status(state.db, _workspace_id(request), status)
    except workspaces.WorkspaceNotFound:
        raise ApiError(404, "not_found", f"no workspace {request.path_params['workspace_id']!r}") from None
    if state.directory is not None:
        await state.directory.refresh(force=True)
    log.info("workspace %s %s", row["id"], row["status"])
    return JSONResponse({"workspace": _json(row)})


async def backfill(request: Request) -> Response:
    """``POST /workspaces/{id}/backfill``: list everything the workspace's token can see
    and sync what is missing or stale, in the bulk lane (a worker does it). 202 with the
    workspace (its ``backfill`` progress); a backfill already running is returned as is
    (idempotent). 404: no such workspace; 409: the workspace is not active."""
    state = require_admin(request)
    workspace_id = _workspace_id(request)
    row = await _one(state, workspace_id)
    if row["status"] != "active":
        raise ApiError(
            409,
            "workspace_not_active",
            f"workspace {workspace_id} is removed: connect it again first"
            if row["status"] == "removed"
            else f"workspace {workspace_id} is {row['status']}: resume it first",
        )
    started = await backfills.request(state.db, workspace_id, "backfill")
    if started is None:
        raise ApiError(409, "workspace_not_active", f"workspace {workspace_id} is removed")
    if started.get("inserted"):
        log.info("backfill %s of workspace %s requested", started["id"], workspace_id)
    return JSONResponse({"workspace": await _one(state, workspace_id)}, status_code=202)


async def remove(request: Request) -> Response:
    """``POST /workspaces/{id}/remove[?purge_documents=true]``: remove the workspace
    (``workspaces.remove``: a tombstone; connecting it again brings it back), cancel its
    pending jobs and backfills, and with ``purge_documents`` mark its documents deleted (one
    deletion each in the change feed), in short batches. 200 with the workspace and
    ``cancelled`` ``{"jobs", "backfills"}`` and ``documents_deleted``; 404: no such workspace;
    400: ``purge_documents`` not true/false."""
    state = require_admin(request)
    workspace_id = _workspace_id(request)
    purge = request.query_params.get("purge_documents", "false").lower()
    if purge not in ("true", "false", "1", "0"):
        raise ApiError(400, "bad_request", "purge_documents must be true or false")
    try:
        row = await workspaces.remove(state.db, workspace_id, purge_documents=purge in ("true", "1"))
    except workspaces.WorkspaceNotFound:
        raise ApiError(404, "not_found", f"no workspace {workspace_id}") from None
    cancelled = await queue.cancel_removed(state.db, workspace_id=workspace_id)
    deleted = await purge_removed(state.db, workspace_id=workspace_id) if purge in ("true", "1") else 0
    if state.directory is not None:
        await state.directory.refresh(force=True)
    log.info(
        "workspace %s removed: %d pending jobs, %d backfills cancelled, %d documents marked deleted",
        workspace_id,
        cancelled["jobs"],
        cancelled["backfills"],
        deleted,
    )
    return JSONResponse({"workspace": _json(row), "cancelled": cancelled, "documents_deleted": deleted})
