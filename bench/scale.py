"""Benchmark: the claim at scale (issue 22) — claim cost, the idle worker's due time and drain
rate against the number of workspaces with due work, and the budget rows as a hot spot.

Per case (0 = jobs of no workspace, then 1, 100, 1 000, 10 000 workspaces), ``JOBS`` due
Notion jobs spread evenly over the workspaces, budgets unmetered (only the claim's own cost
shows) and then the sources' default budgets: the project's own ``queue.claim``
(the worker's form: one source, 8 source slots, the default workspace concurrency,
``DEBOUNCE_WORKSPACE_CONCURRENCY``) and
``queue.settle`` (completions) in claim loops of 8 — claim p50/p99 of 1 loop and of 4 concurrent
loops, ``seconds_until_due`` p50, drain jobs/s with 1 and with 4 loops (each for a fixed
time, on a fresh load), empty claims. The goals of the issue are printed as ``goal_*``
booleans, with the EXPLAIN (ANALYZE, BUFFERS) of both statements at 10 000 workspaces. The
full run adds 1 M due jobs over 10 000 workspaces. ``enqueue`` of 1 and 32 events is
timed without and with 10 000 workspaces (the ingest path's share of keeping the lines).

Hot spot: one workspace charged by 32 concurrent takers (4 workers × 8 slots,
``budgets.take``) while 4 claim loops claim from it and 999 others, with a large budget (every
charge granted and written) and unmetered: charges/s and the p50/p99 of ``take``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import psycopg

from bench.common import emit, line_up, note, percentiles, scratch_database
from debounce import queue
from debounce.config import Settings
from debounce.infra.sql import queries
from debounce.types import ApiBudget, JobEvent
from debounce.workspaces import budgets
from debounce.workspaces.budgets import budget_params

LIMIT = 8
LOOPS = 4
WORKSPACES = [0, 1, 100, 1_000, 10_000]
SOURCE = "notion"

WORKSPACE_ROWS = """
insert into workspaces (source_type, external_id, name, origin, credentials)
select 'notion', 'ws-' || g, 'ws-' || g, 'cli', '\\x00'::bytea
  from generate_series(1, %(n)s::int) g
"""

# Due jobs spread evenly over the workspaces (NULL workspace when there are none), due over the
# last hour so the claim's order has something to sort.
JOB_ROWS = """
insert into sync_jobs (source_type, source_page_id, payload, scheduled_at, first_event_at,
                       max_wait_until, workspace_id)
select 'notion', 'page-' || g, '{}'::jsonb,
       now() - make_interval(secs => (g %% 3600)), now() - interval '1 hour', now(),
       case when %(workspaces)s::int = 0 then null
            else (select min(id) from workspaces) + g %% %(workspaces)s::int end
  from generate_series(1, %(jobs)s::int) g
"""


def _load(url: str, workspaces: int, jobs: int) -> float:
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate sync_jobs, workspaces restart identity cascade")
        if workspaces:
            conn.execute(WORKSPACE_ROWS, {"n": workspaces})
        conn.execute(JOB_ROWS, {"workspaces": workspaces, "jobs": jobs})
        line_up(conn)
        conn.execute("vacuum analyze workspaces")
        conn.execute("vacuum analyze sync_jobs")
    return time.perf_counter() - t0


class Mode:
    """How the claims are made: unmetered, or with the sources' default budgets."""

    def __init__(self, name: str, budget: ApiBudget | None, cost: float | None) -> None:
        self.name = name
        self.budgets = {SOURCE: budget} if budget else None
        self.costs = {SOURCE: cost} if cost else None
        self.workspace_concurrency = Settings.from_env({}).workspace_concurrency


async def _claimer(
    url: str, mode: Mode, until: float, lat: list[float], counts: dict[str, int], ident: str
) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            jobs = [
                c.job
                for c in await queue.claim(
                    conn,
                    ident,
                    limit=LIMIT,
                    lease_seconds=60,
                    source_slots={SOURCE: LIMIT},
                    budgets=mode.budgets,
                    workspace_concurrency=mode.workspace_concurrency,
                    costs=mode.costs,
                )
            ]
            lat.append((time.perf_counter() - t0) * 1000)
            if not jobs:
                counts["empty"] += 1
                if await queue.seconds_until_due(conn, [SOURCE]) is None:
                    return  # drained
                await asyncio.sleep(0.002)
                continue
            await queue.settle(conn, completed=jobs)
            counts["jobs"] += len(jobs)


async def _drain(url: str, mode: Mode, loops: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    counts = {"jobs": 0, "empty": 0}
    start = time.perf_counter()
    await asyncio.gather(*(_claimer(url, mode, start + seconds, lat, counts, f"c{i}") for i in range(loops)))
    elapsed = time.perf_counter() - start
    return {
        "jobs_per_s": round(counts["jobs"] / elapsed, 1),
        "jobs": counts["jobs"],
        "empty_claims": counts["empty"],
        "claims": len(lat),
        "seconds": round(elapsed, 2),
        "claim_ms": percentiles(lat),
    }


async def _until_due(url: str, n: int) -> dict[str, float]:
    lat: list[float] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(n):
            t0 = time.perf_counter()
            await queue.seconds_until_due(conn, [SOURCE])
            lat.append((time.perf_counter() - t0) * 1000)
    return percentiles(lat)


def claim_params(mode: Mode) -> dict[str, Any]:
    """The parameters ``queue.claim`` binds for the worker's form of the claim (EXPLAIN)."""
    return {
        "now": None,
        "worker_id": "explain",
        "limit": LIMIT,
        "lease_seconds": 60.0,
        "sources": [SOURCE],
        "source_slots": [LIMIT],
        "workspace_concurrency": mode.workspace_concurrency,
        **budget_params(mode.budgets, mode.costs),
    }


def _explain(url: str, mode: Mode) -> dict[str, list[str]]:
    q = queries("claim")
    claim = claim_params(mode)
    out: dict[str, list[str]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, query, params in (
            ("claim", q["claim"], claim),
            ("seconds_until_due", q["seconds_until_due"], {"source_types": [SOURCE]}),
        ):
            with conn.transaction(force_rollback=True):  # warm: plans, trigger compiled
                conn.execute(query, params).fetchall()
            with conn.transaction(force_rollback=True):
                # the line's upkeep runs at commit: make it run (and show) in the plan
                conn.execute("set constraints all immediate")
                rows = conn.execute("explain (analyze, buffers) " + query, params).fetchall()
            out[name] = [str(r[0]) for r in rows]
    return out


async def _case(
    url: str, workspaces: int, jobs: int, mode: Mode, seconds: float, explain: bool
) -> dict[str, Any]:
    load_s = _load(url, workspaces, jobs)
    per_job = _bytes_per_job(url)
    until = await _until_due(url, 30)
    one = await _drain(url, mode, 1, seconds)
    _load(url, workspaces, jobs)
    four = await _drain(url, mode, LOOPS, seconds)
    record = {
        "workspaces": workspaces,
        "jobs": jobs,
        "budgets": mode.name,
        "load_seconds": round(load_s, 1),
        "bytes_per_pending_job": per_job,
        "claim_ms_1_loop": one["claim_ms"],
        "claim_ms_4_loops": four["claim_ms"],
        "seconds_until_due_ms": until,
        "drain_jobs_per_s_1": one["jobs_per_s"],
        "drain_jobs_per_s_4": four["jobs_per_s"],
        "empty_claims_1": one["empty_claims"],
        "empty_claims_4": four["empty_claims"],
        "drained_jobs_1": one["jobs"],
        "drained_jobs_4": four["jobs"],
    }
    emit("scale", **record)
    if explain:  # on what the drains left (most of the jobs)
        emit("scale_plan", workspaces=workspaces, budgets=mode.name, **_explain(url, mode))
    return record


async def _taker(url: str, ws: int, budget: ApiBudget, until: float, lat: list[float]) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            await budgets.take(conn, ws, budget)
            lat.append((time.perf_counter() - t0) * 1000)


async def _hotspot(
    url: str, seconds: float, jobs: int, budget: ApiBudget, label: str, spread: bool = False
) -> dict[str, Any]:
    """32 takers on one workspace row (4 workers × 8 slots) while 4 claim loops claim from it
    and 999 other workspaces; ``spread``: each taker on a workspace of its own (the same load
    without a shared row, for comparison)."""
    _load(url, 1_000, jobs)
    mode = Mode(label, budget, 2.0)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select min(id) from workspaces").fetchone()
    assert row is not None
    ws = int(row[0])
    lat: list[float] = []
    counts = {"jobs": 0, "empty": 0}
    claim_lat: list[float] = []
    start = time.perf_counter()
    until = start + seconds
    await asyncio.gather(
        *(_taker(url, ws + (i if spread else 0), budget, until, lat) for i in range(32)),
        *(_claimer(url, mode, until, claim_lat, counts, f"h{i}") for i in range(LOOPS)),
    )
    elapsed = time.perf_counter() - start
    record = {
        "budget": label,
        "rows": 32 if spread else 1,
        "takers": 32,
        "claim_loops": LOOPS,
        "charges_per_s": round(len(lat) / elapsed, 1),
        "take_ms": percentiles(lat),
        "claim_ms": percentiles(claim_lat),
        "claimed_jobs": counts["jobs"],
        "seconds": round(elapsed, 2),
    }
    emit("scale_hotspot", **record)
    return record


async def _enqueue_cost(url: str, workspaces: int, reps: int) -> dict[str, Any]:
    """ms per ``enqueue`` of 1 event and of 32 events (32 workspaces) on fresh pages,
    with ``workspaces`` workspaces: the ingest path's share of keeping the lines."""
    _load(url, workspaces, 1_000)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select min(id) from workspaces").fetchone()
    first = int(row[0]) if row and row[0] is not None else None
    out: dict[str, Any] = {"workspaces": workspaces}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for size in (1, 32):
            lat: list[float] = []
            for r in range(reps):
                batch = [
                    JobEvent(
                        SOURCE,
                        f"enq-{size}-{r}-{i}",
                        {"i": i},
                        f"e-{size}-{r}-{i}",
                        300.0,
                        3600.0,
                        workspace_id=None if first is None else first + (r * size + i) % workspaces,
                    )
                    for i in range(size)
                ]
                t0 = time.perf_counter()
                await queue.enqueue(conn, batch)
                lat.append((time.perf_counter() - t0) * 1000)
            out[f"enqueue_{size}_ms"] = percentiles(lat)
    emit("scale_enqueue", **out)
    return out


def _bytes_per_job(url: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "select pg_total_relation_size('sync_jobs')::float8 / greatest(count(*), 1) from sync_jobs"
        ).fetchone()
    return round(float(row[0]), 1) if row else 0.0


def _p50(d: Mapping[str, Any], key: str) -> float:
    return float(d[key]["p50"])


async def _run(url: str, quick: bool) -> dict[str, Any]:
    jobs = 20_000 if quick else 100_000
    seconds = 3.0 if quick else 8.0
    from debounce.registry import get

    notion = get(SOURCE)
    modes = [Mode("unmetered", None, None), Mode("default", notion.budget, notion.requests_per_page)]
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for mode in modes:
        for w in WORKSPACES:
            note(f"scale: {w} workspaces, {jobs} jobs, budgets {mode.name}")
            results.setdefault(mode.name, {})[w] = await _case(
                url, w, jobs, mode, seconds, explain=(w == 10_000)
            )
    # a metered workspace whose budget never runs dry (every take writes the row), and an
    # unmetered one
    if not quick:
        # 1 M due jobs over 10 000 workspaces: the capacity plan's anchor (docs/scaling.md)
        note("scale: 10000 workspaces, 1000000 jobs, budgets unmetered")
        results["unmetered_1m"] = {
            10_000: await _case(url, 10_000, 1_000_000, modes[0], seconds, explain=True)
        }
    for w in (0, 10_000):
        await _enqueue_cost(url, w, 100 if quick else 300)
    hot = await _hotspot(url, seconds, jobs, ApiBudget(per_minute=60_000_000.0, burst=1_000_000.0), "large")
    await _hotspot(
        url, seconds, jobs, ApiBudget(per_minute=60_000_000.0, burst=1_000_000.0), "large", spread=True
    )
    await _hotspot(url, seconds, jobs, ApiBudget(per_minute=0.0, burst=1.0), "unmetered")
    u = results["unmetered"]
    none, big, mid = u[0], u[10_000], u[1_000]
    goals = {
        "goal_claim_p50_10000_le_2x_none": _p50(big, "claim_ms_4_loops")
        <= 2 * _p50(none, "claim_ms_4_loops"),
        "goal_drain_10000_ge_0_8x_none": big["drain_jobs_per_s_4"] >= 0.8 * none["drain_jobs_per_s_4"],
        "goal_seconds_until_due_10000_le_20ms": _p50(big, "seconds_until_due_ms") <= 20.0,
        "goal_4_claimers_ge_2x_1_at_1000": mid["drain_jobs_per_s_4"] >= 2 * mid["drain_jobs_per_s_1"],
    }
    emit(
        "scale_summary",
        jobs=jobs,
        drain_seconds=seconds,
        drain_ratio_10000_to_none=round(
            big["drain_jobs_per_s_4"] / max(none["drain_jobs_per_s_4"], 0.001), 2
        ),
        claim_p50_ratio_10000_to_none=round(
            _p50(big, "claim_ms_4_loops") / max(_p50(none, "claim_ms_4_loops"), 0.001), 2
        ),
        speedup_4_loops_at_1000=round(mid["drain_jobs_per_s_4"] / max(mid["drain_jobs_per_s_1"], 0.001), 2),
        take_p99_ms=hot["take_ms"].get("p99"),
        charges_per_s=hot["charges_per_s"],
        **goals,
    )
    return {"results": results, "hotspot": hot, "goals": goals}


def run(server_url: str, quick: bool) -> dict[str, Any]:
    with scratch_database(server_url, "scale") as url:
        return asyncio.run(_run(url, quick))
