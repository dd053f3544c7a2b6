"""The operator's dashboard under ``/admin/``: server-rendered pages (Jinja2, no JavaScript).

Screens: overview (the queue at a glance), sources, one workspace, jobs (filters, paging) and
one job, documents (filter, title search) and one document (rendered and raw Markdown).
Actions (POST, CSRF-checked, then a redirect back with a flash message): retry a failed job,
re-sync a page, backfill a workspace, apply or dismiss held deletions (:mod:`.holds`).
Sign-in, the session cookie and CSRF are :mod:`.auth`; templates, error pages and headers
:mod:`.render`; the reads :mod:`.data` and :mod:`.workspaces`. docs/dashboard.md shows each screen.
The screens read ``WebState.read_db`` (the replica when ``DATABASE_REPLICA_URL`` is set: a page
shown right after an action may lag it by the replica's lag); the actions write to the primary.

Bad parameters are 4xx pages, never 500s: ids and cursors must be ASCII digits within bigint,
text filters storable and at most ``queue.MAX_KEY_BYTES`` bytes, states known; a workspace
filter names a workspace that exists (else 404).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from debounce import queue, registry, workspaces
from debounce.config import Settings
from debounce.documents import audiences, deletions
from debounce.queue import backfills
from debounce.queue.checks import check_text
from debounce.types import JobStatus
from debounce.web.admin_api import int_param
from debounce.web.dashboard import data, holds
from debounce.web.dashboard import subscriptions as subscription_screens
from debounce.web.dashboard import workspaces as ws_data
from debounce.web.dashboard.auth import (
    DashboardSessions,
    checked_form,
    login,
    login_form,
    logout,
    safe_next,
    signed_in,
)
from debounce.web.dashboard.render import (
    LoginRequired,
    SecurityHeaders,
    base_path,
    flash,
    html_error,
    html_server_error,
    login_required,
    page,
)
from debounce.web.errors import ApiError, ErrorBoundary
from debounce.web.state import WebState

__all__ = ["PAGE_SIZE", "mount"]

log = logging.getLogger("debounce.web")

#: Rows per page of the job and document lists.
PAGE_SIZE = 50
#: The states the document list filters by: live, or marked deleted.
DOCUMENT_STATES = ("live", "deleted")
#: The newest jobs a workspace's page lists (the whole list is one link away).
RECENT_JOBS = 10


def _text_param(request: Request, name: str) -> str | None:
    """A text filter from the query string, stripped; ``None`` when absent or blank.

    Raises:
        ApiError: 400 when it cannot be stored or is longer than ``queue.MAX_KEY_BYTES``.
    """
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        return check_text(name, raw, max_bytes=queue.MAX_KEY_BYTES)
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None


def _row_id(raw: str) -> int | None:
    """``raw`` as a row id (ASCII digits, 1 to the largest bigint), else ``None``."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        return None
    value = int(raw)
    return value if 0 < value <= queue.MAX_BIGINT else None


def _path_id(request: Request, name: str, what: str) -> int:
    """A row id from the path: ASCII digits within bigint, else 404."""
    raw = str(request.path_params[name])
    value = _row_id(raw)
    if value is None:
        raise ApiError(404, "not_found", f"no {what} {raw!r}")
    return value


@dataclass(frozen=True)
class _Workspace:
    """The workspace a list is filtered by: its id, name and source."""

    id: int
    name: str
    source_type: str


async def _workspace_param(request: Request, state: WebState) -> _Workspace | None:
    """The ``workspace`` filter of the query string (``None``: absent or blank).

    Raises:
        ApiError: 400 when it is not a workspace id (digits, 1 or more, within bigint); 404
            when no workspace has that id.
    """
    raw = request.query_params.get("workspace", "").strip()
    if not raw:
        return None
    value = _row_id(raw)
    if value is None:
        raise ApiError(
            400,
            "bad_request",
            f"workspace must be a workspace's numeric id (1 or "
            f"more: the id column of `debounce workspaces list`), got {raw[:40]!r}",
        )
    found = await data.workspace_name(state.read_db, value)
    if found is None:
        raise ApiError(
            404,
            "not_found",
            f"no workspace {value} (the Sources page and `debounce workspaces list` show the connected ones)",
        )
    return _Workspace(value, *found)


_SECONDS = re.compile(r"[0-9]{1,10}(\.[0-9]{1,6})?")


def _seconds_param(request: Request, name: str) -> float | None:
    """A positive number of seconds from the query string (``None``: absent or blank).

    Raises:
        ApiError: 400 for anything else.
    """
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    if not _SECONDS.fullmatch(raw) or float(raw) <= 0:
        raise ApiError(400, "bad_request", f"{name} must be a number of seconds above 0, got {raw[:40]!r}")
    return float(raw)


def _source_names(state: WebState) -> list[str]:
    return sorted(state.parsers)


async def overview(request: Request) -> Response:
    """``GET /admin/``: jobs by state and source, the oldest due age, what finished in the last
    hour (completed, failed, end-to-end lag p50/p95/max), and the deletions held for an
    operator (:mod:`.holds`)."""
    state = signed_in(request)
    view = await data.overview(state.read_db, _source_names(state))
    held = await deletions.list_holds(state.read_db)
    return page(
        request, "overview.html", {"nav": "overview", "o": view, "holds": held, "here": request.url.path}
    )


async def sources(request: Request) -> Response:
    """``GET /admin/sources``: each registered source, whether its signing secret is set, and
    per connected workspace (or "default", the environment's, when it has none) its ids, state,
    jobs by state (completed: within the job retention), last sync, last error, rate budget and
    backfill."""
    state = signed_in(request)
    registered = registry.sources()
    configured: dict[str, tuple[bool, str | None]] = {}
    for name in _source_names(state):
        source = registered.get(name)
        if source is None or source.secret_setting is None:
            configured[name] = (True, None)
        else:
            configured[name] = (source.signing_secret(state.settings) is not None, source.secret_env())
    retention = state.settings.job_retention_seconds
    views = await ws_data.source_views(
        state.read_db, configured, budgets=state.settings.source_budgets(), completed_window_seconds=retention
    )
    return page(request, "sources.html", {"nav": "sources", "sources": views})


async def jobs(request: Request) -> Response:
    """``GET /admin/jobs?status=&source=&page_id=&workspace=&finished_within=&cursor=``: jobs
    newest first, 50 a page, with their workspace; ``finished_within`` (seconds) keeps the jobs
    finished in that window, as the Sources page counts "completed"."""
    state = signed_in(request)
    params = request.query_params
    status = params.get("status", "").strip() or None
    if status is not None and status not in {s.value for s in JobStatus}:
        raise ApiError(
            400,
            "bad_request",
            f"unknown job status {status!r} (expected one of: {', '.join(s.value for s in JobStatus)})",
        )
    source = _text_param(request, "source")
    page_id = _text_param(request, "page_id")
    within = _seconds_param(request, "finished_within")
    cursor = int_param(params.get("cursor"), "cursor")
    if cursor == 0:
        raise ApiError(400, "bad_request", "cursor must be a job id (1 or more)")
    workspace = await _workspace_param(request, state)
    result = await data.list_jobs(
        state.read_db,
        status=status,
        source_type=source,
        source_page_id=page_id,
        workspace_id=workspace.id if workspace else None,
        finished_within=within,
        limit=PAGE_SIZE,
        cursor=cursor,
    )
    filters = {
        "status": status or "",
        "source": source or "",
        "page_id": page_id or "",
        "workspace": str(workspace.id) if workspace else "",
        "finished_within": params.get("finished_within", "").strip() if within else "",
    }
    return page(
        request,
        "jobs.html",
        {
            "nav": "jobs",
            "jobs": result.jobs,
            "workspace_names": result.workspace_names,
            "next_cursor": result.next_cursor,
            "filters": filters,
            "workspace": workspace,
            "finished_within": within,
            "query": urlencode({k: v for k, v in filters.items() if v}),
            "paged": cursor is not None,
            "states": [s.value for s in JobStatus],
            "source_names": _source_names(state),
            "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        },
    )


async def job(request: Request) -> Response:
    """``GET /admin/jobs/{id}``: one job (its workspace by name, payload, attempts, last error,
    event count, revision, due and lease times), its page's documents, the retry and re-sync
    buttons."""
    state = signed_in(request)
    job_id = _path_id(request, "job_id", "job")
    found = await queue.get(state.read_db, job_id)
    if found is None:
        raise ApiError(404, "not_found", f"no job {job_id}")
    documents = await data.page_documents(state.read_db, found.source_type, found.source_page_id)
    owner = (
        await workspaces.list_workspaces(state.read_db, found.workspace_id)
        if found.workspace_id is not None
        else []
    )
    return page(
        request,
        "job.html",
        {
            "nav": "jobs",
            "job": found,
            "documents": documents,
            "workspace": owner[0] if owner else None,
            "here": request.url.path,
        },
    )


async def retry(request: Request) -> Response:
    """``POST /admin/jobs/{id}/retry`` (``csrf_token``, ``back``): a failed job pending again,
    due now; back to ``back`` (default: the job) with a message saying what happened."""
    state = signed_in(request)
    job_id = _path_id(request, "job_id", "job")
    form = await checked_form(request)
    back = safe_next(request, form.get("back") or f"{base_path(request)}/jobs/{job_id}")
    try:
        done = await queue.retry(state.db, job_id)
    except queue.JobNotFound:
        raise ApiError(404, "not_found", f"no job {job_id}") from None
    except queue.JobConflict as exc:
        flash(request, "error", f"Not retried: {exc}.")
    else:
        log.info("manual retry (dashboard)", extra=done.log_fields())
        flash(
            request,
            "ok",
            f"Job {done.id} ({done.source_type}/{done.source_page_id}) is pending again, due now.",
        )
    return RedirectResponse(back, status_code=303)


async def resync(request: Request) -> Response:
    """``POST /admin/resync`` (``source``, ``page_id``, ``csrf_token``, ``back``): the page's
    job due now (a new one, or the active one moved forward); back to ``back`` (default: the
    job) with a message."""
    state = signed_in(request)
    form = await checked_form(request)
    source = form.get("source", "").strip()
    if source not in state.parsers:
        raise ApiError(400, "unknown_source", f"no source named {source!r}")
    raw_page = form.get("page_id", "")
    try:
        page_id = registry.normalize_page_id(source, raw_page)
        done = await queue.resync(state.db, source, page_id, max_attempts=state.settings.max_attempts)
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    except queue.JobConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    log.info("manual re-sync requested (dashboard)", extra=done.log_fields())
    flash(request, "ok", f"Re-sync of {source}/{page_id} requested: job {done.id} is due now.")
    default = f"{base_path(request)}/jobs/{done.id}"
    return RedirectResponse(safe_next(request, form.get("back") or default), status_code=303)


async def workspace(request: Request) -> Response:
    """``GET /admin/workspaces/{id}``: one connected workspace — source, ids, status, jobs by
    state (each linked to the job list filtered by the workspace and that state), documents,
    API budget (rate, burst, available now, rate limit), latest backfill or reconciliation, errors,
    last sync, its newest jobs — and its backfill button."""
    state = signed_in(request)
    workspace_id = _path_id(request, "workspace_id", "workspace")
    view = await ws_data.workspace_view(
        state.read_db,
        workspace_id,
        budgets=state.settings.source_budgets(),
        completed_window_seconds=state.settings.job_retention_seconds,
    )
    if view is None:
        raise ApiError(
            404,
            "not_found",
            f"no workspace {workspace_id} (the Sources page and "
            "`debounce workspaces list` show the connected ones)",
        )
    recent = await data.list_jobs(state.read_db, workspace_id=workspace_id, limit=RECENT_JOBS)
    return page(
        request,
        "workspace.html",
        {
            "nav": "sources",
            "w": view,
            "jobs": recent.jobs,
            "more_jobs": recent.next_cursor,
            "window": state.settings.job_retention_seconds,
            "here": request.url.path,
        },
    )


async def backfill(request: Request) -> Response:
    """``POST /admin/workspaces/{id}/backfill`` (``csrf_token``, ``back``): start a backfill of
    the workspace (idempotent: one already running stays); back to ``back`` (default: the
    sources screen)."""
    state = signed_in(request)
    workspace_id = _path_id(request, "workspace_id", "workspace")
    form = await checked_form(request)
    back = safe_next(request, form.get("back") or f"{base_path(request)}/sources")
    rows = await workspaces.list_workspaces(state.db, workspace_id)
    if not rows:
        raise ApiError(404, "not_found", f"no workspace {workspace_id}")
    named = f"{workspace_id} ({rows[0]['external_id'] or 'source id not learned yet'})"
    if rows[0]["status"] == "removed":
        flash(request, "error", f"Workspace {named} is removed: connect it again first.")
    elif rows[0]["status"] != "active":
        flash(request, "error", f"Workspace {named} is {rows[0]['status']}: resume it first.")
    else:
        started = await backfills.request(state.db, workspace_id, "backfill")
        if started is None:
            raise ApiError(404, "not_found", f"workspace {workspace_id} is removed")
        fresh = bool(started.get("inserted"))
        log.info(
            "backfill of workspace %d %s (dashboard)",
            workspace_id,
            "requested" if fresh else "already running",
        )
        blocked = rows[0].get("credentials_error")
        flash(
            request,
            "error" if blocked else "ok",
            f"Backfill of workspace {named} {'started' if fresh else 'already running'}: "
            + (
                f"it waits, as the workspace's jobs do, because {blocked}."
                if blocked
                else "a worker lists the workspace and syncs what is missing."
            ),
        )
    return RedirectResponse(back, status_code=303)


async def documents(request: Request) -> Response:
    """``GET /admin/documents?source=&workspace=&state=&q=&cursor=``: documents newest first,
    50 a page, of one source, of one workspace, live or marked deleted, and with a title
    containing ``q`` (case-insensitive)."""
    state = signed_in(request)
    source = _text_param(request, "source")
    title = _text_param(request, "q")
    shown = request.query_params.get("state", "").strip() or None
    if shown not in (None, *DOCUMENT_STATES):
        raise ApiError(
            400,
            "bad_request",
            f"unknown document state {shown[:40]!r} (expected one of: {', '.join(DOCUMENT_STATES)})",
        )
    cursor = int_param(request.query_params.get("cursor"), "cursor")
    if cursor == 0:
        raise ApiError(400, "bad_request", "cursor must be a document id (1 or more)")
    workspace = await _workspace_param(request, state)
    result = await data.list_documents(
        state.read_db,
        source_type=source,
        title=title,
        cursor=cursor,
        limit=PAGE_SIZE,
        state=shown,
        workspace_id=workspace.id if workspace else None,
    )
    filters = {
        "source": source or "",
        "workspace": str(workspace.id) if workspace else "",
        "state": shown or "",
        "q": title or "",
    }
    return page(
        request,
        "documents.html",
        {
            "nav": "documents",
            "documents": result.documents,
            "next_cursor": result.next_cursor,
            "filters": filters,
            "workspace": workspace,
            "paged": cursor is not None,
            "query": urlencode({k: v for k, v in filters.items() if v}),
            "source_names": _source_names(state),
            "document_states": DOCUMENT_STATES,
        },
    )


async def document(request: Request) -> Response:
    """``GET /admin/documents/{id}``: one document, its Markdown rendered (raw HTML in it shown
    as text) and raw, its metadata, and a re-sync button for its page."""
    state = signed_in(request)
    doc_id = _path_id(request, "doc_id", "document")
    doc = await data.get_document(state.read_db, doc_id)
    if doc is None:
        raise ApiError(404, "not_found", f"no document {doc_id}")
    rendered = Markup(data.render_markdown(doc["content"]))  # html disabled: safe
    return page(
        request,
        "document.html",
        {
            "nav": "documents",
            "doc": doc,
            "rendered": rendered,
            "audience": audiences.describe(doc),
            "here": request.url.path,
        },
    )


ROUTES = [
    Route("/", overview, methods=["GET"]),
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/sources", sources, methods=["GET"]),
    Route("/jobs", jobs, methods=["GET"]),
    Route("/jobs/{job_id}", job, methods=["GET"]),
    Route("/jobs/{job_id}/retry", retry, methods=["POST"]),
    Route("/resync", resync, methods=["POST"]),
    Route("/workspaces/{workspace_id}", workspace, methods=["GET"]),
    Route("/workspaces/{workspace_id}/backfill", backfill, methods=["POST"]),
    Route("/documents", documents, methods=["GET"]),
    Route("/documents/{doc_id}", document, methods=["GET"]),
    Route("/subscriptions", subscription_screens.subscriptions, methods=["GET"]),
    Route("/subscriptions", subscription_screens.add, methods=["POST"]),
    Route("/subscriptions/{subscription_id}/{action}", subscription_screens.act, methods=["POST"]),
    Route("/holds/{hold_id}/{action}", holds.resolve, methods=["POST"]),
]


def mount(settings: Settings, state: WebState, path: str = "/admin") -> Mount:
    """The dashboard as a ``Mount`` at ``path``: its own small Starlette app (so its errors are
    HTML pages and its session cookie stays under ``path``) sharing ``state`` with the API."""
    app = Starlette(
        routes=ROUTES,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(ErrorBoundary, handler=html_server_error),
            Middleware(
                DashboardSessions,
                admin_token=settings.admin_token,
                path=path,
                force_secure=settings.dashboard_secure_cookie,
            ),
        ],
        exception_handlers={HTTPException: html_error, LoginRequired: login_required},
    )
    app.state.web = state
    app.state.metrics = state.metrics
    app.state.settings = settings
    return Mount(path, app=app)
