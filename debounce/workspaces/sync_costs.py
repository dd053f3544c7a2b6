"""What syncs cost per workspace: the requests each sync sent (its meter's count) and the pages
synced, by lane — ``live`` (webhooks, re-syncs) and ``bulk`` (backfill and reconciliation),
the lane of the synced job's priority as the SQL function ``job_lane`` says (migration 022:
the rule is written once, there) — kept in ``workspace_sync_costs`` (migration 018,
``sql/queries/sync_costs.sql``) and shown as requests per synced page on ``/metrics``
(``debounce_workspace_requests_per_page``) and on the dashboard's workspace page.

A worker adds each sync's requests (every attempt's, a yielded or failed one's too: they were
spent) and, when it completes, one page; the counts are written in batches
(:class:`SyncCosts`, at most one statement a second), so the cost of counting is one round trip
per second per worker, not one per sync. Listing requests (``search``) are not page syncs and
are not counted here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = ["Cost", "SyncCosts", "read"]

log = logging.getLogger("debounce.worker")

_Q = queries("sync_costs")


@dataclass(frozen=True)
class Cost:
    """One workspace's counts in one lane, and their ratio (``None`` before a page synced)."""

    workspace_id: int
    source_type: str
    lane: str
    requests: int
    pages: int

    @property
    def per_page(self) -> float | None:
        return self.requests / self.pages if self.pages else None


class SyncCosts:
    """A worker's counts not yet written, by workspace and job priority (the statement sums
    them by lane), flushed at most every ``every`` seconds."""

    def __init__(self, db: Db, every: float = 1.0) -> None:
        self.db = db
        self.every = every
        self._pending: dict[tuple[int, int], list[int]] = {}
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    def add(self, workspace_id: int, priority: int, requests: int, pages: int) -> None:
        """Count ``requests`` sent and ``pages`` synced by a job of ``priority`` (its lane)."""
        counts = self._pending.setdefault((workspace_id, priority), [0, 0])
        counts[0] += requests
        counts[1] += pages

    async def maybe_flush(self) -> None:
        """Write the counts when ``every`` seconds passed since the last write."""
        if self._pending and time.monotonic() - self._last >= self.every:
            await self.flush()

    async def flush(self) -> None:
        """Write the counts now (kept for the next flush if the database is away)."""
        async with self._lock:
            pending, self._pending = self._pending, {}
            self._last = time.monotonic()
            if not pending:
                return
            keys = sorted(pending)
            try:
                await fetch_one(
                    self.db,
                    _Q["add_sync_costs"],
                    {
                        "workspace_ids": [k[0] for k in keys],
                        "priorities": [k[1] for k in keys],
                        "requests": [pending[k][0] for k in keys],
                        "pages": [pending[k][1] for k in keys],
                    },
                )
            except Exception as exc:  # counts are not worth a sync: keep them for later
                log.warning(
                    "could not record sync costs (%s); kept for the next write", exc.__class__.__name__
                )
                for key, (requests, pages) in pending.items():
                    self.add(key[0], key[1], requests, pages)


async def read(db: Db, workspace_id: int | None = None) -> list[Cost]:
    """Every workspace's counts by lane (``workspace_id``: one workspace's)."""
    rows = await fetch_all(db, _Q["sync_costs"], {"workspace_id": workspace_id})
    return [
        Cost(
            int(r["workspace_id"]), str(r["source_type"]), str(r["lane"]), int(r["requests"]), int(r["pages"])
        )
        for r in rows
    ]
