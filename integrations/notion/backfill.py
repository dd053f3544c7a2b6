"""What a Notion connection can see: one page of ``POST /v1/search`` per :meth:`backfill_page`
call (:class:`debounce.contract.Backfillable`, for backfill and reconciliation).

Search (https://developers.notion.com/reference/post-search, "Search by title") lists the
pages and data sources shared with the integration — with Notion-Version 2025-09-03, data
sources rather than databases (https://developers.notion.com/docs/upgrade-guide-2025-09-03):
``{"query"?, "filter"?: {"property": "object", "value": "page" | "data_source"}, "sort"?:
{"direction": "ascending" | "descending", "timestamp": "last_edited_time"}, "start_cursor"?,
"page_size"? (at most 100)}``, answered ``{"object": "list", "results": [...], "next_cursor":
str | null, "has_more": bool, "type": "page_or_data_source", "page_or_data_source": {}}``.
Both sort directions are documented; ``last_edited_time`` is the only sortable timestamp.

Each call sends one request: no query, no filter (pages and data sources together), 100 per
page (the maximum), sorted by ``last_edited_time`` — descending for ``newest_first`` (a
reconciliation stops at its watermark), ascending otherwise, so a page edited while an
backfill runs moves *ahead* of the cursor and is listed again rather than skipped. The
request goes through :meth:`~integrations.notion.client.NotionCall.call` (retried, charged
to the workspace's budget like a sync's) with ``cache=False``: a listing must be fresh.

Search is not an exact backfill: "Search is not guaranteed to return everything, and the
index may change as your connection iterates through pages and databases", results are not
immediate (an indexing delay), and only objects shared with the connection *directly* are
guaranteed to appear (https://developers.notion.com/reference/search-optimizations-and-limitations).
Webhooks, the next reconciliation and the deletion re-checks of a whole list
(``debounce.queue.backfills``) cover what one listing misses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notion_client.errors import APIResponseError

from debounce.contract import BackfillItem, BackfillPage, SyncContext
from integrations.notion.client import NotionClient, api_error
from integrations.notion.properties import parse_time, title_of
from integrations.notion.richtext import plain_text
from integrations.notion.webhook import normalize_id

#: The fields of a search result a page sync reads (kept in the bulk job's payload).
LISTING_FIELDS = (
    "object",
    "id",
    "url",
    "parent",
    "created_time",
    "last_edited_time",
    "created_by",
    "last_edited_by",
    "properties",
    "in_trash",
)

__all__ = ["SEARCH_PAGE_SIZE", "NotionBackfill", "backfill_item"]

#: Results per ``search`` request: Notion's maximum (the reference: "page_size ... Maximum: 100").
SEARCH_PAGE_SIZE = 100

#: Search result ``object`` → the ``entity.type`` of the job payload (what
#: :func:`integrations.notion.sync._entity_kind` reads). ``database`` only appears with API
#: versions before 2025-09-03.
_KINDS = {"page": "page", "data_source": "data_source", "database": "database"}


def backfill_item(result: Mapping[str, Any]) -> BackfillItem | None:
    """One search result as a :class:`BackfillItem` (``None``: not a page, data source or
    database, or no id): the job key is the id spelled as the webhooks spell it
    (:func:`~integrations.notion.webhook.normalize_id`, dashed lower-case), ``edited_at`` its
    ``last_edited_time`` (aware UTC), the payload ``{"entity": {"id", "type"}}`` that makes
    the sync fetch the right kind, and for a page ``"listing"``: the result's page object
    (:data:`LISTING_FIELDS`), which spares its sync the ``pages.retrieve``."""
    kind = _KINDS.get(str(result.get("object")))
    raw_id = result.get("id")
    if kind is None or not isinstance(raw_id, str) or not raw_id.strip():
        return None
    object_id = normalize_id(raw_id)
    title = title_of(result) if kind == "page" else plain_text(result.get("title")).strip()
    payload: dict[str, Any] = {"entity": {"id": object_id, "type": kind}}
    if kind == "page":
        # The listing's page object travels with the bulk job: its sync asks for the
        # content alone (search results are full page objects; issue 31).
        payload["listing"] = {k: result[k] for k in LISTING_FIELDS if k in result}
    return BackfillItem(
        source_page_id=object_id,
        edited_at=parse_time(result.get("last_edited_time")),
        payload=payload,
        title=title,
    )


class NotionBackfill:
    """What a Notion connection can see (:class:`debounce.contract.Backfillable`), through the
    source's shared :class:`~integrations.notion.client.NotionClient`."""

    def __init__(self, client: NotionClient) -> None:
        self.client = client

    async def backfill_page(
        self, cursor: str | None, context: SyncContext, *, newest_first: bool = False
    ) -> BackfillPage:
        """One page (up to 100) of what the context's workspace token can see, from
        ``cursor`` (Notion's ``next_cursor``; ``None``: the first page), sorted by
        ``last_edited_time`` (``newest_first``: descending; else ascending). Trashed objects
        are not listed (search leaves them out).

        Raises:
            BudgetExhausted: the workspace's budget is empty (nothing sent).
            RateLimited: Notion answered 429 (or 529) with a ``Retry-After`` too long to wait.
            AuthRevoked: ``unauthorized``.
            PermanentError: no token; ``restricted_resource`` or an invalid request.
            Exception: 5xx after the in-process retries, timeouts (transient).
        """
        call = self.client.bind(context)
        params: dict[str, Any] = {
            "page_size": SEARCH_PAGE_SIZE,
            "sort": {
                "direction": "descending" if newest_first else "ascending",
                "timestamp": "last_edited_time",
            },
        }
        if cursor:
            params["start_cursor"] = cursor
        try:
            answer = await call.call(call.api.search, cache=False, **params)
        except APIResponseError as exc:
            mapped = api_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise
        if not isinstance(answer, dict):
            raise ValueError("Notion search answered something other than a JSON object")
        items = [
            d
            for r in answer.get("results") or []
            if isinstance(r, dict)
            if (d := backfill_item(r)) is not None and not _trashed(r)
        ]
        next_cursor = answer.get("next_cursor")
        more = bool(answer.get("has_more")) and isinstance(next_cursor, str) and bool(next_cursor)
        return BackfillPage(items=items, cursor=next_cursor if more else None)


def _trashed(result: Mapping[str, Any]) -> bool:
    """Whether a result is in the trash (``in_trash``, or ``archived`` in older versions)."""
    return bool(result.get("in_trash") or result.get("archived"))
