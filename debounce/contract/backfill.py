"""What a source can see, one backfill page at a time (backfill and reconciliation).

A syncer that can list a workspace's pages implements :class:`Backfillable`
(``backfill_page``): one call is one page of the source's own list (Notion ``search``, Slack
``users.conversations``), so the caller stores the returned cursor in Postgres after each
call and an interrupted backfill resumes where it stopped. The SDKs' pagination helpers
(``notion_client.helpers.async_iterate_paginated_api``, ``AsyncSlackResponse``'s iteration)
hide the cursor between pages, which is exactly what a resumable backfill must keep, so
the sources page with the documented cursor parameters themselves.

Every request of a backfill goes through the source's request wrapper and is charged
to the workspace's budget like a sync's (:mod:`debounce.contract.metering`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from debounce.contract.sync import SyncContext

__all__ = ["BackfillItem", "BackfillPage", "Backfillable", "as_backfillable"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackfillItem:
    """One page (or channel) the source lets the workspace's token see.

    ``source_page_id``: the job key, spelled as the source's webhooks spell it;
    ``edited_at``: the source's last edit time (UTC; Notion ``last_edited_time``), ``None``
    when the source's list does not say (Slack channels): then only a page without a document is
    fetched; ``payload``: the job payload the sync needs (e.g. Notion's
    ``{"entity": {"id": …, "type": "page" | "data_source"}}``); ``title``: for logs.
    """

    source_page_id: str
    edited_at: datetime | None
    payload: dict[str, Any] = field(default_factory=dict)
    title: str = ""


@dataclass(frozen=True)
class BackfillPage:
    """One page of a backfill: its ``items`` and the ``cursor`` of the next page
    (``None``: the backfill is complete)."""

    items: list[BackfillItem]
    cursor: str | None


@runtime_checkable
class Backfillable(Protocol):
    """A syncer that can list what it sees (with the workspace's token and meter of the
    ``context``, :class:`~debounce.contract.sync.SyncContext`)."""

    async def backfill_page(
        self, cursor: str | None, context: SyncContext, *, newest_first: bool = False
    ) -> BackfillPage:
        """One page of the backfill, from ``cursor`` (``None``: the first page).

        ``newest_first``: order by last edit, newest first, where the source can (Notion
        ``search`` sorted by ``last_edited_time`` descending: reconciliation stops at its
        watermark); sources that cannot sort ignore it.

        Raises:
            RateLimited, BudgetExhausted, PermanentError, AuthRevoked: as a sync does.
            Exception: anything else is transient (the backfill retries with backoff).
        """
        ...


def as_backfillable(syncer: object, source_type: str) -> Backfillable | None:
    """``syncer`` as a :class:`Backfillable` when it implements ``backfill_page``; ``None``
    when it cannot list what it sees (it takes no part in backfills). ``source_type`` names it
    in the log."""
    if isinstance(syncer, Backfillable):
        return syncer
    log.debug("source %s: no backfill_page, so no backfills", source_type)
    return None
