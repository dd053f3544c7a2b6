"""What a data source's table and a page's comments cost (issue 41), run by ``python -m bench
--only backfill`` after its phases (:func:`bench.backfill.run`).

The real ``NotionSyncer`` and ``notion-client`` against the Notion stand-in on loopback, the
real enqueue statement, on a throwaway database. A data source of ``rows`` rows (5 000; 1 000
with ``--quick``) whose row documents are stored (as their page syncs would write them, one
transaction), then:

- **full sync** (``data_source.created``): ``data_sources.retrieve`` + every row through
  ``data_sources.query`` — expected ``1 + ceil(rows / 100)`` requests;
- **rows sync** (a burst of ``data_source.content_updated`` after one row was edited): the
  stored row documents plus the query of the rows edited since the watermark — expected 1;
- **comment change** (``comment.created`` on a page with 3 open comments): 1 request
  (``comments.list``), and a **body edit** of the same page: 0 comment requests.

One JSON line ``bench: "table_sync"`` with the requests by endpoint, the wall time of each
sync and of the read of the stored rows, and ``goal_*`` booleans.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, scratch_database
from debounce import queue
from debounce.contract import Document, SyncContext
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent, SyncJob
from integrations.notion import NotionSettings, NotionSyncer
from integrations.notion.datasource import full_sync_requests
from integrations.notion.properties import page_properties, parent_summary
from integrations.notion.webhook import event_kinds
from standins.notion_api import FakeNotion, paragraph
from standins.notion_content import property_value
from standins.server import BackgroundServer

__all__ = ["run"]

TOKEN = "secret_bench_tables_token"


def _stamp(n: int) -> str:
    return (datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=n)).isoformat().replace("+00:00", ".000Z")


def _event(event_type: str, entity: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "timestamp": _stamp(99_000),
        "type": event_type,
        "entity": {"id": entity, "type": kind},
        "data": {},
        **extra,
    }


async def _sync(
    pool: AsyncConnectionPool[Any], syncer: NotionSyncer, key: str, events: list[dict[str, Any]]
) -> float:
    """Enqueue ``events`` (one job), sync it, finish it; the sync's wall seconds."""
    async with pool.connection() as conn:
        await queue.enqueue(
            conn, [JobEvent("notion", key, e, e["id"], 0, 0, kinds=event_kinds(e["type"], e)) for e in events]
        )
        cur = await conn.execute(
            "select * from sync_jobs where source_page_id = %s "  # bench-only
            "and status = 'pending'",
            (key,),
        )
        row = await cur.fetchone()
        assert row is not None and cur.description is not None
        job = SyncJob.from_row(dict(zip([c.name for c in cur.description], row, strict=True)))
        start = time.monotonic()
        await syncer.sync(job, SyncContext(store=DocumentStore(conn)))
        wall = time.monotonic() - start
        await conn.execute(  # bench-only: the job ends as settle ends one (migration 034)
            "with g as (delete from sync_jobs where id = %s returning *) "
            "insert into finished_jobs select g.id, g.source_type, g.source_page_id, 'completed', "
            "g.payload, g.event_id, g.event_count, g.priority, g.attempts, g.max_attempts, "
            "g.scheduled_at, g.first_event_at, g.max_wait_until, null, null, null, null, g.revision, "
            "g.claimed_revision, g.last_error, g.created_at, now(), now(), g.workspace_id, null, "
            "g.change_kinds from g",
            (job.id,),
        )
    return round(wall, 3)


async def _world(url: str, rows: int) -> dict[str, Any]:
    fake = FakeNotion(token=TOKEN)
    db = fake.add_database(title="Big", schema={"Name": "title", "Points": "number"})
    ds = fake.databases[db]["data_sources"][0]["id"]
    ids = fake.add_rows(
        ds, rows, properties=lambda n: {"Points": property_value("number", n)}, created=_stamp
    )
    page = fake.add_page(title="Discussed", blocks=[paragraph("Body.")])
    _, thread = fake.add_comment(page, "First?")
    fake.add_comment(page, "Yes.", discussion_id=thread)
    fake.add_comment(page, "Another thread")
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=4, open=False, kwargs={"autocommit": True}, timeout=30
    )
    await pool.open(wait=True)
    out: dict[str, Any] = {"rows": rows}
    with BackgroundServer(fake.app()) as server:
        syncer = NotionSyncer(NotionSettings(notion_token=TOKEN, notion_base_url=server.url))
        try:
            async with pool.connection() as conn, conn.transaction():
                store = DocumentStore(conn)
                for n, row in enumerate(ids):
                    obj = fake.pages[row]
                    await store.upsert(
                        Document(
                            "notion",
                            row,
                            row,
                            f"Row {n + 1}",
                            "",
                            obj["url"],
                            {
                                "object": "page",
                                "parent": parent_summary(obj["parent"]),
                                "created_time": obj["created_time"],
                                "properties": page_properties(obj["properties"]),
                            },
                            datetime.fromisoformat(obj["last_edited_time"]),
                        )
                    )
            fake.calls.clear()
            wall = await _sync(pool, syncer, ds, [_event("data_source.created", ds, "data_source")])
            out["full_sync"] = {"requests": dict(fake.calls), "wall_seconds": wall}
            fake.pages[ids[rows // 2]]["properties"]["Points"] = property_value("number", -1)
            fake.touch(ids[rows // 2], _stamp(rows + 10))
            fake.calls.clear()
            burst = [_event("data_source.content_updated", ds, "data_source") for _ in range(5)]
            wall = await _sync(pool, syncer, ds, burst)
            out["rows_sync"] = {"events": len(burst), "requests": dict(fake.calls), "wall_seconds": wall}
            async with pool.connection() as conn:
                start = time.monotonic()
                found = await DocumentStore(conn).current_matching("notion", {"parent": {"id": ds}})
                out["stored_rows_read_seconds"] = round(time.monotonic() - start, 3)
                out["stored_rows_read"] = len(found)
            await _sync(pool, syncer, page, [_event("page.created", page, "page")])
            fake.calls.clear()
            await _sync(
                pool, syncer, page, [_event("comment.created", page, "comment", data={"page_id": page})]
            )
            out["comment_change"] = {"requests": dict(fake.calls)}
            fake.calls.clear()
            await _sync(pool, syncer, page, [_event("page.content_updated", page, "page")])
            out["body_edit"] = {"requests": dict(fake.calls)}
        finally:
            await syncer.aclose()
    await pool.close()
    return out


def run(server_url: str, quick: bool = False) -> None:
    """The table and comment figures (module doc), one JSON line."""
    rows = 1000 if quick else 5000
    note(f"table_sync: a data source of {rows} rows, then a page's comments")
    with scratch_database(server_url, "tables") as url:
        got = asyncio.run(_world(url, rows))
    full = sum(got["full_sync"]["requests"].values())
    emit(
        "table_sync",
        **got,
        goal_full_sync_requests=full == full_sync_requests(rows),
        goal_rows_sync_one_request=got["rows_sync"]["requests"] == {"data_sources.query": 1},
        goal_comment_change_one_request=got["comment_change"]["requests"] == {"comments.list": 1},
        goal_body_edit_no_comment_request="comments.list" not in got["body_edit"]["requests"],
    )
