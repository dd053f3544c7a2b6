"""A data source's document: its description, its property schema and the table of its rows
(:mod:`.table`), at the lowest request cost (docs/notion.md, "A data source as a table").

**Full sync** (a backfill's or reconciliation's job, a re-sync, a ``data_source.created`` /
``schema_updated`` / ``moved`` / ``undeleted`` event, a first sync): ``data_sources.retrieve``
(https://developers.notion.com/reference/retrieve-a-data-source) and every row through
``data_sources.query`` (https://developers.notion.com/reference/query-a-data-source, 100 rows
a request, sorted by ``created_time``): ``1 + ceil(rows / 100)`` requests.

**Rows sync** (a burst of ``data_source.content_updated`` events, job kind ``rows``, once a
full sync has left its state): the schema is the one kept in the job key's sync state, the rows
are the **stored row documents** (:meth:`~debounce.contract.DocumentWriter.current_matching`
on ``metadata.parent.id``: no request) plus what ``data_sources.query`` answers for the rows
edited since the **watermark** (a ``last_edited_time`` ``on_or_after`` filter: one request per
100 rows edited). The watermark is the newest ``last_edited_time`` the API has shown, unless a
row it showed had no stored document as new as the API's: then the oldest such row's time, so
that row is asked for again until its own page sync has caught up. A row the API shows wins
over its stored document; every other row is as its document says.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from debounce.contract import Document, SyncJob, SyncResult
from integrations.notion.client import NotionCall
from integrations.notion.properties import parent_summary, parse_time, schema_markdown, user_id
from integrations.notion.richtext import plain_text, render_rich_text
from integrations.notion.table import Row, row_of_document, row_of_page, table_markdown

__all__ = ["DATA_SOURCE_KEPT", "full_sync_requests", "sync_data_source"]

SOURCE_TYPE = "notion"

#: The fields of a data source object its table's rows sync needs again (kept in sync state).
DATA_SOURCE_KEPT = (
    "object",
    "id",
    "title",
    "description",
    "parent",
    "properties",
    "url",
    "created_by",
    "last_edited_by",
    "last_edited_time",
)

_PAGE_SIZE = 100


def full_sync_requests(rows: int) -> int:
    """Requests of a full sync of a data source of ``rows`` rows: the retrieve and the
    query's pages (at least one)."""
    return 1 + max(1, math.ceil(rows / _PAGE_SIZE))


def _iso(value: datetime) -> str:
    """Aware UTC as Notion writes times: ``2026-11-20T23:55:00.000Z``."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _query(call: NotionCall, ds_id: str, since: str | None) -> list[dict[str, Any]]:
    """Every page of ``data_sources.query`` (page size 100): all rows by creation, or with
    ``since`` those whose ``last_edited_time`` is on or after it."""
    params: dict[str, Any] = {
        "data_source_id": ds_id,
        "page_size": _PAGE_SIZE,
        "sorts": [{"timestamp": "created_time", "direction": "ascending"}],
    }
    if since is not None:
        params["filter"] = {"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": since}}
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        if cursor:
            params["start_cursor"] = cursor
        answer = await call.call(call.api.data_sources.query, **params)
        if not isinstance(answer, dict):
            break
        out += [r for r in answer.get("results") or [] if isinstance(r, dict) and r.get("object") == "page"]
        cursor = answer.get("next_cursor") if answer.get("has_more") else None
        if not cursor:
            break
    return out


def _columns(ds: Mapping[str, Any], kept: Any = None) -> tuple[str, list[str]]:
    """The title property's name and the other properties' names, in the API's order (a
    kept list of names: the order a full sync saw; JSON objects stored in Postgres lose it)."""
    props = ds.get("properties") if isinstance(ds.get("properties"), dict) else {}
    assert isinstance(props, dict)
    names = [n for n in kept if n in props] if isinstance(kept, list) else list(props)
    names += [n for n in props if n not in names]
    title = next((n for n in names if isinstance(props[n], dict) and props[n].get("type") == "title"), "Name")
    return title, [n for n in names if n != title]


def _behind(row: Row, stored: Mapping[str, Row]) -> bool:
    """Whether the API shows ``row`` newer than its stored document (or it has none)."""
    kept = stored.get(row.id)
    if kept is None or kept.last_edited is None:
        return True
    return row.last_edited is not None and kept.last_edited < row.last_edited


def _watermark(api_rows: list[Row], stored: Mapping[str, Row], before: str | None) -> str | None:
    """The next rows sync's ``on_or_after`` (module doc)."""
    stale = [r.last_edited for r in api_rows if r.last_edited is not None and _behind(r, stored)]
    if stale:
        return _iso(min(t for t in stale if t is not None))
    seen = [r.last_edited for r in api_rows if r.last_edited is not None]
    newest = _iso(max(t for t in seen if t is not None)) if seen else None
    return max((w for w in (before, newest) if w), default=None)


async def sync_data_source(
    call: NotionCall,
    job: SyncJob,
    ds: dict[str, Any] | None,
    *,
    rows_only: bool,
    write: Callable[[Document], Awaitable[SyncResult]],
    deleted: Callable[[], Awaitable[SyncResult]],
) -> SyncResult:
    """Sync data source ``job.source_page_id`` (module doc). ``ds``: the data source object
    when the caller already has it; ``rows_only``: the job's events said only rows changed
    (a rows sync if a full sync left its state, else a full sync). ``write`` writes the
    document, ``deleted`` marks the job key's documents deleted.

    Raises what :meth:`NotionCall.call` raises."""
    writer = call.context.writer()
    ds_id = job.source_page_id
    state = await writer.get_state(SOURCE_TYPE, ds_id)
    kept = state.get("data_source")
    if rows_only and ds is None and isinstance(kept, dict) and state.get("watermark"):
        ds, since = kept, str(state["watermark"])
    else:
        since = None
        if ds is None:
            ds = await call.fetch(call.api.data_sources.retrieve, data_source_id=ds_id)
        if ds is None or ds.get("in_trash") or ds.get("archived"):
            return await deleted()  # not found (unshared, deleted) or in the trash
    stored = {
        d.document_id: row_of_document(d)
        for d in await writer.current_matching(SOURCE_TYPE, {"parent": {"id": ds_id}})
    }
    api_rows = [row_of_page(p) for p in await _query(call, ds_id, since)]
    if since is None:
        rows = {r.id: r for r in api_rows}  # the API's rows are the whole table
    else:
        rows = {**stored, **{r.id: r for r in api_rows}}
    title_name, columns = _columns(ds, state.get("columns") if since else None)
    lines: list[str] = []
    description = render_rich_text(ds.get("description"))
    if description:
        lines += [description, ""]
    props = ds.get("properties") if isinstance(ds.get("properties"), dict) else {}
    lines += schema_markdown(
        {
            "properties": {
                n: props[n] for n in (title_name, *columns) if isinstance(props, dict) and n in props
            }
        }
    )
    lines += ["", f"## Rows ({len(rows)})", "", *table_markdown(title_name, columns, list(rows.values()))]
    await writer.set_state(
        SOURCE_TYPE,
        ds_id,
        {
            "data_source": {k: ds[k] for k in DATA_SOURCE_KEPT if k in ds},
            "columns": [title_name, *columns],
            "watermark": _watermark(api_rows, stored, since),
        },
    )
    metadata: dict[str, Any] = {
        "object": "data_source",
        "parent": parent_summary(ds.get("parent")),
        "created_by": user_id(ds.get("created_by")),
        "last_edited_by": user_id(ds.get("last_edited_by")),
        "schema": {
            n: str(props[n].get("type"))
            for n in (title_name, *columns)
            if isinstance(props, dict) and isinstance(props.get(n), dict)
        },
        "columns": [title_name, *columns],
        "rows": len(rows),
    }
    newest = max((r.last_edited for r in rows.values() if r.last_edited), default=None)
    edited = parse_time(ds.get("last_edited_time"))
    doc = Document(
        source_type=SOURCE_TYPE,
        document_id=str(ds.get("id") or ds_id),
        source_page_id=ds_id,
        title=plain_text(ds.get("title")).strip() or "Untitled data source",
        content="\n".join(lines) + "\n",
        url=ds.get("url") if isinstance(ds.get("url"), str) else None,
        metadata=metadata,
        source_updated_at=max((t for t in (edited, newest) if t), default=None),
    )
    return await write(doc)
