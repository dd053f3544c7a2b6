"""What the dashboard's screens read: one statement of ``sql/dashboard.sql`` each (plus the
queue's own ``stats``), shaped into plain values for the templates, and the Markdown renderer.

Every datetime returned is timezone-aware UTC; durations are seconds (float).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import integrations
from debounce import enumerations, queue, workspaces
from debounce.contract.markdown import gfm_parser
from debounce.db import Db, fetch_all, fetch_one
from debounce.sql import queries
from debounce.types import ApiBudget, JobStatus

__all__ = [
    "DocumentPage",
    "Overview",
    "Recent",
    "SourceView",
    "WorkspaceView",
    "get_document",
    "list_documents",
    "overview",
    "page_documents",
    "render_markdown",
    "source_views",
]

_Q = queries("dashboard")

#: The window of "recent" figures on the overview, seconds.
RECENT_SECONDS = 3600.0


def _utc(value: Any) -> Any:
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def _row(row: Any) -> dict[str, Any]:
    return {k: _utc(v) for k, v in dict(row).items()}


@dataclass(frozen=True)
class Recent:
    """Jobs that finished within the recent window (one source, or all): ``completed`` and
    ``failed`` counts, and the end-to-end lag of the completed ones in seconds (``None`` when
    none completed)."""

    completed: int = 0
    failed: int = 0
    lag_p50_seconds: float | None = None
    lag_p95_seconds: float | None = None
    lag_max_seconds: float | None = None


@dataclass(frozen=True)
class Overview:
    """The queue at a glance.

    ``counts``: ``{source: {state: jobs}}`` for every state (0 when none); ``totals``:
    ``{state: jobs}``; ``oldest_due_age_seconds``: per source and overall (``overall_due_age``),
    how long the oldest due pending job has waited past its due time; ``recent``: per source
    and ``recent_total``, what finished in the last ``window_seconds``.
    """

    counts: dict[str, dict[str, int]]
    totals: dict[str, int]
    oldest_due_age_seconds: dict[str, float]
    overall_due_age: float
    recent: dict[str, Recent]
    recent_total: Recent
    window_seconds: float
    states: tuple[str, ...] = tuple(s.value for s in JobStatus)


async def overview(db: Db, source_types: list[str], *, now: datetime | None = None) -> Overview:
    """The overview screen's figures (two statements: ``queue.stats`` and ``recent``).

    Every source in ``source_types`` appears, with zeros when it has no jobs; a source type
    found in the table but not registered appears too.
    """
    stats = await queue.stats(db, now=now)
    rows = await fetch_all(db, _Q["recent"], {"now": now, "window_seconds": RECENT_SECONDS})
    states = tuple(s.value for s in JobStatus)
    names = sorted(set(source_types) | set(stats["by_source"]))
    counts = {n: {s: int(stats["by_source"].get(n, {}).get(s, 0)) for s in states} for n in names}
    ages = {n: float(stats["by_source"].get(n, {}).get("oldest_due_age_seconds", 0.0)) for n in names}
    recent: dict[str, Recent] = {}
    total = Recent()
    for r in rows:
        value = Recent(completed=int(r["completed"]), failed=int(r["failed"]),
                       lag_p50_seconds=r["lag_p50_seconds"], lag_p95_seconds=r["lag_p95_seconds"],
                       lag_max_seconds=r["lag_max_seconds"])
        if r["source_type"] is None:
            total = value
        else:
            recent[r["source_type"]] = value
    return Overview(counts=counts, totals=dict(stats["totals"]), oldest_due_age_seconds=ages,
                    overall_due_age=float(stats["oldest_due_age_seconds"]), recent=recent,
                    recent_total=total, window_seconds=RECENT_SECONDS, states=states)


@dataclass(frozen=True)
class WorkspaceView:
    """One workspace of a source: a connected workspace (``status`` active, paused or
    revoked, its ``last_auth_error``, ``credentials_error`` since ``credentials_error_at`` when
    a worker cannot decrypt its stored token: its jobs and backfills wait), or — when the
    source has none — "default", configured by its environment.

    ``workspace_id`` is its numeric id (``None`` for "default"), ``source_id`` the source's
    own id of it (Notion workspace id, Slack team id; ``None`` while not learned, and for
    "default"); the ``debounce workspaces`` commands take either. ``jobs``: pending,
    processing and failed jobs now, and the jobs completed within
    :attr:`SourceView.completed_window_seconds`.
    ``last_error``: the newest job carrying an error (its id, status and when). ``rate_budget``
    describes its API budget (``None``: no workspace, so none), ``backfill`` its latest
    backfill or sweep."""

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
    workspace_id: int | None = None
    backfill: str | None = None
    source_id: str | None = None
    origin: str | None = None
    credentials_error: str | None = None
    credentials_error_at: datetime | None = None


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
    return (f"{budget['per_minute']:g}/min, burst {budget['burst']:g} ({origin}); "
            f"{budget['available']:g} available now")


def _backfill_text(p: enumerations.Progress | None) -> str | None:
    if p is None:
        return None
    kind = {"backfill": "backfill", "reconcile": "sweep",
            "full_reconcile": "full sweep"}.get(p.kind, p.kind)
    text = (f"{kind} {p.status}: {p.discovered} listed, {p.enqueued} to sync, {p.current} "
            f"current, {p.synced} synced, {p.remaining} remaining")
    if p.eta_seconds:
        text += f", ETA {p.eta_seconds:.0f} s"
    return text + (f" — {p.error}" if p.error and p.status == "failed" else "")


async def source_views(
    db: Db, configured: dict[str, tuple[bool, str | None]], *, now: datetime | None = None,
    budgets: dict[str, ApiBudget] | None = None, completed_window_seconds: float,
) -> list[SourceView]:
    """The sources screen: one :class:`SourceView` per source of ``configured``
    (``{source_type: (secret set, secret's variable)}``), sorted by name; ``budgets``: the
    sources' default API budgets; ``completed_window_seconds``: the window of the completed
    figures (the dashboard passes the job retention, how long finished jobs are kept)."""
    names = sorted(configured)
    window = {"now": now, "window_seconds": completed_window_seconds}
    stats = await queue.stats(db, now=now)
    all_workspaces = await workspaces.list_workspaces(db, budgets=budgets)
    activity = {int(r["workspace_id"]): _row(r)
                for r in await fetch_all(db, _Q["workspace_activity"], window)}
    sources = integrations.sources()
    progress = {w["id"]: await enumerations.latest(
        db, w["id"], per_minute=float(w["budget"]["per_minute"] or 0),
        requests_per_page=(sources[w["source_type"]].requests_per_page
                           if w["source_type"] in sources else 1.0))
        for w in all_workspaces}
    rows = {r["source_type"]: _row(r) for r in await fetch_all(
        db, _Q["source_activity"], {"source_types": names, **window})}
    views: list[SourceView] = []
    for name in names:
        row = rows.get(name, {})
        is_set, env = configured[name]
        shown = [_workspace_view(w, activity.get(int(w["id"]), {}), progress[w["id"]])
                 for w in all_workspaces if w["source_type"] == name]
        if not shown:
            jobs = {s.value: int(stats["by_source"].get(name, {}).get(s.value, 0))
                    for s in JobStatus}
            jobs["completed"] = int(row.get("completed") or 0)
            shown = [WorkspaceView(
                name="default", configured=is_set, jobs=jobs, last_sync_at=row.get("last_sync_at"),
                last_error=row.get("last_error"), last_error_job_id=row.get("last_error_job_id"),
                last_error_at=row.get("last_error_at"),
                last_error_status=row.get("last_error_status"))]
        views.append(SourceView(source_type=name, configured=is_set, secret_env=env,
                                documents=int(row.get("documents") or 0),
                                deleted_documents=int(row.get("deleted_documents") or 0),
                                workspaces=shown,
                                completed_window_seconds=completed_window_seconds))
    return views


def _workspace_view(w: dict[str, Any], activity: dict[str, Any],
                    progress: enumerations.Progress | None) -> WorkspaceView:
    """A connected workspace's row: ``w`` from ``workspaces.list_workspaces``, ``activity``
    its row of ``workspace_activity`` (empty when it has none)."""
    return WorkspaceView(
        name=w["name"] or "(unnamed)", source_id=w["external_id"], origin=w["origin"],
        configured=w["status"] == "active",
        jobs={"pending": int(w["pending_jobs"]), "processing": int(w["processing_jobs"]),
              "completed": int(activity.get("completed") or 0), "failed": int(w["failed_jobs"])},
        last_sync_at=max((t for t in (w["last_synced_at"], activity.get("last_completed_at"))
                          if t is not None), default=None),
        last_error=activity.get("last_error"),
        last_error_job_id=activity.get("last_error_job_id"),
        last_error_at=activity.get("last_error_at"),
        last_error_status=activity.get("last_error_status"), status=w["status"],
        last_auth_error=w["last_auth_error"], credentials_error=w["credentials_error"],
        credentials_error_at=w["credentials_error_at"],
        rate_budget=_budget_text(w["budget"]), workspace_id=int(w["id"]),
        backfill=_backfill_text(progress))


@dataclass(frozen=True)
class DocumentPage:
    """One page of :func:`list_documents`: rows (``id``, ``source_type``, ``document_id``,
    ``source_page_id``, ``title``, ``url``, ``synced_at``, ``deleted_at``, ``content_chars``),
    newest first, and the cursor of the next page (``None`` on the last)."""

    documents: list[dict[str, Any]]
    next_cursor: int | None


async def list_documents(
    db: Db, *, source_type: str | None, title: str | None, cursor: int | None, limit: int = 50
) -> DocumentPage:
    """Documents without their content, newest first: of ``source_type`` (any when ``None``)
    whose title contains ``title`` case-insensitively (any when ``None``), before the row id
    ``cursor``."""
    rows = await fetch_all(db, _Q["list_documents"], {
        "source_type": source_type, "title": title, "cursor": cursor, "limit": limit + 1,
    })
    docs = [_row(r) for r in rows[:limit]]
    return DocumentPage(documents=docs, next_cursor=docs[-1]["id"] if len(rows) > limit else None)


async def get_document(db: Db, document_row_id: int) -> dict[str, Any] | None:
    """The ``documents`` row with id ``document_row_id`` (every column), or ``None``."""
    row = await fetch_one(db, _Q["get_document"], {"id": document_row_id})
    return _row(row) if row is not None else None


async def page_documents(
    db: Db, source_type: str, source_page_id: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """The documents a job key produced (``id``, ``document_id``, ``title``, ``synced_at``,
    ``deleted_at``), at most ``limit``."""
    rows = await fetch_all(db, _Q["page_documents"], {
        "source_type": source_type, "source_page_id": source_page_id, "limit": limit,
    })
    return [_row(r) for r in rows]


def render_markdown(text: str) -> str:
    """``text`` (the documents' Markdown: CommonMark + GFM tables, task lists, strikethrough
    and autolinks, :func:`debounce.contract.markdown.gfm_parser` — the configuration the
    stored content is checked with) as HTML. Raw HTML in ``text`` is escaped, not rendered
    (``html=False``), so stored content cannot inject markup and what the page shows is what
    a consumer parsing the Markdown gets; markdown-it's link validation refuses
    ``javascript:``, ``vbscript:``, ``file:`` and most ``data:``. The result is safe to mark
    as such in a template."""
    html: str = gfm_parser(html=False).render(text)
    return html
