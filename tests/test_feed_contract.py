"""The change feed's contract holes of issue 30: per-document order across a row deleted and
inserted again (point 5), every served change moves ``updated_at``, and a listing re-attaches
a document whose workspace was removed (point 6) — on real Postgres."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import psycopg
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool

from debounce import workspaces
from debounce.contract import BackfillItem
from debounce.documents import feed
from debounce.documents.store import Document, DocumentStore, content_sha256
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import backfills

T_OLD = datetime(2026, 1, 1, tzinfo=UTC)


def doc(document_id: str, content: str) -> Document:
    return Document(
        source_type="notion",
        document_id=document_id,
        source_page_id=document_id,
        title="T",
        url=None,
        content=content,
        metadata={},
    )


async def changes_of(pool: AsyncConnectionPool[Any], document_id: str) -> list[tuple[str, str]]:
    """``(op, content_sha256)`` of ``document_id``'s changes, as a follower reads them."""
    await servable(pool)
    out: list[tuple[str, str]] = []
    after = None
    while True:
        page = await feed.read_changes(pool, after, 100)
        out += [(c.op, c.content_sha256) for c in page.changes if c.document_id == document_id]
        after = page.next
        if page.at_head and not page.changes:
            return out


async def row_sha(pool: AsyncConnectionPool[Any], document_id: str) -> str:
    row = await DocumentStore(pool).get("notion", document_id)
    assert row is not None
    return str(row["content_sha256"])


async def test_a_row_deleted_and_inserted_again_by_an_older_transaction_keeps_document_order(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """Issue 30, point 5, as filed: T1 takes its id; T2 inserts D; T3 deletes D's row; T1
    inserts D again and commits last. The last change served is T1's upsert, as the row."""
    async with await psycopg.AsyncConnection.connect(database_url) as t1:
        await t1.execute("select pg_current_xact_id()")
        await DocumentStore(pool).upsert(doc("D", "h1"))  # T2
        async with pool.connection() as t3:
            await t3.execute("delete from documents where document_id = 'D'")  # T3
        await DocumentStore(t1).upsert(doc("D", "h2"))
        await t1.commit()
    assert await changes_of(pool, "D") == [
        ("upsert", content_sha256("h1")),
        ("delete", content_sha256("h1")),
        ("upsert", content_sha256("h2")),
    ]
    assert await row_sha(pool, "D") == content_sha256("h2")


async def test_an_insert_that_waited_for_a_concurrent_delete_comes_after_it(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """The same, with T3's delete still open while T1 inserts: T1's insert waits for it (the
    unique key) and is then placed after T3's delete."""
    await DocumentStore(pool).upsert(doc("D", "h1"))
    async with (
        await psycopg.AsyncConnection.connect(database_url) as t1,
        await psycopg.AsyncConnection.connect(database_url) as t3,
    ):
        await t1.execute("select pg_current_xact_id()")
        await t3.execute("delete from documents where document_id = 'D'")
        inserting = asyncio.create_task(DocumentStore(t1).upsert(doc("D", "h2")))
        async with pool.connection() as watch:  # T1 waits on T3's row
            while not await (
                await watch.execute(
                    "select exists (select 1 from pg_stat_activity where wait_event_type = "
                    "'Lock' and pid = %s)",
                    (t1.info.backend_pid,),
                )
            ).fetchone() == (True,):
                assert not inserting.done()
                await asyncio.sleep(0.01)
        await t3.commit()
        assert await inserting == "inserted"
        await t1.commit()
    assert await changes_of(pool, "D") == [
        ("upsert", content_sha256("h1")),
        ("delete", content_sha256("h1")),
        ("upsert", content_sha256("h2")),
    ]
    async with pool.connection() as conn:  # the row's position is its last change's
        row = await (
            await conn.execute(
                "select (d.feed_xid, d.feed_seq) = (select feed_xid, seq from document_changes "
                "order by feed_xid desc, seq desc limit 1) from documents d"
            )
        ).fetchone()
    assert row == (True,)


async def test_an_insert_that_took_its_sequence_before_a_concurrent_delete_finished_comes_after_it(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """The race the standby switching test found (one run in ~40 under load): T3's DELETE
    statement has removed D's row but not yet run its AFTER trigger (which takes the delete's
    sequence number) when T1's insert of D runs its BEFORE trigger (T1's sequence number,
    smaller) and then waits for T3 on the unique key. T1 is raised to T3's grave; with its
    old sequence number its upsert sorted *before* T3's delete, and the last change served
    was the delete while the row held T1's content. Made deterministic with an advisory lock
    that holds T3's statement between its row delete and the end of the statement."""
    await DocumentStore(pool).upsert(doc("D", "h1"))
    async with (
        await psycopg.AsyncConnection.connect(database_url) as t1,
        await psycopg.AsyncConnection.connect(database_url) as t3,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as gate,
    ):
        await t1.execute("select pg_current_xact_id()")  # T1 older than T3
        await gate.execute("select pg_advisory_lock(730030)")

        async def waiting(pid: int, kind: str) -> None:
            async with pool.connection() as watch:
                while await (
                    await watch.execute(
                        "select exists (select 1 from pg_locks where pid = %s and not granted "
                        "and locktype = %s)",
                        (pid, kind),
                    )
                ).fetchone() != (True,):
                    await asyncio.sleep(0.01)

        # T3's statement deletes the row, then waits (its AFTER triggers run at its end).
        deleting = asyncio.create_task(
            t3.execute(
                "with gone as (delete from documents where document_id = 'D' returning 1) "
                "select pg_advisory_xact_lock(730030) from gone"
            )
        )
        await asyncio.wait_for(waiting(t3.info.backend_pid, "advisory"), 10)
        inserting = asyncio.create_task(DocumentStore(t1).upsert(doc("D", "h2")))
        await asyncio.wait_for(waiting(t1.info.backend_pid, "transactionid"), 10)
        await gate.execute("select pg_advisory_unlock(730030)")
        await deleting
        await t3.commit()
        assert await inserting == "inserted"
        await t1.commit()
    assert await changes_of(pool, "D") == [
        ("upsert", content_sha256("h1")),
        ("delete", content_sha256("h1")),
        ("upsert", content_sha256("h2")),
    ]
    assert await row_sha(pool, "D") == content_sha256("h2")
    async with pool.connection() as conn:  # the row's position is its last change's
        row = await (
            await conn.execute(
                "select (d.feed_xid, d.feed_seq) = (select feed_xid, seq from document_changes "
                "order by feed_xid desc, seq desc limit 1) from documents d"
            )
        ).fetchone()
    assert row == (True,)


async def test_the_prune_buries_graves_no_transaction_can_raise_against(
    pool: AsyncConnectionPool[Any],
) -> None:
    await DocumentStore(pool).upsert(doc("D", "h1"))
    async with pool.connection() as conn:
        await conn.execute("delete from documents where document_id = 'D'")
        assert await (await conn.execute("select count(*) from document_graves")).fetchone() == (1,)
    await servable(pool)
    await feed.prune_changes(pool, 86400)
    async with pool.connection() as conn:
        assert await (await conn.execute("select count(*) from document_graves")).fetchone() == (0,)


async def add_workspace(pool: AsyncConnectionPool[Any], external_id: str) -> int:
    row = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type="notion",
        external_id=external_id,
        name=external_id,
        credentials={"access_token": f"tok-{external_id}"},
    )
    return int(row["id"])


async def test_removing_a_workspace_changes_no_document_and_bookkeeping_moves_nothing(
    pool: AsyncConnectionPool[Any],
) -> None:
    """A removal is a tombstone of the workspace (migration 022): its documents keep their
    workspace and their updated_at, and the feed shows no change (it used to detach them, one
    change each); bookkeeping alone (synced_at, listed_at) moves neither."""
    ws = await add_workspace(pool, "W")
    await DocumentStore(pool).upsert(doc("p", "x"))
    async with pool.connection() as conn:  # attached long ago (test-only SQL)
        await conn.execute("update documents set workspace_id = %s, updated_at = %s", (ws, T_OLD))
    # servable first: another session's open transaction on the shared server would leave the
    # head below the attach above, and its change would be read after `before` too
    await servable(pool)
    before = await feed.head(pool)
    await workspaces.remove(pool, ws)
    row = await DocumentStore(pool).get("notion", "p")
    assert row is not None and row["workspace_id"] == ws and row["updated_at"] == T_OLD
    async with pool.connection() as conn:
        await conn.execute("update documents set synced_at = now(), listed_at = now()")
    again = await DocumentStore(pool).get("notion", "p")
    assert again is not None and again["updated_at"] == T_OLD
    await servable(pool)
    page = await feed.read_changes(pool, before, 10)
    assert page.changes == []


async def test_a_workspace_connected_again_finds_its_documents_where_they_were(
    pool: AsyncConnectionPool[Any],
) -> None:
    """The demo's second run: the workspace removed, then connected again — the same row, so
    its documents are still its own, and its backfill finds the page current."""
    old = await add_workspace(pool, "W")
    edited = datetime(2026, 11, 1, tzinfo=UTC)
    await DocumentStore(pool).upsert(Document("notion", "p", "p", "p", "# p", source_updated_at=edited))
    async with pool.connection() as conn:
        await conn.execute("update documents set workspace_id = %s", (old,))
    await workspaces.remove(pool, old)
    new = await add_workspace(pool, "W")
    assert new == old
    started = await backfills.request(pool, new)
    assert started is not None
    assert await backfills.lease(pool, "w1", ["notion"], 60) is not None
    row = await backfills.record_page(
        pool, started["id"], "w1", [BackfillItem("p", edited, {})], None, lease_seconds=60, max_attempts=5
    )
    assert row is not None and row["current"] == 1 and row["page_enqueued"] == 0
    document = await DocumentStore(pool).get("notion", "p")
    assert document is not None and document["workspace_id"] == new
