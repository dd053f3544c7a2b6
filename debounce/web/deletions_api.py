"""The admin API of held deletions (:mod:`debounce.documents.deletions`): list the holds, see
what one holds, apply or dismiss it. Every endpoint starts with
:func:`~debounce.web.admin_api.require_admin`."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce.documents import deletions
from debounce.web.admin_api import DIGITS, int_param, require_admin
from debounce.web.errors import ApiError

__all__ = ["get_hold", "list_holds", "resolve_hold"]

log = logging.getLogger("debounce.web")


def _hold_id(request: Request) -> int:
    raw = request.path_params["hold_id"]
    if not DIGITS.fullmatch(raw) or not 0 < int(raw) < 2**63:
        raise ApiError(404, "not_found", f"no hold {raw[:40]!r}")
    return int(raw)


async def list_holds(request: Request) -> Response:
    """``GET /admin/deletions?status=held|applied|dismissed|any&workspace_id=&limit=``: holds
    newest first (default: the open ones), ``{"holds": [...]}`` (each with its ``reason`` and
    ``held``, the documents it holds now)."""
    state = require_admin(request)
    params = request.query_params
    status = params.get("status") or "held"
    limit = int_param(params.get("limit"), "limit", 100)
    assert limit is not None
    try:
        holds = await deletions.list_holds(
            state.db,
            status=None if status == "any" else status,
            workspace_id=int_param(params.get("workspace_id"), "workspace_id"),
            limit=limit,
        )
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"{exc} (or any)") from None
    return JSONResponse({"holds": [h.to_json() for h in holds]})


async def get_hold(request: Request) -> Response:
    """``GET /admin/deletions/{id}``: one hold and the documents it holds now (at most
    ``limit``, default 100); 404 when there is none."""
    state = require_admin(request)
    hold_id = _hold_id(request)
    limit = int_param(request.query_params.get("limit"), "limit", 100)
    assert limit is not None
    hold = await deletions.get(state.db, hold_id)
    if hold is None:
        raise ApiError(404, "not_found", f"no hold {hold_id}")
    documents = await deletions.held_documents(state.db, hold_id, limit=max(1, min(limit, 1000)))
    return JSONResponse({"hold": hold.to_json(), "documents": documents})


async def resolve_hold(request: Request) -> Response:
    """``POST /admin/deletions/{id}/apply`` (delete the held documents) or ``.../dismiss``
    (keep them live): the closed hold; 404 for an unknown action or hold, 409 when the hold is
    not open any more."""
    state = require_admin(request)
    hold_id = _hold_id(request)
    action = request.path_params["action"]
    if action not in deletions.DECISIONS:
        raise ApiError(404, "not_found", f"no action {action[:40]!r}: apply or dismiss")
    try:
        hold = await deletions.resolve(state.db, hold_id, action)
    except deletions.HoldNotOpen as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    log.warning(
        "held deletions %s",
        hold.status,
        extra={"hold_id": hold.id, "workspace_id": hold.workspace_id, "documents": hold.resolved},
    )
    return JSONResponse({"hold": hold.to_json()})
