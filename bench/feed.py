"""The change feed's cost (issue 23): what the change log adds to a document write, and how
many changes per second ``GET /documents/changes`` serves.

- ``feed_write``: document upserts (each its own transaction, every one a real change of a
  ~2 KB document, ``writers`` concurrent connections) through :class:`DocumentStore`, in three
  variants measured in turns in the same database: the triggers of migration 013 off (no
  change log), on with no follower waiting (the log alone: writers skip the NOTIFY), and on
  with a follower waiting (the log and one NOTIFY per transaction: NOTIFY serialises commits on
  a global lock). Best of ``rounds`` each.
- ``feed_serve``: a feed of ``changes`` changes read from start to head over HTTP (uvicorn on
  loopback, ``limit=1000``), unfiltered and with a ``source`` filter that keeps one in ten.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, scratch_database
from debounce.config import Settings
from debounce.documents import Document, DocumentStore
from debounce.web import create_app
from standins.server import BackgroundServer

TOKEN = "bench-read-token"
async def _writes(pool: AsyncConnectionPool[Any], docs: int, writes: int, writers: int,
                  tag: str) -> float:
    """Upserts per second: ``writes`` changes of ``docs`` documents by ``writers`` tasks."""
    store = DocumentStore(pool)
    body = "lorem ipsum dolor sit amet " * 80

    async def writer(w: int) -> None:
        for i in range(w, writes, writers):
            await store.upsert(Document(
                source_type="notion", document_id=f"doc-{i % docs}", source_page_id=f"p{i % docs}",
                title=f"Document {i % docs}", url=None, content=f"{tag} {i}\n{body}",
                metadata={"n": i}))

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return writes / (time.perf_counter() - t0)


async def _variant(pool: AsyncConnectionPool[Any], name: str) -> None:
    """``off``: no change log; ``log``: the log, no follower (no NOTIFY); ``log_notify``: the
    log and a follower waiting (every writing transaction notifies)."""
    async with pool.connection() as conn:
        action = "disable" if name == "off" else "enable"
        for trigger in ("documents_feed_position", "documents_feed_append"):
            await conn.execute(f"alter table documents {action} trigger {trigger}")  # type: ignore[arg-type]
        # a follower waiting for the next day, or none (NULL)
        await conn.execute("update document_feed set followers_until = case when %s "
                           "then now() + interval '1 day' end", (name == "log_notify",))


async def _write_cost(url: str, quick: bool) -> None:
    docs, writes, writers, rounds = (200, 1500, 4, 3) if quick else (1000, 6000, 4, 5)
    pool = AsyncConnectionPool(url, min_size=writers, max_size=writers + 1, open=False,
                               kwargs={"autocommit": True})
    await pool.open(wait=True)
    try:
        await _writes(pool, docs, docs, writers, "warm")  # the rows exist: every write an update
        best: dict[str, float] = {"off": 0.0, "log": 0.0, "log_notify": 0.0}
        for r in range(rounds):
            for name in best:
                await _variant(pool, name)
                rate = await _writes(pool, docs, writes, writers, f"{name}{r}")
                best[name] = max(best[name], rate)
                note(f"feed_write round {r} {name}: {rate:.0f} upserts/s")
        await _variant(pool, "log")
        overhead = 1 - best["log"] / best["off"]
        emit("feed_write", writers=writers, documents=docs, upserts_per_round=writes,
             rounds=rounds, content_bytes=2200,
             upserts_per_s_without_log=round(best["off"]),
             upserts_per_s_with_log=round(best["log"]),
             upserts_per_s_with_log_and_follower=round(best["log_notify"]),
             log_overhead_pct=round(100 * overhead, 1),
             follower_overhead_pct=round(100 * (1 - best["log_notify"] / best["off"]), 1),
             goal_log_overhead_le_20pct=overhead <= 0.20,
             goal_with_follower_ge_100_upserts_per_s=best["log_notify"] >= 100)
    finally:
        await pool.close()


async def _fill(pool: AsyncConnectionPool[Any], changes: int) -> None:
    """``changes`` changes, one in ten of a Slack document (one multi-row insert each batch)."""
    async with pool.connection() as conn:
        for start in range(0, changes, 5000):
            n = min(5000, changes - start)
            await conn.execute(
                "insert into documents (source_type, document_id, source_page_id, content, "
                "content_sha256) select case when g %% 10 = 0 then 'slack' else 'notion' end, "
                "'d' || g, 'p' || g, 'x', md5(g::text) from generate_series(%s::int, %s::int) g",
                (start, start + n - 1))


def _read_all(base: str, params: dict[str, Any]) -> tuple[int, int, float]:
    """(changes, requests, seconds) to read the feed from start to head."""
    served = requests = 0
    after = None
    t0 = time.perf_counter()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=60) as client:
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
                emit("feed_serve", filter=label, changes_in_log=changes, served=served,
                     requests=requests, seconds=round(seconds, 2),
                     changes_per_s=round(rate),
                     examined_per_s=round(changes / seconds),
                     goal_every_change_served=served == (changes if label == "all"
                                                         else changes // 10),
                     goal_ge_5000_changes_per_s=(changes / seconds) >= 5000)
    finally:
        await pool.close()


def run(server_url: str, quick: bool) -> None:
    """Both measurements, each in its own scratch database."""
    with scratch_database(server_url, "feedw") as url:
        asyncio.run(_write_cost(url, quick))
    with scratch_database(server_url, "feeds") as url:
        asyncio.run(_serve(url, quick))
