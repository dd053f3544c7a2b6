"""Benchmark 6 (growth): claim and enqueue cost with many finished jobs in the database.

Finished (``completed``) rows are added to ``finished_jobs`` (where settle moves a finished
job since migration 034) with one ``insert … select generate_series`` per size
(10 k, 100 k, and 1 M in full mode); then, per size: ms per single-event ``enqueue`` on
fresh pages, ms per ``claim`` (limit 1) + ``complete`` of due jobs, and the EXPLAIN ANALYZE
plans of both statements (which indexes they use, any sequential scan of ``sync_jobs``).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from bench.common import emit, note, scratch_database
from debounce.infra.sql import queries
from debounce.queue.lifecycle import settle_params
from debounce.types import SyncJob
from debounce.workspaces.budgets import UNLIMITED, budget_params

Q = {**queries("queue"), **queries("claim")}  # the claim lives in sql/queries/claim.sql
OPS = 300

INSERT_FINISHED = """
insert into finished_jobs (id, source_type, source_page_id, status, payload, event_count, scheduled_at,
                           first_event_at, max_wait_until, revision, claimed_revision, attempts,
                           created_at, updated_at, finished_at)
select nextval('sync_jobs_id_seq'), case when g %% 2 = 0 then 'notion' else 'slack' end, 'old-' || g,
       'completed',
       '{"type": "page.content_updated"}'::jsonb, 3, now() - interval '2 days',
       now() - interval '2 days', now() - interval '1 day', 3, 3, 1,
       now() - interval '2 days', now() - interval '1 day', now() - interval '1 day'
  from generate_series(%(lo)s::bigint, %(hi)s::bigint) g
"""


def _enqueue_params(page: str) -> dict[str, Any]:
    return {
        "now": None,
        "source_types": ["notion"],
        "source_page_ids": [page],
        "payloads": [Jsonb({"type": "page.content_updated", "entity": {"id": page}})],
        "event_ids": [uuid.uuid4().hex],
        "debounce_seconds": [0.0],
        "max_wait_seconds": [3600.0],
        "priorities": [0],
        "max_attempts": [5],
        "workspace_ids": [None],
        "change_kinds": ["content"],
    }


def _claim_params() -> dict[str, Any]:
    # The worker's claim: one source with one slot.
    return {
        "now": None,
        "worker_id": "bench",
        "limit": 1,
        "lease_seconds": 60.0,
        "sources": ["notion"],
        "source_slots": [1],
        **budget_params(None, None),
        "workspace_concurrency": UNLIMITED,
    }


def _plan_summary(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE inside a rolled-back transaction: indexes used and scans of sync_jobs."""
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute("explain (analyze, buffers, format json) " + query, params)
        plan = cur.fetchone()[0]  # type: ignore[index]
    if isinstance(plan, str):
        plan = json.loads(plan)
    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "sync_jobs" or node.get("Index Name"):
            desc = node["Node Type"]
            if node.get("Index Name"):
                desc += f" using {node['Index Name']}"
            elif node.get("Relation Name"):
                desc += " on sync_jobs"
            if node.get("Node Type") == "ModifyTable" and node.get("Conflict Arbiter Indexes"):
                desc += f" (arbiter {','.join(node['Conflict Arbiter Indexes'])})"
            nodes.append(desc)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return {
        "execution_ms": round(plan[0]["Execution Time"], 3),
        "sync_jobs_nodes": sorted(set(nodes)),
        "seq_scan_of_sync_jobs": any(n.startswith("Seq Scan on sync_jobs") for n in nodes),
    }


def _measure(conn: psycopg.Connection[Any], size: int) -> dict[str, Any]:
    # enqueue: single-event upserts on fresh pages (debounce 0: due at once, for the claims)
    enq: list[float] = []
    for i in range(OPS):
        params = _enqueue_params(f"new-{size}-{i}")
        t0 = time.perf_counter()
        conn.execute(Q["enqueue"], params).fetchall()
        enq.append((time.perf_counter() - t0) * 1000)
    # claim + complete of those due jobs, one at a time
    claim: list[float] = []
    complete: list[float] = []
    for _ in range(OPS):
        t0 = time.perf_counter()
        rows = conn.cursor(row_factory=dict_row).execute(Q["claim"], _claim_params()).fetchall()
        claim.append((time.perf_counter() - t0) * 1000)
        if not rows:
            break
        t0 = time.perf_counter()
        conn.execute(Q["settle"], settle_params([SyncJob.from_row(rows[0])], [], [])).fetchall()
        complete.append((time.perf_counter() - t0) * 1000)
    # plans, with one due job present for the claim
    conn.execute(Q["enqueue"], _enqueue_params(f"plan-{size}")).fetchall()
    plan_enqueue = _plan_summary(conn, Q["enqueue"], _enqueue_params(f"plan2-{size}"))
    plan_claim = _plan_summary(conn, Q["claim"], _claim_params())
    conn.execute(  # the plan's job ends as settle ends one: moved to finished_jobs (migration 034)
        "with g as (delete from sync_jobs where source_page_id = %s returning *) "
        "insert into finished_jobs select g.id, g.source_type, g.source_page_id, 'completed', "
        "g.payload, g.event_id, g.event_count, g.priority, g.attempts, g.max_attempts, g.scheduled_at, "
        "g.first_event_at, g.max_wait_until, null, null, null, null, g.revision, g.claimed_revision, "
        "g.last_error, g.created_at, now(), now(), g.workspace_id, null, g.change_kinds from g",
        (f"plan-{size}",),
    )

    def ms(v: list[float]) -> dict[str, float]:
        return {"mean": round(statistics.fmean(v), 3), "p50": round(statistics.median(v), 3)} if v else {}

    return {
        "enqueue_ms": ms(enq),
        "claim_ms": ms(claim),
        "complete_ms": ms(complete),
        "claims_done": len(claim),
        "plan_enqueue": plan_enqueue,
        "plan_claim": plan_claim,
    }


def run(server_url: str, quick: bool) -> dict[int, dict[str, Any]]:
    """The figures of each size, by its number of finished jobs."""
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    out: dict[int, dict[str, Any]] = {}
    with scratch_database(server_url, "growth") as url, psycopg.connect(url, autocommit=True) as conn:
        have = 0
        for size in sizes:
            note(f"growth: {size} finished jobs")
            t0 = time.perf_counter()
            conn.execute(INSERT_FINISHED, {"lo": have + 1, "hi": size})
            have = size
            conn.execute("vacuum analyze sync_jobs")
            conn.execute("vacuum analyze finished_jobs")
            load_s = time.perf_counter() - t0
            r = _measure(conn, size)
            out[size] = r
            emit(
                "growth",
                finished_jobs=size,
                load_seconds=round(load_s, 1),
                enqueue_ms=r["enqueue_ms"],
                claim_ms=r["claim_ms"],
                complete_ms=r["complete_ms"],
                enqueue_plan=r["plan_enqueue"],
                claim_plan=r["plan_claim"],
            )
    first, last = out[sizes[0]], out[sizes[-1]]
    flat = (
        last["claim_ms"]["p50"] <= 2 * first["claim_ms"]["p50"] + 0.5
        and last["enqueue_ms"]["p50"] <= 2 * first["enqueue_ms"]["p50"] + 0.5
    )
    no_seq = not any(
        out[s][k]["seq_scan_of_sync_jobs"] for s in sizes for k in ("plan_enqueue", "plan_claim")
    )
    emit("growth_summary", sizes=sizes, flat_within_2x=flat, no_seq_scan_of_sync_jobs=no_seq)
    return out
