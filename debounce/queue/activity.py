"""What the jobs did lately, per source and per workspace: the figures the dashboard shows
(``sql/queries/activity.sql``). Read-only; every function takes ``now`` (timezone-aware, default
the database's ``now()``) so tests control the window, and ``window_seconds`` (seconds).

Rows are returned as the driver gives them; their columns are named in each statement's
comment in ``sql/queries/activity.sql``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from debounce.infra.db import Db, fetch_all
from debounce.infra.sql import queries

__all__ = ["list_jobs", "recent", "source_activity", "workspace_activity"]

_Q = queries("activity")


async def recent(db: Db, *, window_seconds: float, now: datetime | None = None) -> list[Any]:
    """Jobs completed and failed in the last ``window_seconds`` and the end-to-end lag of the
    completed ones (seconds), one row per source and one with ``source_type`` ``None`` for all."""
    return await fetch_all(db, _Q["recent"], {"now": now, "window_seconds": window_seconds})


async def source_activity(
    db: Db,
    source_types: list[str],
    *,
    window_seconds: float,
    now: datetime | None = None,
) -> list[Any]:
    """Per source type of ``source_types``: its last completed sync, the jobs it completed in
    the last ``window_seconds``, its newest job carrying an error, and its documents (live and
    marked deleted)."""
    return await fetch_all(
        db,
        _Q["source_activity"],
        {"source_types": source_types, "window_seconds": window_seconds, "now": now},
    )


async def workspace_activity(
    db: Db,
    workspace_id: int | None = None,
    *,
    window_seconds: float,
    now: datetime | None = None,
) -> list[Any]:
    """Per workspace (every one, or only ``workspace_id``): its jobs completed in the last
    ``window_seconds``, its last completed job and its newest job carrying an error."""
    return await fetch_all(
        db, _Q["workspace_activity"], {"id": workspace_id, "window_seconds": window_seconds, "now": now}
    )


async def list_jobs(
    db: Db,
    *,
    status: str | None,
    source_type: str | None,
    source_page_id: str | None,
    workspace_id: int | None,
    finished_within: float | None,
    cursor: int | None,
    limit: int,
    now: datetime | None = None,
) -> list[Any]:
    """Jobs newest id first with their workspace's name (``workspace_name``), before the job id
    ``cursor``, at most ``limit``; each filter ``None`` for any (``finished_within``: finished
    in the last that many seconds)."""
    return await fetch_all(
        db,
        _Q["list_jobs"],
        {
            "status": status,
            "source_type": source_type,
            "source_page_id": source_page_id,
            "workspace_id": workspace_id,
            "finished_within": finished_within,
            "cursor": cursor,
            "limit": limit,
            "now": now,
        },
    )
