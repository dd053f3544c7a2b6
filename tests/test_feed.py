"""The change feed (migration 013, debounce.documents.feed): one change per visible write, in the same
transaction; gap-free under concurrent commits; cursors, epochs, retention."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from db_probe import scalar
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from xids import advance_past, closed, newest_bound

from debounce.documents import feed
from debounce.documents.feed_listen import ChangeSignal, read_waiting
from debounce.documents.store import Document, DocumentStore, content_sha256
from debounce.migrate import migrate
from debounce.worker.maintenance import prune_once

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def doc(
    document_id: str, content: str, *, source: str = "notion", title: str = "T", page: str | None = None
) -> Document:
    return Document(
        source_type=source,
        document_id=document_id,
        source_page_id=page or document_id.split("/")[0],
        title=title,
        url=None,
        content=content,
        metadata={"k": content[:3]},
    )


async def read_all(
    db: Any, after: feed.Cursor | None = None, **filters: Any
) -> tuple[list[feed.Change], feed.Cursor]:
    """Every change after ``after`` once all committed ones are servable."""
    await servable(db)
    changes: list[feed.Change] = []
    while True:
        page = await feed.read_changes(db, after, 7, **filters)
        changes += page.changes
        after = page.next
        if page.at_head and not page.changes:
            return changes, after


async def test_each_visible_write_appends_one_change_and_bookkeeping_appends_none(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    assert await store.upsert(doc("p1", "one")) == "inserted"
    assert await store.upsert(doc("p1", "one")) == "unchanged"  # synced_at only
    assert await store.upsert(doc("p1", "one", title="New")) == "updated"
    assert await store.upsert(doc("C1/1.2", "thread", source="slack")) == "inserted"
    assert await store.mark_deleted("notion", ["p1"]) == ["p1"]
    assert await store.mark_deleted("notion", ["p1"]) == []  # already a tombstone
    async with pool.connection() as conn:
        await conn.execute("update documents set listed_at = now()")  # bookkeeping
        await conn.execute("delete from documents where source_type = 'slack'")
    changes, _ = await read_all(pool)
    assert [(c.source, c.document_id, c.op) for c in changes] == [
        ("notion", "p1", "upsert"),
        ("notion", "p1", "upsert"),
        ("slack", "C1/1.2", "upsert"),
        ("notion", "p1", "delete"),
        ("slack", "C1/1.2", "delete"),
    ]
    assert changes[0].content_sha256 == content_sha256("one")
    assert changes[2].source_page_id == "C1"
    assert [c.cursor for c in changes] == sorted(c.cursor for c in changes)


async def test_a_rolled_back_write_leaves_no_change(pool: AsyncConnectionPool[Any]) -> None:
    async with pool.connection() as conn:
        async with conn.transaction(force_rollback=True):
            await DocumentStore(conn).upsert(doc("gone", "never"))
    await DocumentStore(pool).upsert(doc("kept", "yes"))
    changes, _ = await read_all(pool)
    assert [c.document_id for c in changes] == ["kept"]


async def test_a_change_waits_for_older_open_transactions(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """A transaction that took its id first and commits last: nothing after it is served
    while it is open, and its change comes before the later ones once it commits."""
    async with await psycopg.AsyncConnection.connect(database_url) as old:
        await old.execute("select pg_current_xact_id()")  # takes its id now
        await DocumentStore(pool).upsert(doc("later", "b"))  # commits first, behind `old`
        page = await feed.read_changes(pool, None, 10)
        assert page.changes == [] and page.at_head and page.pending
        assert await feed.lag(pool) >= 0.0
        await DocumentStore(old).upsert(doc("earlier", "a"))
        await old.commit()
    changes, _ = await read_all(pool)
    assert [c.document_id for c in changes] == ["earlier", "later"]


async def test_a_document_written_by_an_older_transaction_after_a_newer_one_keeps_its_order(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """The older transaction's write of the same document comes last, as the row shows."""
    async with await psycopg.AsyncConnection.connect(database_url) as old:
        await old.execute("select pg_current_xact_id()")
        await DocumentStore(pool).upsert(doc("same", "newer-xid"))
        await DocumentStore(old).upsert(doc("same", "older-xid"))
        await old.commit()
    changes, _ = await read_all(pool)
    row = await DocumentStore(pool).get("notion", "same")
    assert row is not None
    assert [c.content_sha256 for c in changes] == [content_sha256("newer-xid"), content_sha256("older-xid")]
    assert changes[-1].content_sha256 == row["content_sha256"]


async def _writer(
    database_url: str, ids: list[str], rounds: int, seed: int, gate: asyncio.Event, hold: bool
) -> None:
    rng = random.Random(seed)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        store = DocumentStore(conn)
        for r in range(rounds):
            await conn.execute("select pg_current_xact_id()")
            # Sorted: writers lock documents in one order (no deadlocks). A held transaction
            # writes documents of its own, so the others do not wait for it.
            chosen = [f"held-{seed}-{k}" for k in range(3)] if hold and r == 0 else sorted(rng.sample(ids, 3))
            for document_id in chosen:
                if rng.random() < 0.15:
                    await store.mark_deleted("notion", [document_id])
                else:
                    await store.upsert(doc(document_id, f"{document_id} r{r} w{seed}"))
            if hold and r == 0:
                await gate.wait()  # held open while the others commit
            await conn.commit()
            await asyncio.sleep(0)


async def test_a_follower_sees_every_change_once_under_concurrent_writers(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    ids = [f"doc-{i}" for i in range(12)]
    gate = asyncio.Event()
    writers = [
        asyncio.create_task(_writer(database_url, ids, 8, seed, gate, hold=seed < 2)) for seed in range(6)
    ]
    seen: list[feed.Change] = []
    after: feed.Cursor | None = None
    reads = 0
    while not all(w.done() for w in writers) or reads == 0:
        page = await feed.read_changes(pool, after, 5)
        seen += page.changes
        after = page.next
        reads += 1
        if sum(w.done() for w in writers) >= 4:
            gate.set()  # the held transactions commit after the others
        await asyncio.sleep(0)
    await asyncio.gather(*writers)
    rest, _ = await read_all(pool, after)
    seen += rest
    async with pool.connection() as conn:
        logged = await (
            await conn.execute(
                "select feed_xid::text as xid, seq from document_changes order by feed_xid, seq"
            )
        ).fetchall()
        final = {
            r[0]: (r[1], r[2])
            for r in await (
                await conn.execute(
                    "select document_id, content_sha256, deleted_at is not null from documents"
                )
            ).fetchall()
        }
    positions = [c.cursor.position() for c in seen]
    assert len(positions) == len(set(positions)), "a change was served twice"
    assert positions == [(int(x), s) for x, s in logged], "the follower missed or reordered"
    assert reads > 3 and len(seen) > 100
    last: dict[str, feed.Change] = {}
    for change in seen:
        last[change.document_id] = change
    assert {k: (c.content_sha256, c.op == "delete") for k, c in last.items()} == final


async def test_filters_skip_changes_and_still_move_the_cursor(pool: AsyncConnectionPool[Any]) -> None:
    store = DocumentStore(pool)
    for i in range(30):
        await store.upsert(doc(f"n{i}", "x"))
    await store.upsert(doc("C9/1.0", "s", source="slack"))
    await servable(pool)
    page = await feed.read_changes(pool, None, 10, source_type="slack")
    assert [c.document_id for c in page.changes] == ["C9/1.0"]
    assert page.at_head
    assert (await feed.read_changes(pool, page.next, 10)).changes == []
    none = await feed.read_changes(pool, None, 10, workspace_id=12345)
    assert none.changes == [] and none.next == page.next


async def test_cursors_round_trip_and_malformed_ones_are_refused() -> None:
    cursor = feed.Cursor("7306099999999999999", 123456, 42)
    assert feed.Cursor.decode(cursor.encode()) == cursor
    for bad in (
        "",
        "not a cursor",
        "%%%",
        feed.Cursor("x", 1, 1).encode(),
        "MS4yLjk5OTk5OTk5OTk5OTk5OTk5OTk5",
    ):
        with pytest.raises(feed.CursorError):
            feed.Cursor.decode(bad)


async def test_a_cursor_of_another_database_or_from_the_future_is_gone(
    pool: AsyncConnectionPool[Any],
) -> None:
    await DocumentStore(pool).upsert(doc("a", "1"))
    head = await feed.head(pool)
    with pytest.raises(feed.CursorGone) as other:
        await feed.read_changes(pool, feed.Cursor("1", head.xid, 0), 10)
    assert other.value.reason == "epoch"
    # (other sessions on the server move the head on meanwhile)
    assert other.value.head.epoch == head.epoch and other.value.head >= head
    with pytest.raises(feed.CursorGone) as future:
        await feed.read_changes(pool, feed.Cursor(head.epoch, head.xid + 10**9, 0), 10)
    assert future.value.reason == "future"


async def test_a_restored_log_of_another_cluster_is_served_by_no_read_and_emptied_by_migrate(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """A read writes nothing (a standby runs it): it serves nothing of a log copied from
    another cluster; ``debounce migrate`` (or the prune) empties it."""
    await DocumentStore(pool).upsert(doc("a", "1"))
    async with pool.connection() as conn:
        await conn.execute("update document_feed set system_identifier = '42'")
    page = await feed.read_changes(pool, None, 10)
    assert page.changes == [] and page.behind and page.next.epoch != "42"
    assert await scalar(pool, "select count(*) from document_changes") == 1  # untouched
    assert await migrate(database_url) == []
    assert await scalar(pool, "select count(*) from document_changes") == 0
    await DocumentStore(pool).upsert(doc("a", "2"))
    assert [c.content_sha256 for c in (await read_all(pool))[0]] == [content_sha256("2")]


async def test_retention_prunes_old_changes_and_moves_the_oldest_cursor(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    for i in range(5):
        await store.upsert(doc(f"old{i}", "x"))
    old, _ = await read_all(pool)
    async with pool.connection() as conn:
        await conn.execute("update document_changes set changed_at = %s", [T0])
    # Retention drops whole partitions (migration 028): the new change goes past the bound of
    # the partition of the old ones, which closes once no transaction below it runs.
    bound = await newest_bound(pool)
    await advance_past(pool, bound)
    await store.upsert(doc("new", "y"))
    await servable(pool)
    await closed(pool, bound)
    done = await prune_once(
        pool, 7 * 86400, 3 * 86400, change_retention=86400, batch=2, now=T0 + timedelta(days=1, seconds=1)
    )
    assert done == {"jobs": 0, "events": 0, "changes": 5}
    with pytest.raises(feed.CursorGone) as gone:
        await feed.read_changes(pool, old[2].cursor, 10)
    assert gone.value.reason == "pruned"
    after_last_pruned, _ = await read_all(pool, old[-1].cursor)
    assert [c.document_id for c in after_last_pruned] == ["new"]
    everything, _ = await read_all(pool)
    assert [c.document_id for c in everything] == ["new"]
    # Recent changes stay.
    pruned = await feed.prune_changes(pool, 86400)
    assert pruned is not None and pruned.changes == 0


async def test_a_waiting_reader_is_woken_by_a_write(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    signal = ChangeSignal(pool)
    try:
        start = await feed.head(pool)
        signal.mark()
        await signal.listening.wait()
        waiting = asyncio.create_task(read_waiting(pool, signal, start, 10, 30.0))
        while signal.waiting == 0:  # it read nothing and waits
            assert not waiting.done()
            await asyncio.sleep(0)
        await DocumentStore(pool).upsert(doc("woke", "up"))
        page = await asyncio.wait_for(waiting, 20)
        assert [c.document_id for c in page.changes] == ["woke"]
        empty = await read_waiting(pool, signal, page.next, 10, 0.0)
        assert empty.changes == [] and empty.next == page.next
    finally:
        await signal.close()
