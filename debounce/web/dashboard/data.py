"""What the dashboard's screens read, through the domain modules (the queue's ``stats`` and
:mod:`debounce.queue.activity`, :mod:`debounce.documents.reads`, the workspaces' names), shaped
into plain values for the templates, and the Markdown renderer. The Sources and workspace
pages' reads are :mod:`.workspaces`.

Every datetime returned is timezone-aware UTC; durations are seconds (float).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from debounce import queue, workspaces
from debounce.contract.markdown import gfm_parser
from debounce.documents import reads
from debounce.infra.db import Db
from debounce.queue import activity
from debounce.types import JobStatus, SyncJob

__all__ = [
    "DocumentPage",
    "JobList",
    "Overview",
    "Recent",
    "as_utc",
    "get_document",
    "list_documents",
    "list_jobs",
    "overview",
    "page_documents",
    "render_markdown",
    "workspace_name",
]


#: The window of "recent" figures on the overview, seconds.
RECENT_SECONDS = 3600.0


def as_utc(value: Any) -> Any:
    """``value`` in UTC when it is a datetime, else as it is."""
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def _row(row: Any) -> dict[str, Any]:
    return {k: as_utc(v) for k, v in dict(row).items()}


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
    rows = await activity.recent(db, window_seconds=RECENT_SECONDS, now=now)
    states = tuple(s.value for s in JobStatus)
    names = sorted(set(source_types) | set(stats["by_source"]))
    counts = {n: {s: int(stats["by_source"].get(n, {}).get(s, 0)) for s in states} for n in names}
    ages = {n: float(stats["by_source"].get(n, {}).get("oldest_due_age_seconds", 0.0)) for n in names}
    recent: dict[str, Recent] = {}
    total = Recent()
    for r in rows:
        value = Recent(
            completed=int(r["completed"]),
            failed=int(r["failed"]),
            lag_p50_seconds=r["lag_p50_seconds"],
            lag_p95_seconds=r["lag_p95_seconds"],
            lag_max_seconds=r["lag_max_seconds"],
        )
        if r["source_type"] is None:
            total = value
        else:
            recent[r["source_type"]] = value
    return Overview(
        counts=counts,
        totals=dict(stats["totals"]),
        oldest_due_age_seconds=ages,
        overall_due_age=float(stats["oldest_due_age_seconds"]),
        recent=recent,
        recent_total=total,
        window_seconds=RECENT_SECONDS,
        states=states,
    )


@dataclass(frozen=True)
class JobList:
    """One page of :func:`list_jobs`: jobs newest first, the names of their workspaces
    (``{workspace_id: name}``) and the cursor of the next page (``None`` on the last)."""

    jobs: list[SyncJob]
    workspace_names: dict[int, str]
    next_cursor: int | None


async def list_jobs(
    db: Db,
    *,
    status: str | None = None,
    source_type: str | None = None,
    source_page_id: str | None = None,
    workspace_id: int | None = None,
    finished_within: float | None = None,
    cursor: int | None = None,
    limit: int = 50,
    now: datetime | None = None,
) -> JobList:
    """Jobs newest first, each filter ``None`` for any: in state ``status``, of
    ``source_type``, of page ``source_page_id``, of workspace ``workspace_id``, finished within
    the last ``finished_within`` seconds (as the Sources page counts "completed"), before the
    job id ``cursor``. The caller checks the values (the dashboard's handlers do)."""
    rows = await activity.list_jobs(
        db,
        status=status,
        source_type=source_type,
        source_page_id=source_page_id,
        workspace_id=workspace_id,
        finished_within=finished_within,
        cursor=cursor,
        limit=limit + 1,
        now=now,
    )
    jobs = [SyncJob.from_row(r) for r in rows[:limit]]
    names = {
        int(r["workspace_id"]): r["workspace_name"] or "(unnamed)"
        for r in rows[:limit]
        if r["workspace_id"] is not None
    }
    return JobList(jobs=jobs, workspace_names=names, next_cursor=jobs[-1].id if len(rows) > limit else None)


async def workspace_name(db: Db, workspace_id: int) -> tuple[str, str] | None:
    """Workspace ``workspace_id``'s name and source type, or ``None`` when there is none."""
    return await workspaces.name_and_source(db, workspace_id)


@dataclass(frozen=True)
class DocumentPage:
    """One page of :func:`list_documents`: rows (``id``, ``source_type``, ``document_id``,
    ``source_page_id``, ``title``, ``url``, ``synced_at``, ``deleted_at``, ``content_chars``),
    newest first, and the cursor of the next page (``None`` on the last)."""

    documents: list[dict[str, Any]]
    next_cursor: int | None


async def list_documents(
    db: Db,
    *,
    source_type: str | None,
    title: str | None,
    cursor: int | None,
    limit: int = 50,
    workspace_id: int | None = None,
    state: str | None = None,
) -> DocumentPage:
    """Documents without their content, newest first: of ``source_type`` and of workspace
    ``workspace_id``, ``state`` "live" or "deleted" (marked deleted), whose title contains
    ``title`` case-insensitively (each ``None``: any), before the row id ``cursor``."""
    rows = await reads.browse_documents(
        db,
        source_type=source_type,
        title=title,
        cursor=cursor,
        limit=limit + 1,
        workspace_id=workspace_id,
        state=state,
    )
    docs = [_row(r) for r in rows[:limit]]
    return DocumentPage(documents=docs, next_cursor=docs[-1]["id"] if len(rows) > limit else None)


async def get_document(db: Db, document_row_id: int) -> dict[str, Any] | None:
    """The ``documents`` row with id ``document_row_id`` (every column), or ``None``."""
    row = await reads.document_by_row_id(db, document_row_id)
    return _row(row) if row is not None else None


async def page_documents(
    db: Db, source_type: str, source_page_id: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """The documents a job key produced (``id``, ``document_id``, ``title``, ``synced_at``,
    ``deleted_at``), at most ``limit``."""
    rows = await reads.page_documents(db, source_type, source_page_id, limit=limit)
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
