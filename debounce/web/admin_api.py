"""The admin API: manual re-sync, job inspection and retry, queue stats, handshake tokens.

Every endpoint here starts with :func:`require_admin` (``Authorization: Bearer
$DEBOUNCE_ADMIN_TOKEN``; 401 without it, 503 while no token is configured). Errors are
raised as :class:`~debounce.web.errors.ApiError` and rendered once by the app.
"""

from __future__ import annotations

import hmac
import logging
import re

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce import queue, registry, workspaces
from debounce.web.errors import ApiError
from debounce.web.inputs import source_param
from debounce.web.state import WebState, web_state
from debounce.workspaces import verification

__all__ = [
    "DIGITS",
    "get_job",
    "list_jobs",
    "require_admin",
    "resync",
    "retry_job",
    "stats",
    "verification_token",
]

log = logging.getLogger("debounce.web")

#: A positive bigint written in ASCII digits (``str.isdigit`` also accepts ``²``).
DIGITS = re.compile(r"[0-9]{1,19}")


def require_admin(request: Request) -> WebState:
    """The app's state, if ``request`` carries the admin token.

    Raises:
        ApiError: 503 ``admin_disabled`` when ``DEBOUNCE_ADMIN_TOKEN`` is unset; 401
            ``unauthorized`` when the bearer token is missing or wrong.
    """
    state = web_state(request)
    expected = state.settings.admin_token
    if not expected:
        raise ApiError(
            503,
            "admin_disabled",
            "admin routes are disabled: set DEBOUNCE_ADMIN_TOKEN and send 'Authorization: Bearer <token>'",
        )
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode("utf-8", "replace"), expected.encode()
    ):
        raise ApiError(
            401,
            "unauthorized",
            "missing or wrong admin token (Authorization: Bearer $DEBOUNCE_ADMIN_TOKEN)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return state


def int_param(raw: str | None, name: str, default: int | None = None) -> int | None:
    """An integer query or path parameter: ASCII digits within bigint; ``default`` if absent.

    Raises:
        ApiError: 400 naming the parameter for anything else.
    """
    if raw is None or raw == "":
        return default
    if not DIGITS.fullmatch(raw) or int(raw) > queue.MAX_BIGINT:
        raise ApiError(400, "bad_request", f"{name} must be a whole number between 0 and {queue.MAX_BIGINT}")
    return int(raw)


def _job_id(request: Request) -> int:
    raw = request.path_params["job_id"]
    if not DIGITS.fullmatch(raw) or not 0 < int(raw) <= queue.MAX_BIGINT:
        raise ApiError(404, "not_found", f"no job {raw!r}")
    return int(raw)


async def resync(request: Request) -> Response:
    """``POST /resync/{source}/{page_id}[?workspace_id=N]``: the page's job due now (202 with
    the job). ``workspace_id``: the workspace whose token reads a page not synced yet (default:
    the workspace of its document, else the environment's); 400 if it is not one of the
    source's workspaces."""
    state = require_admin(request)
    source = source_param(state.parsers, request.path_params["source"])
    try:
        page_id = registry.normalize_page_id(source, request.path_params["page_id"])
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    workspace_id = int_param(request.query_params.get("workspace_id"), "workspace_id")
    if workspace_id is not None:
        named = await workspaces.name_and_source(state.db, workspace_id)
        if named is None or named[1] != source:
            raise ApiError(
                400,
                "bad_request",
                f"workspace_id {workspace_id} is not a {source} workspace (GET /workspaces lists them)",
            )
    try:
        job = await queue.resync(
            state.db, source, page_id, max_attempts=state.settings.max_attempts, workspace_id=workspace_id
        )
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    except queue.JobConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    log.info("manual re-sync requested", extra=job.log_fields())
    return JSONResponse({"job": job.to_json()}, status_code=202)


async def list_jobs(request: Request) -> Response:
    """``GET /jobs?status=&source=&page_id=&limit=&cursor=``: jobs newest first."""
    state = require_admin(request)
    params = request.query_params
    limit = int_param(params.get("limit"), "limit", 50)
    assert limit is not None
    try:
        page = await queue.list_jobs(
            state.db,
            status=params.get("status") or None,
            source_type=(source_param(state.parsers, params["source"]) if params.get("source") else None),
            source_page_id=params.get("page_id") or None,
            limit=limit,
            cursor=int_param(params.get("cursor"), "cursor"),
        )
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    return JSONResponse({"jobs": [j.to_json() for j in page.jobs], "next_cursor": page.next_cursor})


async def get_job(request: Request) -> Response:
    """``GET /jobs/{id}``: one job (404 if there is none)."""
    state = require_admin(request)
    job = await queue.get(state.db, _job_id(request))
    if job is None:
        raise ApiError(404, "not_found", f"no job {request.path_params['job_id']!r}")
    return JSONResponse({"job": job.to_json()})


async def retry_job(request: Request) -> Response:
    """``POST /jobs/{id}/retry``: a failed job pending again (404 none, 409 not failed or the
    page already has an active job)."""
    state = require_admin(request)
    job_id = _job_id(request)
    try:
        job = await queue.retry(state.db, job_id)
    except queue.JobNotFound:
        raise ApiError(404, "not_found", f"no job {job_id}") from None
    except queue.JobConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    log.info("manual retry", extra=job.log_fields())
    return JSONResponse({"job": job.to_json()})


async def stats(request: Request) -> Response:
    """``GET /stats``: counts by source and state and the queue's lag (see ``queue.stats``)."""
    state = require_admin(request)
    return JSONResponse(await queue.stats(state.db))


async def verification_token(request: Request) -> Response:
    """``GET /admin/verification-token/{source}``: the newest handshake token received."""
    state = require_admin(request)
    source = source_param(state.parsers, request.path_params["source"])
    latest = await verification.latest(state.db, source)
    if latest is None:
        raise ApiError(404, "not_found", f"no verification token received from {source!r} yet")
    token, received_at = latest
    return JSONResponse({"source": source, "token": token, "received_at": received_at.isoformat()})
