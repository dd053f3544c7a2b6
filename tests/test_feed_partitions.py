"""The change log partitioned for retention (migration 028): writes land in the range
partition of their ``feed_xid``, the prune makes partitions ahead and drops whole closed
partitions past retention (nothing newer), the 410 frontier is the last change dropped, and
an upgrade keeps the changes written before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from feed_wait import servable
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from test_feed import doc, read_all
from xids import advance_past, closed, newest_bound

from debounce.documents import feed
from debounce.documents.store import DocumentStore
from debounce.infra.sql import migrations
from debounce.migrate import migrate
from debounce.worker.maintenance import prune_once

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=1, seconds=1)  # a day past T0: retention 86400 s expires T0's changes


async def rows(pool: AsyncConnectionPool[Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        found: list[tuple[Any, ...]] = await (await conn.execute(sql, args)).fetchall()  # test-only SQL
        return found


async def placement(pool: AsyncConnectionPool[Any]) -> dict[str, str]:
    """Each change's document id → the partition it is stored in (a range partition's is
    checked to hold its ``feed_xid``)."""
    found = await rows(
        pool,
        "select c.document_id, c.tableoid::regclass::text, p.lo <= c.feed_xid and c.feed_xid < p.hi "
        "from document_changes c "
        "left join document_change_partitions p on p.name = c.tableoid::regclass::text",
    )
    assert all(in_range or name == "document_changes_default" for _, name, in_range in found), found
    return {document_id: partition for document_id, partition, _ in found}


async def partitions(pool: AsyncConnectionPool[Any]) -> list[str]:
    return [name for (name,) in await rows(pool, "select name from document_change_partitions order by lo")]


async def upper_bound(pool: AsyncConnectionPool[Any], partition: str) -> int:
    found = await rows(pool, "select hi::text from document_change_partitions where name = %s", partition)
    return int(found[0][0])


async def age(pool: AsyncConnectionPool[Any], when: datetime, *document_ids: str) -> None:
    async with pool.connection() as conn:
        await conn.execute(  # test-only SQL: changes written at ``when``
            "update document_changes set changed_at = %s where document_id = any(%s)",
            [when, list(document_ids)],
        )


async def cross_bound(pool: AsyncConnectionPool[Any]) -> int:
    """Move the transaction ids past the newest partition's bound; returns the bound."""
    bound = await newest_bound(pool)
    await advance_past(pool, bound)
    return bound


async def test_writes_land_in_the_partition_of_their_position_across_a_bound(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    await store.upsert(doc("a", "1"))
    assert (await placement(pool))["a"] == "document_changes_1"  # the migration's partition
    pruned = await feed.prune_changes(pool, 86400)  # makes partitions ahead
    assert pruned is not None and pruned.added >= 1 and pruned.overflow == 0
    await advance_past(pool, await upper_bound(pool, "document_changes_1"))
    await store.upsert(doc("b", "2"))
    await store.upsert(doc("a", "3"))
    where = await placement(pool)
    assert where["b"] != "document_changes_1" and where["b"] in await partitions(pool)
    assert await rows(pool, "select count(*) from document_changes_default") == [(0,)]
    changes, _ = await read_all(pool)
    assert [c.document_id for c in changes] == ["a", "b", "a"]  # one feed across partitions


async def test_the_prune_drops_closed_partitions_past_retention_and_nothing_newer(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    for i in range(3):
        await store.upsert(doc(f"old{i}", "x"))
    await cross_bound(pool)
    await store.upsert(doc("burst", "x"))  # the DEFAULT partition: nothing made ahead yet
    await age(pool, T0, "old0", "old1", "old2", "burst")
    await prune_once(pool, 7 * 86400, 3 * 86400, change_retention=86400, now=T0)  # adopts it
    await store.upsert(doc("fresh", "y"))  # a partition made ahead by that prune
    before = await partitions(pool)
    where = await placement(pool)
    assert where["old0"] == "document_changes_1" != where["burst"] != where["fresh"]
    await servable(pool)
    await closed(pool, await upper_bound(pool, where["burst"]))
    done = await prune_once(pool, 7 * 86400, 3 * 86400, change_retention=86400, now=LATER)
    assert done is not None and done["changes"] == 4  # old0..2 and burst: two whole partitions
    after = await partitions(pool)
    assert after[: len(before) - 2] == before[2:] and after[0] == where["fresh"]  # (and more ahead)
    changes, _ = await read_all(pool)
    assert [c.document_id for c in changes] == ["fresh"]
    # A closed partition with one change inside retention stays whole, older ones with it.
    await store.upsert(doc("kept", "z"))
    assert (await placement(pool))["kept"] == where["fresh"]
    await age(pool, T0, "fresh")
    fresh_bound = await upper_bound(pool, where["fresh"])
    await advance_past(pool, fresh_bound)
    await closed(pool, fresh_bound)
    done = await prune_once(pool, 7 * 86400, 3 * 86400, change_retention=86400, now=LATER)
    assert done is not None and done["changes"] == 0
    assert [c.document_id for c in (await read_all(pool))[0]] == ["fresh", "kept"]


async def test_an_open_partition_is_not_dropped_until_its_transactions_end(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    store = DocumentStore(pool)
    await store.upsert(doc("old", "x"))
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute("select pg_current_xact_id()")  # a transaction id below the bound
        bound = await cross_bound(pool)
        await store.upsert(doc("new", "y"))
        await age(pool, T0, "old")
        pruned = await feed.prune_changes(pool, 86400, now=LATER)
        assert pruned is not None and pruned.changes == 0  # it could still write below the bound
        assert "document_changes_1" in await partitions(pool)
        await holder.rollback()
    await closed(pool, bound)
    pruned = await feed.prune_changes(pool, 86400, now=LATER)
    assert pruned is not None and (pruned.changes, pruned.partitions) == (1, 1)


async def test_a_cursor_below_the_dropped_changes_is_gone_and_one_at_their_edge_is_not(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    for i in range(3):
        await store.upsert(doc(f"old{i}", "x"))
    old, _ = await read_all(pool)
    bound = await cross_bound(pool)
    await store.upsert(doc("new", "y"))
    await age(pool, T0, "old0", "old1", "old2")
    await servable(pool)
    await closed(pool, bound)
    pruned = await feed.prune_changes(pool, 86400, now=LATER)
    assert pruned is not None and pruned.changes == 3
    state = await rows(pool, "select pruned_xid::text, pruned_seq from document_feed")
    assert state == [(str(old[-1].cursor.xid), old[-1].cursor.seq)]  # the last change dropped
    for below in (old[0].cursor, old[1].cursor):
        with pytest.raises(feed.CursorGone) as gone:
            await feed.read_changes(pool, below, 10)
        assert gone.value.reason == "pruned"
    edge, _ = await read_all(pool, old[-1].cursor)
    assert [c.document_id for c in edge] == ["new"]
    oldest, _ = await read_all(pool)  # no cursor: from the oldest change kept
    assert [c.document_id for c in oldest] == ["new"]


async def test_the_prune_makes_partitions_ahead_and_empties_the_default(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    bound = await cross_bound(pool)  # a burst past the migration's partition
    await store.upsert(doc("burst", "1"))
    assert (await placement(pool))["burst"] == "document_changes_default"
    ((before,),) = await rows(pool, "select pg_snapshot_xmax(pg_current_snapshot())::text::numeric")
    pruned = await feed.prune_changes(pool, 86400)
    assert pruned is not None and pruned.overflow == 1 and pruned.added >= 1
    assert await rows(pool, "select count(*) from document_changes_default") == [(0,)]
    adopted = (await placement(pool))["burst"]
    assert adopted == f"document_changes_{bound}"  # its own range, from the old bound
    ((top, width),) = await rows(
        pool,
        "select max(hi)::text::numeric, "
        "(array_agg(hi::text::numeric - lo::text::numeric order by lo desc))[1] "
        "from document_change_partitions",
    )
    assert top >= before + width  # a partition's width of headroom past the prune's newest id
    await store.upsert(doc("next", "2"))
    assert (await placement(pool))["next"] != "document_changes_default"
    again = await feed.prune_changes(pool, 86400)
    assert again is not None and again.overflow == 0


@pytest.fixture
def schema_without_028(pg_server_url: str) -> Iterator[str]:
    """A schema with every migration but 028 (the change log before partitions, as a
    deployment that ran the later migrations first has it)."""
    schema = "p_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')  # name is ours
    url = make_conninfo(pg_server_url, options=f"-c search_path={schema}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "create table schema_migrations (version integer primary key, name text "
            "not null, applied_at timestamptz not null default now())"
        )
        for version, name, text in migrations():
            if version == 28:
                continue
            conn.execute(text.encode())
            conn.execute("insert into schema_migrations (version, name) values (%s, %s)", (version, name))
    try:
        yield url
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema}" cascade')


async def test_an_upgrade_keeps_the_changes_written_before(schema_without_028: str) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        schema_without_028, min_size=1, max_size=4, open=False, kwargs={"autocommit": True}, timeout=10
    )
    await pool.open(wait=True)
    try:
        store = DocumentStore(pool)
        for i in range(4):
            await store.upsert(doc(f"d{i}", "x"))
        await store.upsert(doc("d0", "changed"))
        before, head = await read_all(pool)
        assert [name for name in await migrate(schema_without_028)] == ["028_change_log_partitions.sql"]
        after, head_after = await read_all(pool)
        assert after == before and head_after == head
        assert set((await placement(pool)).values()) == {"document_changes_1"}
        mid, _ = await read_all(pool, before[1].cursor)  # a consumer's cursor still follows
        assert mid == before[2:]
        await store.upsert(doc("d9", "new"))
        assert [c.document_id for c in (await read_all(pool, head))[0]] == ["d9"]
    finally:
        await pool.close()


async def test_a_logical_restore_drops_the_other_clusters_partitions(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    await DocumentStore(pool).upsert(doc("a", "1"))
    async with pool.connection() as conn:  # test-only SQL: a log restored from another cluster
        await conn.execute("update document_feed set system_identifier = '42'")
        await conn.execute(
            "select document_changes_add((select max(hi) from document_change_partitions), "
            "'99999999999'::xid8, now())"
        )
        await conn.execute(
            "insert into document_changes (feed_xid, seq, source_type, document_id, source_page_id, op, "
            "updated_at, content_sha256) values ('99999999990', 1, 'notion', 'x', 'x', 'upsert', now(), 'h')"
        )
    assert await migrate(database_url) == []  # its reset of the epoch
    assert await partitions(pool) == ["document_changes_1"]
    assert await rows(pool, "select count(*) from document_changes") == [(0,)]
    await DocumentStore(pool).upsert(doc("a", "2"))
    assert (await placement(pool))["a"] == "document_changes_1"
    assert [c.document_id for c in (await read_all(pool))[0]] == ["a"]
