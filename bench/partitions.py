"""The change log partitioned for retention (issue 40, point 4; migration 028): what pruning
costs as a partition drop against the DELETE it replaced, what a follower reads per second
from either table, and how large each is before and after the prune.

One ``partitions`` line per size (``--quick``: 100 k changes; the full run 1 M and 10 M). A
log of ``changes`` rows spread over 14 days of ``changed_at`` and over eight range partitions of
``feed_xid`` (transaction ids already ended, so every partition is closed) is filled with
``INSERT … SELECT generate_series``, and an unpartitioned copy with the same rows and primary
key (the table of migration 027) next to it; both are vacuumed. Then, with a retention of
7 days:

- ``follow_*_per_s``: changes per second (best of three turns) a follower reads with the real feed read
  (``feed.read_changes``, ``limit=1000``) from a cursor in the middle of the log, before the
  prune, and from the retention frontier after it — the unpartitioned copy is renamed into
  ``document_changes`` for its turn, so both run the same statement;
- ``prune_drop_s``: the product's prune (``feed.prune_changes``: partitions made ahead, then
  the closed partitions past retention dropped); ``prune_read_closed_s``: the prune before it
  (retention 14 days: it drops nothing), which reads each newly closed partition once (its
  newest change and count; in a deployment each partition is read once in its life);
  ``prune_delete_s``: one DELETE of the same rows from the copy (a lower bound of the
  release before, which deleted in statements of 5000 with a window over each), and
  ``vacuum_after_delete_s``: the VACUUM that DELETE owes;
- ``*_bytes_*``: ``pg_total_relation_size`` (heap, TOAST and indexes; of every partition for
  the partitioned table) before the prune, after it, and for the copy after its VACUUM too.

One ``partitions_finished_jobs`` line per size (``--quick``: 100 k finished jobs; the full run
1 M): ``finished_jobs`` (migration 034) filled with jobs finished over 14 days, in the
partitions a prune makes (a 7-day retention: 21 h each), and a copy laid out as ``sync_jobs``
was before (the finished rows among the active ones' table, its indexes and the partial
``sync_jobs_finished`` index). ``prune_drop_s``: the product's prune (``queue.prune``: the
partitions past retention dropped); ``prune_delete_s``: the release before's prune of the same
rows from the copy, its statement (``DELETE`` of 5 000 rows at a time through
``sync_jobs_finished``) repeated until it deleted fewer; ``vacuum_after_delete_s``; and the sizes
before, after, and after that VACUUM.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, scratch_database
from debounce import queue
from debounce.documents import feed

RETENTION = 7 * 86400.0
PARTS = 8
ROUNDS = 3

# Bench-only SQL: the synthetic layout (the product makes partitions from the xids it sees).
_LAYOUT = """
select document_changes_add(
           (1 + k * (%(top)s::bigint - 1) / %(parts)s)::text::xid8,
           (1 + (k + 1) * (%(top)s::bigint - 1) / %(parts)s)::text::xid8, now())
  from generate_series(0, %(parts)s - 1) k
"""
_FILL = """
insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                              source_page_id, op, updated_at, content_sha256, changed_at)
select (1 + i * (%(top)s::bigint - 1) / %(n)s)::text::xid8, i, 'notion', 1 + i %% 10,
       'doc-' || (i %% 100000), 'doc-' || (i %% 100000), 'upsert', t, md5(i::text) || md5(i::text), t
  from generate_series(0, %(n)s - 1) i,
       lateral (select now() - interval '14 days' + i * interval '14 days' / %(n)s as t) c
"""
_FLAT = """
create table document_changes_flat (like document_changes including defaults including constraints);
insert into document_changes_flat select * from document_changes;
alter table document_changes_flat add primary key (feed_xid, seq);
"""
_SIZE_PARTED = """
select coalesce(sum(pg_total_relation_size(relid)), 0)::bigint
  from pg_partition_tree('document_changes') where isleaf
"""


def _size(conn: psycopg.Connection[Any], flat: bool) -> int:
    query = "select pg_total_relation_size('document_changes_flat')" if flat else _SIZE_PARTED
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def _swap(conn: psycopg.Connection[Any], flat: bool) -> None:
    """Put the unpartitioned copy (``flat``) or the partitioned log under the name the feed
    reads."""
    if flat:
        conn.execute("alter table document_changes rename to document_changes_parted")
        conn.execute("alter table document_changes_flat rename to document_changes")
    else:
        conn.execute("alter table document_changes rename to document_changes_flat")
        conn.execute("alter table document_changes_parted rename to document_changes")


async def _follow(url: str, start: feed.Cursor, count: int) -> float:
    """Changes per second read with ``feed.read_changes`` from ``start`` until ``count``."""
    async with AsyncConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        await feed.read_changes(pool, start, 10)  # warm the connection and the plan
        read, after = 0, start
        t0 = time.perf_counter()
        while read < count:
            page = await feed.read_changes(pool, after, feed.MAX_LIMIT)
            if not page.changes:
                break
            read += len(page.changes)
            after = page.next
        return read / (time.perf_counter() - t0)


def _follows(conn: psycopg.Connection[Any], url: str, start: feed.Cursor, count: int) -> tuple[float, float]:
    """Best of ``ROUNDS`` :func:`_follow` of the copy and of the partitioned log, in turns (the
    machine is shared: turns spread the noise over both)."""
    flat, parted = 0.0, 0.0
    for _ in range(ROUNDS):
        _swap(conn, True)
        flat = max(flat, asyncio.run(_follow(url, start, count)))
        _swap(conn, False)
        parted = max(parted, asyncio.run(_follow(url, start, count)))
    return flat, parted


async def _prune(url: str, retention: float) -> tuple[feed.Pruned, float]:
    async with AsyncConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        await pool.wait()  # the connection made: not timed
        t0 = time.perf_counter()
        pruned = await feed.prune_changes(pool, retention)
        seconds = time.perf_counter() - t0
    assert pruned is not None
    return pruned, seconds


def _one(server_url: str, n: int, follow: int) -> None:
    with scratch_database(server_url, "partitions") as url, psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select pg_snapshot_xmin(pg_current_snapshot())::text::bigint").fetchone()
        assert row is not None
        top = int(row[0])  # every transaction below it has ended: the partitions are closed
        conn.execute("drop table document_changes_1")  # bench-only SQL: the layout
        conn.execute("delete from document_change_partitions")
        conn.execute(_LAYOUT, {"top": top, "parts": PARTS})
        t0 = time.perf_counter()
        conn.execute(_FILL, {"top": top, "n": n})
        fill_s = time.perf_counter() - t0
        conn.execute(_FLAT.encode())
        conn.execute("vacuum analyze document_changes_flat")
        conn.execute("vacuum analyze document_changes")
        note(f"partitions: {n} changes in {fill_s:.1f} s (and the unpartitioned copy)")
        row = conn.execute("select system_identifier::text from document_feed").fetchone()
        assert row is not None
        epoch = row[0]
        row = conn.execute(
            "select feed_xid::text, seq from document_changes where seq = %s", [int(n * 0.6)]
        ).fetchone()
        assert row is not None
        middle = feed.Cursor(epoch, int(row[0]), int(row[1]))
        sizes = {"flat_bytes_before": _size(conn, True), "parted_bytes_before": _size(conn, False)}

        flat_before, parted_before = _follows(conn, url, middle, follow)

        # the prunes before, which found each partition closed and read it once
        _, read_s = asyncio.run(_prune(url, 2 * RETENTION))
        pruned, drop_s = asyncio.run(_prune(url, RETENTION))
        row = conn.execute("select pruned_xid::text, pruned_seq from document_feed").fetchone()
        assert row is not None
        frontier = feed.Cursor(epoch, int(row[0]), int(row[1]))
        t0 = time.perf_counter()
        cur = conn.execute(
            "delete from document_changes_flat where (feed_xid, seq) <= (%s::text::xid8, %s)",
            [str(frontier.xid), frontier.seq],
        )
        delete_s = time.perf_counter() - t0
        deleted = cur.rowcount
        sizes["flat_bytes_after"] = _size(conn, True)
        sizes["parted_bytes_after"] = _size(conn, False)

        # the copy right after its DELETE: dead rows not vacuumed yet
        flat_after, parted_after = _follows(conn, url, frontier, follow)
        t0 = time.perf_counter()
        conn.execute("vacuum document_changes_flat")
        vacuum_s = time.perf_counter() - t0
        sizes["flat_bytes_after_vacuum"] = _size(conn, True)

    emit(
        "partitions",
        changes=n,
        partitions=PARTS,
        fill_s=round(fill_s, 1),
        pruned_changes=pruned.changes,
        pruned_partitions=pruned.partitions,
        added_partitions=pruned.added,
        deleted_changes=deleted,
        prune_read_closed_s=round(read_s, 3),
        prune_drop_s=round(drop_s, 4),
        prune_delete_s=round(delete_s, 3),
        vacuum_after_delete_s=round(vacuum_s, 3),
        follow_changes=follow,
        follow_flat_before_per_s=round(flat_before),
        follow_parted_before_per_s=round(parted_before),
        follow_flat_after_per_s=round(flat_after),
        follow_parted_after_per_s=round(parted_after),
        **sizes,
        goal_prune_is_partition_drop=pruned.partitions > 0 and pruned.changes == deleted > 0,
        goal_prune_faster=drop_s < delete_s,
        # noisy on a shared machine: a tenth of slack
        goal_follow_not_slower=parted_before >= 0.9 * flat_before and parted_after >= 0.9 * flat_after,
        goal_space_returned=sizes["parted_bytes_after"] < sizes["flat_bytes_after_vacuum"],
    )


# Bench-only SQL: finished jobs over 14 days in the partitions a 7-day retention's prune makes
# (the migration's partitions, empty, go first), and the copy laid out as sync_jobs was.
_JOBS_LAYOUT = """
select finished_jobs_cover(now() - interval '14 days', now() + make_interval(secs => %(span)s),
                           make_interval(secs => %(span)s))
"""
_JOBS_FILL = """
insert into finished_jobs (id, source_type, source_page_id, status, payload, event_count, attempts,
                           scheduled_at, first_event_at, max_wait_until, revision, claimed_revision,
                           created_at, updated_at, finished_at, workspace_id)
select i, case when i %% 2 = 0 then 'notion' else 'slack' end, 'page-' || i,
       case when i %% 50 = 0 then 'failed' else 'completed' end,
       '{"type": "page.content_updated"}'::jsonb, 1, 1, t, t, t + interval '5 minutes', 1, 1, t, t,
       t, null
  from generate_series(1, %(n)s) i,
       lateral (select now() - interval '14 days' + i * interval '14 days' / %(n)s as t) c
"""
_JOBS_FLAT = """
create table sync_jobs_flat (like sync_jobs including defaults including indexes);
create index sync_jobs_flat_finished on sync_jobs_flat (finished_at)
    where status in ('completed', 'failed');
insert into sync_jobs_flat select * from finished_jobs;
"""
#: The prune of finished jobs of the release before (migration 033's sync_jobs), one batch.
_JOBS_DELETE = """
delete from sync_jobs_flat j
 where j.id in (select f.id from sync_jobs_flat f
                 where f.status in ('completed', 'failed') and f.finished_at < %(cutoff)s
                 order by f.finished_at
                 limit 5000
                   for update of f skip locked)
"""
_JOBS_SIZE_PARTED = """
select coalesce(sum(pg_total_relation_size(relid)), 0)::bigint
  from pg_partition_tree('finished_jobs') where isleaf
"""


def _jobs_size(conn: psycopg.Connection[Any], flat: bool) -> int:
    query = "select pg_total_relation_size('sync_jobs_flat')" if flat else _JOBS_SIZE_PARTED
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


async def _prune_jobs(url: str, retention: float) -> tuple[dict[str, int], float]:
    async with AsyncConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        await pool.wait()  # the connection made: not timed
        t0 = time.perf_counter()
        pruned = await queue.prune(pool, retention, exclusive=True)
        seconds = time.perf_counter() - t0
    assert pruned is not None
    return pruned, seconds


def _jobs(server_url: str, n: int) -> None:
    span = RETENTION / queue.JOB_PARTITIONS_PER_RETENTION
    with scratch_database(server_url, "finished") as url, psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute("select name from finished_job_partitions").fetchall():
            conn.execute(sql.SQL("drop table {}").format(sql.Identifier(name)))  # bench-only: the layout
        conn.execute("delete from finished_job_partitions")
        conn.execute(_JOBS_LAYOUT, {"span": span})
        t0 = time.perf_counter()
        conn.execute(_JOBS_FILL, {"n": n})
        fill_s = time.perf_counter() - t0
        conn.execute(_JOBS_FLAT.encode())
        conn.execute("vacuum analyze sync_jobs_flat")
        conn.execute("vacuum analyze finished_jobs")
        note(f"partitions: {n} finished jobs in {fill_s:.1f} s (and the copy as sync_jobs was)")
        sizes = {"flat_bytes_before": _jobs_size(conn, True), "parted_bytes_before": _jobs_size(conn, False)}
        pruned, drop_s = asyncio.run(_prune_jobs(url, RETENTION))
        row = conn.execute("select min(lo) from finished_job_partitions").fetchone()
        assert row is not None
        kept_from = row[0]  # the oldest partition kept: the same rows go from the copy
        deleted, batches = 0, 0
        t0 = time.perf_counter()
        while True:
            done = conn.execute(_JOBS_DELETE, {"cutoff": kept_from}).rowcount
            deleted += done
            batches += 1
            if done < 5000:
                break
        delete_s = time.perf_counter() - t0
        sizes["flat_bytes_after"] = _jobs_size(conn, True)
        sizes["parted_bytes_after"] = _jobs_size(conn, False)
        t0 = time.perf_counter()
        conn.execute("vacuum sync_jobs_flat")
        vacuum_s = time.perf_counter() - t0
        sizes["flat_bytes_after_vacuum"] = _jobs_size(conn, True)
    emit(
        "partitions_finished_jobs",
        finished_jobs=n,
        partition_span_s=span,
        fill_s=round(fill_s, 1),
        pruned_jobs=pruned["jobs"],
        pruned_partitions=pruned["partitions_dropped"],
        added_partitions=pruned["partitions_added"],
        deleted_jobs=deleted,
        delete_batches=batches,
        prune_drop_s=round(drop_s, 4),
        prune_delete_s=round(delete_s, 3),
        vacuum_after_delete_s=round(vacuum_s, 3),
        **sizes,
        goal_prune_is_partition_drop=pruned["partitions_dropped"] > 0 and pruned["jobs"] == deleted > 0,
        goal_prune_faster=drop_s < delete_s,
        goal_space_returned=sizes["parted_bytes_after"] < sizes["flat_bytes_after_vacuum"],
    )


def run(server_url: str, quick: bool) -> None:
    """``partitions`` lines at 100 k changes (``quick``), else at 1 M and 10 M; then
    ``partitions_finished_jobs`` at 100 k finished jobs (``quick``), else at 1 M."""
    started = datetime.now()
    for n in [100_000] if quick else [1_000_000, 10_000_000]:
        _one(server_url, n, follow=min(n // 5, 200_000))
    for n in [100_000] if quick else [1_000_000]:
        _jobs(server_url, n)
    note(f"partitions: done in {(datetime.now() - started).total_seconds():.0f} s")
