"""Push delivery (issue 40, point 1): a ``debounce worker`` process delivers one subscription
to a receiver on loopback while document writers write at the feed benchmark's load (4
connections, ~2 KB documents, each upsert its own transaction, as fast as they go).

- ``push_delivery``: changes written per second, changes delivered per second over the same
  run (first write to last delivery), and each change's lag from its commit (the writer's
  clock when the upsert returned) to its arrival at the receiver (p50/p95/p99); then the
  deliverer's capacity: a backlog of the same size replayed, drained in how long.
- ``push_idle_cost``: the writers' upserts per second with no subscription vs with one idle
  subscription (followed by the worker, its filter excluding every write), in alternating
  rounds: what a subscription costs document writers.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

import orjson
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.common import emit, note, percentiles, scratch_database, spawn, stop
from debounce import delivery
from debounce.documents.store import Document, DocumentStore, content_sha256
from standins.server import BackgroundServer

BODY = "lorem ipsum dolor sit amet " * 80


class Arrivals:
    """A receiver (POST /hook): the wall-clock arrival of each change, by content hash."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.batches = 0
        self.lock = threading.Lock()
        self.server = BackgroundServer(Starlette(routes=[Route("/hook", self.hook, methods=["POST"])]))

    async def hook(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        now = time.time()
        with self.lock:
            self.batches += 1
            for change in body["data"]["changes"]:
                self.at.setdefault(change["content_sha256"], now)
        return Response(status_code=200)

    async def until(self, hashes: Iterable[str], timeout: float) -> float:
        """The last arrival of the changes of ``hashes``, once every one has arrived."""
        hashes = list(hashes)
        wanted = set(hashes)
        deadline = time.monotonic() + timeout
        while missing := [h for h in wanted if h not in self.at]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(missing)} of {len(wanted)} changes not delivered in {timeout} s")
            await asyncio.sleep(0.005)
            wanted = set(missing)
        return max(self.at[h] for h in hashes)


async def _write(
    pool: AsyncConnectionPool[Any],
    docs: int,
    writes: int,
    writers: int,
    tag: str,
    committed: dict[str, float] | None = None,
) -> float:
    """Upserts per second; ``committed``: each write's content hash → wall-clock commit."""
    store = DocumentStore(pool)

    async def writer(w: int) -> None:
        for i in range(w, writes, writers):
            content = f"{tag} {i}\n{BODY}"
            await store.upsert(
                Document(
                    source_type="notion",
                    document_id=f"doc-{i % docs}",
                    source_page_id=f"p{i % docs}",
                    title=f"Document {i % docs}",
                    url=None,
                    content=content,
                )
            )
            if committed is not None:
                committed[content_sha256(content)] = time.time()

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return writes / (time.perf_counter() - t0)


async def _measure(url: str, receiver: Arrivals, quick: bool) -> None:
    docs, writes, writers, rounds = (200, 1500, 4, 3) if quick else (1000, 6000, 4, 5)
    pool = AsyncConnectionPool(
        url, min_size=writers, max_size=writers + 1, open=False, kwargs={"autocommit": True}
    )
    await pool.open(wait=True)
    try:
        await _write(pool, docs, docs, writers, "warm")  # the rows exist: every write an update
        # -- the idle subscription's cost to writers
        idle, _ = await delivery.create(
            pool,
            receiver.server.url + "/hook",
            start=await delivery.parse_start(pool, "head"),
            source_type="slack",
        )
        rates: dict[str, list[float]] = {"none": [], "idle": []}
        for r in range(rounds):
            for name in ("none", "idle") if r % 2 == 0 else ("idle", "none"):
                if name == "none":
                    await delivery.disable(pool, idle.id)
                else:
                    await delivery.enable(pool, idle.id)
                    await asyncio.sleep(1.0)  # the worker leases it (its poll interval)
                async with pool.connection() as conn:
                    await conn.execute("vacuum documents")
                rates[name].append(await _write(pool, docs, writes, writers, f"{name}{r}"))
                note(f"push_idle_cost round {r} {name}: {rates[name][-1]:.0f} upserts/s")
        await delivery.remove(pool, idle.id)
        ratio = max(rates["idle"]) / max(rates["none"])
        emit(
            "push_idle_cost",
            writers=writers,
            upserts_per_round=writes,
            rounds=rounds,
            upserts_per_s_without_subscription=round(max(rates["none"])),
            upserts_per_s_with_idle_subscription=round(max(rates["idle"])),
            ratio=round(ratio, 3),
            median_round_ratio=round(
                statistics.median(i / n for i, n in zip(rates["idle"], rates["none"], strict=True)), 3
            ),
            goal_idle_costs_writers_le_10pct=ratio >= 0.9,
        )
        # -- delivery under the writers' load, then a backlog drained
        sub, _ = await delivery.create(
            pool, receiver.server.url + "/hook", start=await delivery.parse_start(pool, "head")
        )
        await asyncio.sleep(1.0)  # leased and following
        committed: dict[str, float] = {}
        start = time.time()
        write_rate = await _write(pool, docs, writes, writers, "load", committed)
        last = await receiver.until(committed, 120)
        delivered_rate = len(committed) / (last - start)
        lags = [1000 * (receiver.at[h] - t) for h, t in committed.items()]
        p = percentiles(lags)
        await delivery.disable(pool, sub.id)
        begin = await delivery.parse_start(pool, "head")
        backlog: dict[str, float] = {}
        await _write(pool, docs, writes, writers, "backlog", backlog)
        await delivery.replay(pool, sub.id, begin)
        last = await receiver.until(backlog, 120)
        # from the first arrival (the worker leases the replayed subscription within its poll)
        first = min(receiver.at[h] for h in backlog)
        capacity = (len(backlog) - 1) / max(last - first, 1e-6)
        state = await delivery.get(pool, sub.id)
        emit(
            "push_delivery",
            writers=writers,
            changes=len(committed),
            changes_written_per_s=round(write_rate),
            changes_delivered_per_s_under_load=round(delivered_rate),
            backlog_drained_per_s=round(capacity),
            batches=state.delivered_batches,
            changes_per_batch=round(state.delivered_changes / max(state.delivered_batches, 1), 1),
            lag_ms=p,
            goal_keeps_up_with_writes=capacity >= write_rate,
            goal_lag_p99_le_1s=p["p99"] <= 1000,
        )
    finally:
        await pool.close()


def run(server_url: str, quick: bool) -> None:
    """Both measurements in one scratch database, with one worker process delivering."""
    receiver = Arrivals()
    with scratch_database(server_url, "push") as url, receiver.server:
        worker = spawn(
            [sys.executable, "-m", "debounce", "worker"],
            env={
                "DATABASE_URL": url,
                "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.5",
                "DEBOUNCE_LOG_LEVEL": "WARNING",
            },
        )
        try:
            asyncio.run(_measure(url, receiver, quick))
        finally:
            stop(worker)
