"""What the dashboard's Sources page and workspace page read: each source, each connected
workspace (jobs by state, documents, API budget, backfill progress, errors), shaped into plain
values for the templates (:mod:`debounce.queue.activity`, ``workspaces.list_workspaces``,
``backfills.latest``).

Every datetime returned is timezone-aware UTC; durations are seconds (float).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from debounce import queue, registry, workspaces
from debounce.infra.db import Db
from debounce.queue import activity, backfills
from debounce.types import ApiBudget, JobStatus
from debounce.web.dashboard.data import as_utc
from debounce.workspaces import sync_costs

__all__ = [
    "SourceView",
    "WorkspaceView",
    "backfill_text",
    "source_views",
    "workspace_view",
]


@dataclass(frozen=True)
class WorkspaceView:
    """One workspace of a source: a connected workspace (``status`` active, paused,
    revoked or removed, its ``last_auth_error``, ``credentials_error`` since ``credentials_error_at`` when
    a worker cannot decrypt its stored token: its jobs and backfills wait), or — when the
    source has none — "default", configured by its environment.

    ``workspace_id`` is its numeric id (``None`` for "default"), ``source_id`` the source's
    own id of it (Notion workspace id, Slack team id; ``None`` while not learned, and for
    "default"); the ``debounce workspaces`` commands take either. ``jobs``: pending,
    processing and failed jobs now, and the jobs completed within
    :attr:`SourceView.completed_window_seconds`; ``documents`` / ``deleted_documents``: its
    documents, live and marked deleted (``None`` for "default": the source's count is on its
    card). ``last_error``: the newest job carrying an error (its id, status and when).
    ``rate_budget`` describes its API budget (``None``: no workspace, so none) and ``budget``
    holds its figures (``per_minute``, ``burst``, ``available``, ``source_default``);
    ``blocked_until`` / ``rate_limit_reason``: the latest rate limit a source answered (the
    claim skips the workspace while ``blocked``); ``backfill`` describes its latest backfill or
    reconciliation, ``progress`` holds its figures; ``costs`` what its page syncs cost (requests per
    synced page, live and bulk)."""

    name: str
    configured: bool
    jobs: dict[str, int]
    last_sync_at: datetime | None
    last_error: str | None
    last_error_job_id: int | None
    last_error_at: datetime | None
    last_error_status: str | None
    rate_budget: str | None = None
    status: str | None = None
    last_auth_error: str | None = None
    last_auth_error_at: datetime | None = None
    workspace_id: int | None = None
    backfill: str | None = None
    source_id: str | None = None
    origin: str | None = None
    credentials_error: str | None = None
    credentials_error_at: datetime | None = None
    missing_scopes: tuple[str, ...] = ()
    missing_scopes_at: datetime | None = None
    source_type: str | None = None
    documents: int | None = None
    deleted_documents: int | None = None
    budget: dict[str, Any] | None = None
    blocked_until: datetime | None = None
    blocked: bool = False
    rate_limit_reason: str | None = None
    progress: backfills.Progress | None = None
    connected_at: datetime | None = None
    #: What its page syncs cost, by lane (``live``, ``bulk``): requests, pages, their ratio
    #: (``debounce.workspaces.sync_costs``); empty before its first sync.
    costs: dict[str, sync_costs.Cost] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceView:
    """One registered source: ``secret_env`` is the variable of its signing secret (``None``
    when it has none), ``configured`` whether that secret is set, its documents (live and
    marked deleted) and workspaces, and the window of their "completed" figures."""

    source_type: str
    configured: bool
    secret_env: str | None
    documents: int
    deleted_documents: int
    workspaces: list[WorkspaceView] = field(default_factory=list)
    #: The window of the "completed" figures, seconds.
    completed_window_seconds: float = 0.0


def _budget_text(budget: dict[str, Any]) -> str:
    if not budget["per_minute"]:
        return "unmetered"
    origin = "source default" if budget["source_default"] else "set for this workspace"
    return (
        f"{budget['per_minute']:g}/min, burst {budget['burst']:g} ({origin}); "
        f"{budget['available']:g} available now"
    )


_KIND_NAMES = {"backfill": "backfill", "reconcile": "reconciliation", "full_reconcile": "full reconciliation"}


def backfill_text(p: backfills.Progress | None) -> str | None:
    """The latest backfill in one line whose figures add up: every listed page is
    ``current`` (its document is up to date: skipped), ``to sync`` (a bulk job enqueued) or
    ``already had a job`` (an active job of the page, a webhook's or a re-sync's, syncs it), so
    listed = current + to sync + already had a job; the re-checks of documents a whole list
    no longer shows come on top; ``synced`` and ``remaining`` split the bulk jobs. ``None``:
    the workspace never had one."""
    if p is None:
        return None
    kind = _KIND_NAMES.get(p.kind, p.kind)
    text = (
        f"{kind} {p.status}: {p.discovered} listed = {p.current} current + {p.enqueued} "
        f"to sync + {p.active} already had a job"
    )
    if p.rechecks:
        text += (
            f"; {p.rechecks} re-check (a document the listing no longer shows)"
            if p.rechecks == 1
            else f"; {p.rechecks} re-checks (documents the listing no longer shows)"
        )
    text += f"; {p.synced} synced, {p.remaining} remaining"
    if p.eta_seconds:
        text += f", ETA {p.eta_seconds:.0f} s"
    return text + (f" — {p.error}" if p.error and p.status == "failed" else "")


async def _progress(db: Db, w: dict[str, Any]) -> backfills.Progress | None:
    sources = registry.sources()
    return await backfills.latest(
        db,
        w["id"],
        per_minute=float(w["budget"]["per_minute"] or 0),
        requests_per_page=(
            sources[w["source_type"]].requests_per_page if w["source_type"] in sources else 1.0
        ),
    )


async def source_views(
    db: Db,
    configured: dict[str, tuple[bool, str | None]],
    *,
    now: datetime | None = None,
    budgets: dict[str, ApiBudget] | None = None,
    completed_window_seconds: float,
) -> list[SourceView]:
    """The sources screen: one :class:`SourceView` per source of ``configured``
    (``{source_type: (secret set, secret's variable)}``), sorted by name; ``budgets``: the
    sources' default API budgets; ``completed_window_seconds``: the window of the completed
    figures (the dashboard passes the job retention, how long finished jobs are kept)."""
    names = sorted(configured)
    stats = await queue.stats(db, now=now)
    all_workspaces = await workspaces.list_workspaces(db, budgets=budgets)
    by_workspace = {
        int(r["workspace_id"]): r
        for r in await activity.workspace_activity(db, window_seconds=completed_window_seconds, now=now)
    }
    progress = {w["id"]: await _progress(db, w) for w in all_workspaces}
    rows = {
        r["source_type"]: r
        for r in await activity.source_activity(db, names, window_seconds=completed_window_seconds, now=now)
    }
    views: list[SourceView] = []
    for name in names:
        row = rows.get(name, {})
        is_set, env = configured[name]
        shown = [
            _workspace_view(w, by_workspace.get(int(w["id"]), {}), progress[w["id"]], now)
            for w in all_workspaces
            if w["source_type"] == name
        ]
        if not shown:
            jobs = {s.value: int(stats["by_source"].get(name, {}).get(s.value, 0)) for s in JobStatus}
            jobs["completed"] = int(row.get("completed") or 0)
            shown = [
                WorkspaceView(
                    name="default",
                    configured=is_set,
                    jobs=jobs,
                    source_type=name,
                    last_sync_at=as_utc(row.get("last_sync_at")),
                    last_error=row.get("last_error"),
                    last_error_job_id=row.get("last_error_job_id"),
                    last_error_at=as_utc(row.get("last_error_at")),
                    last_error_status=row.get("last_error_status"),
                )
            ]
        views.append(
            SourceView(
                source_type=name,
                configured=is_set,
                secret_env=env,
                documents=int(row.get("documents") or 0),
                deleted_documents=int(row.get("deleted_documents") or 0),
                workspaces=shown,
                completed_window_seconds=completed_window_seconds,
            )
        )
    return views


async def workspace_view(
    db: Db,
    workspace_id: int,
    *,
    now: datetime | None = None,
    budgets: dict[str, ApiBudget] | None = None,
    completed_window_seconds: float,
) -> WorkspaceView | None:
    """The workspace page's figures of ``workspace_id`` (``None``: no such workspace); the
    arguments as :func:`source_views` takes them."""
    found = await workspaces.list_workspaces(db, workspace_id, budgets=budgets, now=now)
    if not found:
        return None
    w = found[0]
    rows = await activity.workspace_activity(
        db, workspace_id, window_seconds=completed_window_seconds, now=now
    )
    view = _workspace_view(w, rows[0] if rows else {}, await _progress(db, w), now)
    costs = {c.lane: c for c in await sync_costs.read(db, workspace_id)}
    return dataclasses.replace(view, costs=costs)


def _workspace_view(
    w: dict[str, Any], activity: Any, progress: backfills.Progress | None, now: datetime | None
) -> WorkspaceView:
    """A connected workspace's figures: ``w`` from ``workspaces.list_workspaces``,
    ``activity`` its row of ``workspace_activity`` (empty when it has none)."""
    a = {k: as_utc(v) for k, v in dict(activity).items()}
    blocked_until = as_utc(w["blocked_until"])
    return WorkspaceView(
        name=w["name"] or "(unnamed)",
        source_id=w["external_id"],
        origin=w["origin"],
        source_type=w["source_type"],
        configured=w["status"] == "active",
        jobs={
            "pending": int(w["pending_jobs"]),
            "processing": int(w["processing_jobs"]),
            "completed": int(a.get("completed") or 0),
            "failed": int(w["failed_jobs"]),
        },
        documents=int(a.get("documents") or 0),
        deleted_documents=int(a.get("deleted_documents") or 0),
        last_sync_at=max(
            (as_utc(t) for t in (w["last_synced_at"], a.get("last_completed_at")) if t is not None),
            default=None,
        ),
        last_error=a.get("last_error"),
        last_error_job_id=a.get("last_error_job_id"),
        last_error_at=a.get("last_error_at"),
        last_error_status=a.get("last_error_status"),
        status=w["status"],
        last_auth_error=w["last_auth_error"],
        last_auth_error_at=as_utc(w["last_auth_error_at"]),
        credentials_error=w["credentials_error"],
        credentials_error_at=as_utc(w["credentials_error_at"]),
        missing_scopes=tuple(w.get("missing_scopes") or ()),
        missing_scopes_at=as_utc(w.get("missing_scopes_at")),
        rate_budget=_budget_text(w["budget"]),
        budget=dict(w["budget"]),
        blocked_until=blocked_until,
        rate_limit_reason=w["rate_limit_reason"],
        blocked=blocked_until is not None and blocked_until > (now or datetime.now(UTC)),
        workspace_id=int(w["id"]),
        backfill=backfill_text(progress),
        progress=progress,
        connected_at=as_utc(w["connected_at"]),
    )
