"""API budgets: one token bucket per workspace in Postgres, shared by every worker process.

The scarce resource of the service is the sources' API budget (Notion's per-connection and
per-workspace limits, Slack's per-method tiers). Each workspace has a token bucket
(``sql/queries/budgets.sql``, migration 008): ``burst`` requests of capacity refilled at
``per_minute``. It is refilled lazily, from the database's clock, by the one ``UPDATE …
RETURNING`` that charges it, so there is no refiller process and worker clocks never matter;
the row lock serialises every process's takers.

- The worker charges one request per API request a sync or a backfill sends
  (:class:`WorkspaceMeter`, the :class:`debounce.contract.metering.Meter` of a job).
- The claim (``sql/queries/claim.sql``) only takes jobs of a workspace whose bucket can pay for their
  syncs (``Source.requests_per_page`` each), and reserves those requests in the same
  statement, so no worker waits on a budget holding a slot and a claimed sync seldom yields.
- Defaults come from the source (``Source.budget``), overridden for all of a source's
  workspaces by ``<SOURCE>_BUDGET_PER_MINUTE`` / ``<SOURCE>_BUDGET_BURST`` and per workspace
  by :func:`set_budget` (``debounce workspaces set-budget``). 0 per minute: unmetered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from debounce.contract import BudgetExhausted
from debounce.infra.db import Db, fetch_one
from debounce.infra.sql import queries
from debounce.types import ApiBudget

__all__ = ["UNLIMITED", "WorkspaceMeter", "budget_params", "set_budget", "take"]

_Q = queries("budgets")


#: ``workspace_concurrency`` of the claim meaning "no limit on jobs in flight per workspace".
UNLIMITED = 1_000_000


def budget_params(
    budgets: Mapping[str, ApiBudget] | None, costs: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The sources' defaults as the statements that compute buckets take them (the claim,
    ``seconds_until_due``, the workspace listing): ``budget_sources``, ``budget_per_minutes``
    (``None``: unmetered unless a workspace sets its own), ``budget_bursts`` and
    ``budget_costs`` (the requests a typical sync of the source costs, ``costs``, default 1)."""
    known = dict(budgets or {})
    per_sync = dict(costs or {})
    sources = list(dict.fromkeys([*known, *per_sync]))
    return {
        "budget_sources": sources,
        "budget_per_minutes": [float(known[s].per_minute) if s in known else None for s in sources],
        "budget_bursts": [float(known[s].burst) if s in known else None for s in sources],
        "budget_costs": [max(1.0, float(per_sync.get(s, 1.0))) for s in sources],
    }


def _defaults(budget: ApiBudget | None) -> dict[str, float | None]:
    return {
        "default_per_minute": budget.per_minute if budget else None,
        "default_burst": budget.burst if budget else None,
    }


async def take(
    db: Db, workspace_id: int, default: ApiBudget | None, *, n: int = 1, now: datetime | None = None
) -> float:
    """Charge ``n`` requests to ``workspace_id``'s bucket; returns 0.0 when granted, else the
    seconds until they will be available (or until a 429 block ends), nothing taken. An
    unknown workspace is not metered (0.0)."""
    row = await fetch_one(
        db, _Q["take_budget"], {"id": workspace_id, "n": float(n), "now": now, **_defaults(default)}
    )
    if row is None or row["granted"]:
        return 0.0
    return max(float(row["wait_seconds"]), 0.001)


async def set_budget(
    db: Db, workspace_id: int, per_minute: float | None, burst: float | None
) -> dict[str, Any] | None:
    """Set workspace ``workspace_id``'s budget (``None``: back to the source's default); the
    bucket starts full. Returns the row (``id``, ``source_type``, ``budget_per_minute``,
    ``budget_burst``) or ``None`` for an unknown workspace.

    Raises:
        ValueError: ``per_minute`` < 0 or ``burst`` < 1, or not finite.
    """
    if per_minute is not None and not (math.isfinite(per_minute) and per_minute >= 0):
        raise ValueError(f"per minute must be a number >= 0 (0: unmetered), got {per_minute}")
    if burst is not None and not (math.isfinite(burst) and burst >= 1):
        raise ValueError(f"burst must be a number >= 1, got {burst}")
    return await fetch_one(
        db, _Q["set_budget"], {"id": workspace_id, "per_minute": per_minute, "burst": burst}
    )


class WorkspaceMeter:
    """The :class:`debounce.contract.metering.Meter` of one job: charges ``workspace_id``'s bucket
    (the source's ``default`` budget unless the workspace sets its own) one request at a time.

    ``take()`` raises :class:`~debounce.contract.metering.BudgetExhausted` with the seconds until a
    request is available; it never sleeps (the job hands its slot back instead). ``taken``
    counts the requests granted.
    """

    def __init__(
        self, db: Db, workspace_id: int, default: ApiBudget | None, *, reserved: float = 0.0
    ) -> None:
        self.db = db
        self.workspace_id = workspace_id
        self.default = default
        #: Requests the claim already took from the bucket for this job (its source's
        #: ``requests_per_page``): spent first, without a round trip.
        self.reserved = reserved
        self.taken = 0

    async def take(self) -> None:
        """Charge one request: from the claim's reservation while it lasts, then from the
        bucket.

        Raises:
            BudgetExhausted: the bucket is empty (or the workspace is blocked by a 429).
        """
        if self.reserved >= 1:
            self.reserved -= 1
            self.taken += 1
            return
        wait = await take(self.db, self.workspace_id, self.default)
        if wait > 0:
            raise BudgetExhausted(wait)
        self.taken += 1
