"""What a source can see: the enumeration behind backfill and reconciliation.

An integration that can list its pages implements :class:`Discoverer` (``discover``): one
call is one page of the source's own listing (Notion ``search``, Slack
``users.conversations``), so the caller stores the returned cursor in Postgres after each
call and an interrupted enumeration resumes where it stopped. The SDKs' pagination helpers
(``notion_client.helpers.async_iterate_paginated_api``, ``AsyncSlackResponse``'s iteration)
hide the cursor between pages, which is exactly what a resumable enumeration must keep, so
the integrations page with the documented cursor parameters themselves.

Every request of an enumeration goes through the source's request wrapper and is charged
to the workspace's budget like a sync's (:mod:`debounce.contract.metering`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from debounce.contract.sync import SyncContext

__all__ = ["Discovered", "DiscoveryPage", "Discoverer"]


@dataclass(frozen=True)
class Discovered:
    """One page (or channel) the integration can see.

    ``source_page_id``: the job key, spelled as the source's webhooks spell it;
    ``edited_at``: the source's last edit time (UTC; Notion ``last_edited_time``), ``None``
    when the listing does not say (Slack channels): then only a page without a document is
    fetched; ``payload``: the job payload the sync needs (e.g. Notion's
    ``{"entity": {"id": …, "type": "page" | "data_source"}}``); ``title``: for logs.
    """

    source_page_id: str
    edited_at: datetime | None
    payload: dict[str, Any] = field(default_factory=dict)
    title: str = ""


@dataclass(frozen=True)
class DiscoveryPage:
    """One page of an enumeration: its ``items`` and the ``cursor`` of the next page
    (``None``: the enumeration is complete)."""

    items: list[Discovered]
    cursor: str | None


@runtime_checkable
class Discoverer(Protocol):
    """A syncer that can enumerate what it sees (with the workspace's token and meter of the
    ``context``, :class:`~debounce.contract.sync.SyncContext`)."""

    async def discover(self, cursor: str | None, context: SyncContext, *,
                       newest_first: bool = False) -> DiscoveryPage:
        """One page of the enumeration, from ``cursor`` (``None``: the first page).

        ``newest_first``: order by last edit, newest first, where the source can (Notion
        ``search`` sorted by ``last_edited_time`` descending: reconciliation stops at its
        watermark); sources that cannot sort ignore it.

        Raises:
            RateLimited, BudgetExhausted, PermanentError, AuthRevoked: as a sync does.
            Exception: anything else is transient (the enumeration retries with backoff).
        """
        ...
