"""The worker's backfill loop: backfills and reconciliations (``debounce.queue.backfills``).

Beside the claim loop, each worker process runs one :class:`Backfiller`. Every round it

1. starts what is due: a backfill for each workspace just connected
   (``DEBOUNCE_BACKFILL_ON_CONNECT``), a reconciliation for each workspace whose last
   one is ``DEBOUNCE_RECONCILE_INTERVAL_SECONDS`` old (a full reconciliation every
   ``DEBOUNCE_RECONCILE_FULL_INTERVAL_SECONDS``);
2. leases one running backfill (one worker at a time each; kind backfill first) and
   walks the source's list from the stored cursor, one backfill page per request, each page
   recorded in one statement (bulk jobs enqueued, cursor moved), until the list ends — or, for
   a ``reconcile`` run, until it passes the previous one's watermark (newest first).

The backfill's requests are charged to the workspace's budget like a sync's
(:class:`~debounce.workspaces.budgets.WorkspaceMeter`): a dry bucket or a 429 defers the backfill
(lease freed, ``not_before`` set) instead of sleeping; a revoked token marks the workspace
revoked; a stored token this worker cannot decrypt defers it until the workspace's
``credentials_error`` is cleared. The syncs themselves are ordinary jobs in the bulk lane of the fair claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import registry
from debounce.config import Settings
from debounce.contract import (
    Backfillable,
    SyncContext,
    Syncer,
    as_backfillable,
)
from debounce.documents.audiences import AudienceStore
from debounce.queue import backfills
from debounce.types import ApiBudget
from debounce.worker import workspace_state
from debounce.worker.decrypter import Decrypter
from debounce.worker.errors import log_db_error
from debounce.worker.verdict import VerdictKind, verdict
from debounce.workspaces import CredentialsUnreadable
from debounce.workspaces.budgets import WorkspaceMeter

__all__ = ["Backfiller"]

log = logging.getLogger("debounce.worker")

#: Delay before retrying a backfill page that failed for a transient reason, seconds.
RETRY_SECONDS = 30.0


class Backfiller:
    """One worker process's backfill loop (module docstring). ``syncers``: the worker's
    syncers; only those that are a :class:`~debounce.contract.backfill.Backfillable` take
    part. ``decrypter``: the worker's (a backfill page runs with its workspace's credentials like a
    sync). ``owner`` is the worker id (the lease holder)."""

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[Any],
        syncers: Mapping[str, Syncer],
        decrypter: Decrypter,
        owner: str,
        budgets: Mapping[str, ApiBudget],
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.syncers: dict[str, Backfillable] = {}
        for source_type, syncer in syncers.items():
            listing = as_backfillable(syncer, source_type)
            if listing is not None:
                self.syncers[source_type] = listing
        self.decrypter = decrypter
        self.owner = owner
        self.budgets = dict(budgets)
        self.idle_seconds = max(0.05, min(settings.poll_interval_seconds, 5.0))
        #: A backfill's lease (renewed by every backfill page recorded): the jobs' lease,
        #: so a dead worker's backfill comes back as soon as its jobs do.
        self.lease_seconds = settings.lease_seconds

    def _default_on(self) -> list[str]:
        known = registry.sources()
        return [s for s in self.syncers if s in known and known[s].reconcile_by_default]

    async def run(self, stopping: asyncio.Event) -> None:
        """Loop until ``stopping`` is set; frees its leases on the way out."""
        if not self.syncers:
            return
        try:
            while not stopping.is_set():
                try:
                    worked = await self.round()
                except Exception as exc:
                    worked = False
                    log_db_error("running backfills", exc, RETRY_SECONDS)
                if not worked:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), timeout=self.idle_seconds)
        finally:
            with contextlib.suppress(Exception):
                await backfills.release(self.pool, self.owner)

    async def round(self) -> bool:
        """Start what is due, then walk one leased backfill to its end (or until it must
        wait). Returns whether a backfill was worked on."""
        sources = list(self.syncers)
        if self.settings.backfill_on_connect:
            for started in await backfills.schedule_backfills(self.pool, sources):
                log.info(
                    "workspace %d connected: backfill %d started", started["workspace_id"], started["id"]
                )
        if self.settings.reconcile_interval_seconds > 0:
            await backfills.schedule_reconciliations(
                self.pool,
                sources,
                self._default_on(),
                interval=self.settings.reconcile_interval_seconds,
                full_interval=self.settings.reconcile_full_interval_seconds,
            )
        leased = await backfills.lease(self.pool, self.owner, sources, self.lease_seconds)
        if leased is None:
            return False
        await self.walk(leased)
        return True

    async def _failed(self, row: Mapping[str, Any], exc: Exception) -> None:
        """Record what ``exc`` (raised by a backfill page of backfill ``row``) means for it
        (:func:`~debounce.worker.verdict.verdict`, the one mapping the sync's outcomes use
        too): a dry budget or a 429 defers it, a revoked token revokes the workspace and
        fails it, a permanent error fails it, anything else is retried in
        :data:`RETRY_SECONDS` from its cursor."""
        eid, workspace_id, kind = int(row["id"]), int(row["workspace_id"]), str(row["kind"])
        v = verdict(exc)
        if v.kind is VerdictKind.BUDGET:
            assert v.retry_after is not None
            await backfills.defer(self.pool, eid, self.owner, v.retry_after, "")
        elif v.kind is VerdictKind.RATE_LIMITED:
            assert v.retry_after is not None and v.reason is not None
            await workspace_state.block(self.pool, workspace_id, v.retry_after, v.reason)
            await backfills.defer(self.pool, eid, self.owner, v.retry_after, v.error)
        elif v.kind is VerdictKind.REVOKED:
            await workspace_state.revoke(self.pool, workspace_id, str(exc))
            await backfills.fail(self.pool, eid, self.owner, v.error)
        elif v.kind is VerdictKind.PERMANENT:
            log.error("%s %d of workspace %d failed: %s", kind, eid, workspace_id, exc)
            await backfills.fail(self.pool, eid, self.owner, v.error)
        else:
            log.warning(
                "%s %d of workspace %d: backfill page failed (%s); again in %.0f s",
                kind,
                eid,
                workspace_id,
                v.error,
                RETRY_SECONDS,
            )
            await backfills.defer(self.pool, eid, self.owner, RETRY_SECONDS, v.error)

    async def walk(self, row: Mapping[str, Any]) -> None:
        """Walk backfill ``row`` from its cursor (see the module docstring)."""
        eid, workspace_id, kind = int(row["id"]), int(row["workspace_id"]), str(row["kind"])
        syncer = self.syncers[row["source_type"]]
        watermark = row["watermark"] if kind == "reconcile" else None
        cursor: str | None = row["cursor"]
        try:
            credentials = await self.decrypter.for_workspace(workspace_id)
        except CredentialsUnreadable as exc:
            # Marked on the workspace and said once (the Decrypter); the lease skips the
            # workspace until the mark is cleared, then the walk goes on from its cursor.
            await backfills.defer(self.pool, eid, self.owner, 0.0, f"credentials error: {exc.reason}")
            return
        meter = WorkspaceMeter(self.pool, workspace_id, self.budgets.get(row["source_type"]))
        audiences = AudienceStore(self.pool, str(row["source_type"]), workspace_id)
        while True:
            try:
                context = SyncContext(credentials=credentials, meter=meter, audiences=audiences)
                page = await syncer.backfill_page(cursor, context, newest_first=True)
            except Exception as exc:
                await self._failed(row, exc)
                return
            items, done = page.items, page.cursor is None
            if watermark is not None:
                # Newest first: everything past the watermark was seen by the last reconciliation.
                fresh = [i for i in items if i.edited_at is None or i.edited_at >= watermark]
                done = done or len(fresh) < len(items)
                items = fresh
            recorded = await backfills.record_page(
                self.pool,
                eid,
                self.owner,
                items,
                None if done else page.cursor,
                lease_seconds=self.lease_seconds,
                max_attempts=self.settings.max_attempts,
            )
            if recorded is None:
                log.warning("%s %d: lease lost; another worker continues it", kind, eid)
                return
            cursor = page.cursor
            if done:
                finished = await backfills.finish(
                    self.pool, eid, self.owner, max_attempts=self.settings.max_attempts
                )
                if finished is not None:
                    log.info(
                        "%s %d of workspace %d done: %d listed, %d enqueued, %d current, %d re-checks",
                        kind,
                        eid,
                        workspace_id,
                        finished["discovered"],
                        finished["enqueued"],
                        finished["current"],
                        finished["rechecks"],
                    )
                return
