"""The change feed's cost (issues 23 and 30): what the change log adds to a document write,
how many changes per second ``GET /documents/changes`` serves, how soon a long-polling
follower has a commit, and what a hot standby takes off the primary.

- ``feed_write``: document upserts (each its own transaction, every one a real change of a
  ~2 KB document, ``writers`` concurrent connections) through :class:`DocumentStore`, in four
  variants measured in turns in the same database: the change log's triggers off (no change
  log); on with no follower; on with one follower long-polling (this release: the follower's
  process polls the feed's frontier, writers do nothing more); and the release before (issue
  23), emulated by a trigger that NOTIFYs once per writing transaction while a follower waits
  (NOTIFY serialises commits on a global lock); and the change log with migration 017's
  position trigger (``log_017``: before migration 020's content-hash fast path), so the
  change log's own overhead is measured before and after in the same run. Best of ``rounds``
  each.
- ``feed_latency``: commit → a long-polling follower (``read_waiting``) has the change, on a
  quiet primary, and (``server: standby``) with the follower on a streaming standby, next to
  that standby's replay lag (commit → the standby has replayed it) measured the same way.
- ``feed_standby``: a primary and a streaming standby (:mod:`bench.pgcluster`): feed reads per
  second the standby serves while the primary takes document writes, and the primary's CPU per
  document write with 8 followers (each reading the feed and then every changed document) on
  the primary vs on the standby.
- ``feed_serve``: a feed of ``changes`` changes read from start to head over HTTP (uvicorn on
  loopback, ``limit=1000``), unfiltered and with a ``source`` filter that keeps one in ten.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import httpx
import psycopg
from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, percentiles, scratch_database
from bench.pgcluster import PrimaryAndStandby
from debounce.config import Settings
from debounce.documents import feed
from debounce.documents.feed_listen import POLL_SECONDS, ChangeSignal, read_waiting
from debounce.documents.store import Document, DocumentStore
from debounce.infra.sql import sql_dir
from debounce.migrate import migrate
from debounce.web import create_app
from standins.server import BackgroundServer

TOKEN = "bench-read-token"


async def _writes(pool: AsyncConnectionPool[Any], docs: int, writes: int, writers: int, tag: str) -> float:
    """Upserts per second: ``writes`` changes of ``docs`` documents by ``writers`` tasks."""
    store = DocumentStore(pool)
    body = "lorem ipsum dolor sit amet " * 80

    async def writer(w: int) -> None:
        for i in range(w, writes, writers):
            await store.upsert(
                Document(
                    source_type="notion",
                    document_id=f"doc-{i % docs}",
                    source_page_id=f"p{i % docs}",
                    title=f"Document {i % docs}",
                    url=None,
                    content=f"{tag} {i}\n{body}",
                    metadata={"n": i},
                )
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return writes / (time.perf_counter() - t0)


#: The release before issue 30, for comparison: one NOTIFY per writing transaction while a
#: follower waits (migration 013's trigger did this inside the writing transaction).
_OLD_NOTIFY = """
create or replace function bench_feed_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('debounce_documents', '');
    return null;
end $$;
create trigger bench_feed_notify after insert or update or delete on documents
    for each row execute function bench_feed_notify();
alter table documents disable trigger bench_feed_notify;
"""


def _position_trigger_017() -> str:
    """Migration 017's ``document_feed_position`` (the change log's BEFORE trigger before
    migration 020 skipped the row copy and compare for a write with a new content hash)."""
    text = (sql_dir() / "migrations" / "017_feed_positions.sql").read_text(encoding="utf-8")
    start = text.index("create or replace function document_feed_position()")
    return text[start : text.index("end $$;", start) + len("end $$;")]


async def _variant(pool: AsyncConnectionPool[Any], name: str, current: str) -> None:
    """``off``: no change log; ``log``: the log, no follower; ``log_follower``: the log, a
    follower long-polling (its own task: :func:`_follower`); ``log_notify_before``: the log
    and a NOTIFY per writing transaction (the release before); ``log_017``: the log with
    migration 017's position trigger. ``current``: this release's position trigger."""
    async with pool.connection() as conn:
        await conn.execute(_position_trigger_017() if name == "log_017" else current)
        action = "disable" if name == "off" else "enable"
        for trigger in ("documents_feed_position", "documents_feed_append"):
            await conn.execute(f"alter table documents {action} trigger {trigger}")
        action = "enable" if name == "log_notify_before" else "disable"
        await conn.execute(f"alter table documents {action} trigger bench_feed_notify")


async def _backends(pool: AsyncConnectionPool[Any]) -> list[int]:
    """The pids of the client backends connected to the pool's database."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "select pid from pg_stat_activity where datname = current_database() "
                "and backend_type = 'client backend'"
            )
        ).fetchall()
    return [int(r[0]) for r in rows]


def _cpu_of(pids: list[int]) -> float:
    """CPU seconds of these processes (on this machine; 0 for one that is gone or not ours)."""
    import psutil

    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
    return total


async def _follower(
    pool: AsyncConnectionPool[Any], stop: asyncio.Event, got: list[int] | None = None
) -> None:
    """One consumer long-polling the feed from its head until ``stop`` (changes counted in
    ``got``)."""
    signal = ChangeSignal(pool)
    after = await feed.head(pool)
    try:
        while not stop.is_set():
            page = await read_waiting(pool, signal, after, 1000, 1.0)
            after = page.next
            if got is not None:
                got.append(len(page.changes))
    finally:
        await signal.close()


async def _write_cost(url: str, quick: bool) -> None:
    docs, writes, writers, rounds = (200, 1500, 4, 3) if quick else (1000, 6000, 4, 5)
    pool = AsyncConnectionPool(
        url, min_size=writers, max_size=writers + 1, open=False, kwargs={"autocommit": True}
    )
    reader = AsyncConnectionPool(url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True})
    await pool.open(wait=True)
    await reader.open(wait=True)
    try:
        async with pool.connection() as conn:
            await conn.execute(_OLD_NOTIFY)
            row = await (
                await conn.execute("select pg_get_functiondef('document_feed_position'::regproc)")
            ).fetchone()
            assert row is not None
            current = str(row[0])
        await _writes(pool, docs, docs, writers, "warm")  # the rows exist: every write an update
        best: dict[str, float] = {
            "off": 0.0,
            "log": 0.0,
            "log_017": 0.0,
            "log_follower": 0.0,
            "log_notify_before": 0.0,
        }
        ratios: dict[str, list[float]] = {
            "log": [],
            "log_017": [],
            "log_follower": [],
            "log_notify_before": [],
        }
        cpu: dict[str, list[float]] = {name: [] for name in best}
        for r in range(rounds):
            this: dict[str, float] = {}
            # The variants take turns in a rotated order, each after a VACUUM of the documents:
            # a later turn of a round faced more dead rows (a server may run without
            # autovacuum) and a drifting machine load, and always the same variant paid it.
            names = list(best)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                async with pool.connection() as conn:
                    await conn.execute("vacuum documents")
                await _variant(pool, name, current)
                stop = asyncio.Event()
                following = (
                    asyncio.create_task(_follower(reader, stop))
                    if name in ("log_follower", "log_notify_before")
                    else None
                )
                if name == "log_notify_before":  # a listener, as the web's was
                    listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
                    await listener.execute("listen debounce_documents")
                pids = await _backends(pool)
                cpu0 = _cpu_of(pids)
                rate = await _writes(pool, docs, writes, writers, f"{name}{r}")
                cpu[name].append(1e6 * (_cpu_of(pids) - cpu0) / writes)
                if name == "log_notify_before":
                    await listener.close()
                if following is not None:
                    stop.set()
                    await following
                best[name] = max(best[name], rate)
                this[name] = rate
                note(
                    f"feed_write round {r} {name}: {rate:.0f} upserts/s, "
                    f"{cpu[name][-1]:.0f} µs of server CPU each"
                )
            ratios["log"].append(this["log"] / this["off"])
            ratios["log_017"].append(this["log_017"] / this["off"])
            ratios["log_follower"].append(this["log_follower"] / this["log"])
            ratios["log_notify_before"].append(this["log_notify_before"] / this["log"])
        await _variant(pool, "log", current)
        overhead = 1 - best["log"] / best["off"]
        with_follower = best["log_follower"] / best["log"]
        emit(
            "feed_write",
            writers=writers,
            documents=docs,
            upserts_per_round=writes,
            rounds=rounds,
            content_bytes=2200,
            upserts_per_s_without_log=round(best["off"]),
            upserts_per_s_with_log=round(best["log"]),
            upserts_per_s_with_log_and_follower=round(best["log_follower"]),
            upserts_per_s_with_log_and_follower_before=round(best["log_notify_before"]),
            upserts_per_s_with_log_017=round(best["log_017"]),
            log_overhead_pct=round(100 * overhead, 1),
            log_overhead_pct_017=round(100 * (1 - best["log_017"] / best["off"]), 1),
            follower_ratio=round(with_follower, 3),
            follower_ratio_before=round(best["log_notify_before"] / best["log"], 3),
            # the same ratios within each round (the load of a shared machine drifts between
            # rounds): their medians
            median_round_log_ratio=round(statistics.median(ratios["log"]), 3),
            median_round_log_ratio_017=round(statistics.median(ratios["log_017"]), 3),
            median_round_follower_ratio=round(statistics.median(ratios["log_follower"]), 3),
            median_round_follower_ratio_before=round(statistics.median(ratios["log_notify_before"]), 3),
            # CPU of the database's backends per upsert (median of rounds): what the log
            # costs the server, less sensitive than the rates to a shared machine's load
            server_cpu_us_per_upsert={name: round(statistics.median(v)) for name, v in cpu.items()},
            goal_log_overhead_le_20pct=overhead <= 0.20,
            goal_follower_ge_0_9x=with_follower >= 0.9,
        )
    finally:
        await reader.close()
        await pool.close()


async def _latency(
    write_url: str, read_url: str, samples: int, replay_lsn: bool
) -> tuple[list[float], list[float]]:
    """Milliseconds from a commit on ``write_url`` to a follower long-polling ``read_url``
    having it; with ``replay_lsn``, also to ``read_url`` (a standby) having replayed it."""
    writer = await psycopg.AsyncConnection.connect(write_url, autocommit=True)
    watcher = await psycopg.AsyncConnection.connect(read_url, autocommit=True)
    reader = AsyncConnectionPool(read_url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True})
    await reader.open(wait=True)
    signal = ChangeSignal(reader)
    store = DocumentStore(writer)
    seen: dict[str, float] = {}
    stop = asyncio.Event()

    async def follow() -> None:
        after = await feed.head(reader)
        while not stop.is_set():
            page = await read_waiting(reader, signal, after, 1000, 1.0)
            now = time.perf_counter()
            for change in page.changes:
                seen.setdefault(change.document_id, now)
            after = page.next

    following = asyncio.create_task(follow())
    await asyncio.sleep(0.3)
    follower_ms: list[float] = []
    replay_ms: list[float] = []
    try:
        for i in range(samples):
            doc_id = f"lat-{i}"
            await store.upsert(
                Document(
                    source_type="notion",
                    document_id=doc_id,
                    source_page_id=doc_id,
                    title="t",
                    url=None,
                    content=f"x{i}",
                )
            )
            committed = time.perf_counter()
            if replay_lsn:
                lsn = await (await writer.execute("select pg_current_wal_lsn()::text")).fetchone()
                assert lsn is not None
                while (
                    await (
                        await watcher.execute("select pg_last_wal_replay_lsn() >= %s::pg_lsn", lsn)
                    ).fetchone()
                ) != (True,):
                    pass
                replay_ms.append(1000 * (time.perf_counter() - committed))
            while doc_id not in seen:
                await asyncio.sleep(0.001)
            follower_ms.append(1000 * (seen[doc_id] - committed))
            await asyncio.sleep(0.03)  # a quiet server: one change at a time
    finally:
        stop.set()
        await following
        await signal.close()
        await reader.close()
        await watcher.close()
        await writer.close()
    return follower_ms, replay_ms


def _server_cpu(pid: int) -> float:
    """CPU seconds of a Postgres server: its postmaster, the backends it reaped, live ones."""
    import psutil

    pm = psutil.Process(pid)
    t = pm.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in pm.children():
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            total += c.user + c.system
    return total


async def _consumers(
    pool: AsyncConnectionPool[Any],
    primary: AsyncConnectionPool[Any] | None,
    n: int,
    stop: asyncio.Event,
    reads: list[int],
) -> None:
    """``n`` consumers on ``pool``: each follows the feed and reads every changed document."""
    signal = ChangeSignal(pool)
    store = DocumentStore(pool)

    async def consumer() -> None:
        after = await feed.head(pool)
        while not stop.is_set():
            page = await read_waiting(pool, signal, after, 100, 1.0, primary=primary)
            reads[0] += 1
            for change in page.changes:
                await store.get(change.source, change.document_id)
                reads[1] += 1
            after = page.next

    try:
        await asyncio.gather(*(consumer() for _ in range(n)))
    finally:
        await signal.close()


async def _standby_load(cluster: PrimaryAndStandby, url: str, standby_url: str, quick: bool) -> None:
    writes, writers, followers = (1500, 4, 8) if quick else (6000, 4, 8)
    primary = AsyncConnectionPool(
        url, min_size=writers, max_size=writers + 4, open=False, kwargs={"autocommit": True}
    )
    standby = AsyncConnectionPool(
        standby_url, min_size=2, max_size=8, open=False, kwargs={"autocommit": True}
    )
    await primary.open(wait=True)
    await standby.open(wait=True)
    try:
        await _writes(primary, 200, 200, writers, "warm")
        figures: dict[str, Any] = {}
        for where in ("primary", "standby"):
            stop = asyncio.Event()
            reads = [0, 0]
            on = standby if where == "standby" else primary
            task = asyncio.create_task(
                _consumers(on, primary if where == "standby" else None, followers, stop, reads)
            )
            await asyncio.sleep(0.5)
            cpu0, t0 = _server_cpu(cluster.primary_pid()), time.perf_counter()
            rate = await _writes(primary, 200, writes, writers, where)
            seconds = time.perf_counter() - t0
            cpu = _server_cpu(cluster.primary_pid()) - cpu0
            stop.set()
            await task
            figures[where] = {
                "upserts_per_s": round(rate),
                "feed_reads_per_s": round(reads[0] / seconds),
                "document_reads_per_s": round(reads[1] / seconds),
                "primary_cpu_ms_per_write": round(1000 * cpu / writes, 3),
            }
            note(f"feed_standby followers on the {where}: {figures[where]}")
        capacity = await _read_capacity(primary, standby, writes, writers)
        note(f"feed_standby read capacity of the standby: {capacity}")
        emit(
            "feed_standby",
            writers=writers,
            followers=followers,
            writes=writes,
            standby_read_capacity=capacity,
            followers_on_primary=figures["primary"],
            followers_on_standby=figures["standby"],
            standby_feed_reads_per_s=capacity["feed_reads_per_s"],
            primary_cpu_saved_pct=round(
                100
                * (
                    1
                    - figures["standby"]["primary_cpu_ms_per_write"]
                    / figures["primary"]["primary_cpu_ms_per_write"]
                ),
                1,
            ),
            goal_standby_takes_read_load_off_primary=(
                figures["standby"]["primary_cpu_ms_per_write"]
                < figures["primary"]["primary_cpu_ms_per_write"]
            ),
        )
    finally:
        await standby.close()
        await primary.close()


async def _read_capacity(
    primary: AsyncConnectionPool[Any], standby: AsyncConnectionPool[Any], writes: int, writers: int
) -> dict[str, Any]:
    """Feed reads per second the standby serves (8 readers, ``limit=100``, each walking the
    feed from its start to its head and again, no waiting) while the primary takes ``writes``
    document writes."""
    stop = asyncio.Event()
    counts = [0, 0]

    async def reader() -> None:
        after = None
        while not stop.is_set():
            page = await feed.read_changes(standby, after, 100, primary=primary)
            counts[0] += 1
            counts[1] += len(page.changes)
            after = None if page.at_head else page.next

    readers = [asyncio.create_task(reader()) for _ in range(8)]
    t0 = time.perf_counter()
    rate = await _writes(primary, 200, writes, writers, "capacity")
    seconds = time.perf_counter() - t0
    stop.set()
    await asyncio.gather(*readers)
    return {
        "readers": 8,
        "feed_reads_per_s": round(counts[0] / seconds),
        "changes_per_s": round(counts[1] / seconds),
        "primary_upserts_per_s": round(rate),
    }


async def _latencies(url: str, quick: bool) -> None:
    samples = 60 if quick else 300
    follower_ms, _ = await _latency(url, url, samples, replay_lsn=False)
    p = percentiles(follower_ms)
    emit(
        "feed_latency",
        server="primary",
        samples=samples,
        poll_ms=1000 * POLL_SECONDS,
        commit_to_follower_ms=p,
        goal_p99_le_50ms=p["p99"] <= 50,
    )


async def _on_standby(quick: bool) -> None:
    samples = 60 if quick else 300
    with PrimaryAndStandby() as cluster:
        await migrate(cluster.primary_url)
        await asyncio.to_thread(cluster.wait_replayed)
        follower_ms, replay_ms = await _latency(
            cluster.primary_url, cluster.standby_url, samples, replay_lsn=True
        )
        p, r = percentiles(follower_ms), percentiles(replay_ms)
        emit(
            "feed_latency",
            server="standby",
            samples=samples,
            poll_ms=1000 * POLL_SECONDS,
            commit_to_follower_ms=p,
            commit_to_replayed_ms=r,
            goal_p99_le_replay_p99_plus_100ms=p["p99"] <= r["p99"] + 100,
        )
        await _standby_load(cluster, cluster.primary_url, cluster.standby_url, quick)


async def _fill(pool: AsyncConnectionPool[Any], changes: int) -> None:
    """``changes`` changes, one in ten of a Slack document (one multi-row insert each batch)."""
    async with pool.connection() as conn:
        for start in range(0, changes, 5000):
            n = min(5000, changes - start)
            await conn.execute(
                "insert into documents (source_type, document_id, source_page_id, content, "
                "content_sha256) select case when g %% 10 = 0 then 'slack' else 'notion' end, "
                "'d' || g, 'p' || g, 'x', md5(g::text) from generate_series(%s::int, %s::int) g",
                (start, start + n - 1),
            )


def _read_all(base: str, params: dict[str, Any]) -> tuple[int, int, float]:
    """(changes, requests, seconds) to read the feed from start to head."""
    served = requests = 0
    after = None
    t0 = time.perf_counter()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
        while True:
            query = {**params, "limit": 1000, **({"after": after} if after else {})}
            body = client.get("/documents/changes", params=query).raise_for_status().json()
            requests += 1
            served += len(body["changes"])
            if not body["changes"] and body["next"] == after:
                return served, requests, time.perf_counter() - t0
            after = body["next"]


async def _serve(url: str, quick: bool) -> None:
    changes = 20_000 if quick else 200_000
    pool = AsyncConnectionPool(url, min_size=1, max_size=4, open=False, kwargs={"autocommit": True})
    await pool.open(wait=True)
    try:
        await _fill(pool, changes)
        app = create_app(Settings(database_url=url, read_token=TOKEN))  # its own pool, loop
        with BackgroundServer(app, lifespan="on") as server:
            for label, params in (("all", {}), ("source_filter", {"source": "slack"})):
                served, requests, seconds = await asyncio.to_thread(_read_all, server.url, params)
                rate = served / seconds
                emit(
                    "feed_serve",
                    filter=label,
                    changes_in_log=changes,
                    served=served,
                    requests=requests,
                    seconds=round(seconds, 2),
                    changes_per_s=round(rate),
                    examined_per_s=round(changes / seconds),
                    goal_every_change_served=served == (changes if label == "all" else changes // 10),
                    goal_ge_5000_changes_per_s=(changes / seconds) >= 5000,
                )
    finally:
        await pool.close()


def run(server_url: str, quick: bool) -> None:
    """Every measurement, each in its own scratch database; the standby's in a primary and
    standby started here (both in the quick run too, with fewer samples)."""
    with scratch_database(server_url, "feedw") as url:
        asyncio.run(_write_cost(url, quick))
    with scratch_database(server_url, "feedl") as url:
        asyncio.run(_latencies(url, quick))
    with scratch_database(server_url, "feeds") as url:
        asyncio.run(_serve(url, quick))
    asyncio.run(_on_standby(quick))
