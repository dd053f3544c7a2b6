"""Benchmark 1 (ingest) and half of 5 (web memory).

A real ``uvicorn debounce.web:app`` on loopback, driven by ``bench.loadgen`` in another process:
N signed webhooks over 2 000 pages, then N to one hot page, then N ``GET /healthz`` (the trivial
route: the server's, the framework's and the load generator's own ceiling), at fixed concurrency;
the web process's CPU seconds (user + system, ``psutil``) over each phase give its CPU per
request. Then the limits it is compared with: the same debounce upsert through psycopg from one
process at the same concurrency (``raw``), ``pgbench`` running the same statement, one event
per transaction, 8 clients, and ``pgbench`` running the bare debounce upsert (one ``INSERT … ON
CONFLICT … DO UPDATE`` per transaction: :func:`bare_upsert_script`), what the service's
statement is measured against since issue 38.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from psycopg_pool import AsyncConnectionPool

from bench import loadgen, wrkload
from bench.common import (
    RssSampler,
    emit,
    free_port,
    libpq_env,
    note,
    scratch_database,
    spawn,
    stop,
    wait_http,
)
from debounce import queue
from debounce.infra.sql import queries
from debounce.types import JobEvent

PAGES = 2000
CONCURRENCY = 32
PGBENCH_CLIENTS = 8
#: The trivial route the same server answers in the same run (no database, a constant body):
#: the ceiling of the server, the framework and the load generator on this machine.
TRIVIAL_ROUTE = "/healthz"


def clients() -> list[str]:
    """The load generators of this run: httpx (the reference), aiohttp (a cheaper Python
    client) and, where Debian's ``wrk`` is installed, wrk (a C client: what the web costs when
    the client leaves it the cores; issue 24's measurement)."""
    return ["httpx", "aiohttp"] + (["wrk"] if wrkload.available() else [])


# --- the web process under load -----------------------------------------------------------------


def run_web(
    url: str, events: int, logdir: Path, load_generators: list[str]
) -> tuple[dict[tuple[str, str], dict[str, Any]], float | None]:
    """The load generators' figures by (client, phase), and the web process's peak RSS (MiB)."""
    port = free_port()
    env = {
        "DATABASE_URL": url,
        "NOTION_WEBHOOK_SECRET": loadgen.NOTION_SECRET,
        "SLACK_SIGNING_SECRET": loadgen.SLACK_SECRET,
        "PORT": str(port),
    }
    web = spawn(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "debounce.web:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
        ],
        env=env,
        log=logdir / "web.log",
    )
    sampler = RssSampler().start()
    sampler.watch(web.pid)
    proc = psutil.Process(web.pid)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        for client, phase in ((c, p) for c in load_generators for p in ("spread", "hot", "trivial")):
            warmup = 200 if phase == "spread" else 0
            args = (
                [sys.executable, "-m", "bench.wrkload"]
                if client == "wrk"
                else [sys.executable, "-m", "bench.loadgen", "--client", client]
            )
            args += [
                "--url",
                f"http://127.0.0.1:{port}",
                "--events",
                str(events),
                "--pages",
                str(PAGES),
                "--concurrency",
                str(CONCURRENCY),
                "--deadline",
                "120",
                "--warmup",
                str(warmup),
            ]
            if phase == "hot":
                args += ["--hot"]
            if phase == "trivial":
                args += ["--trivial", TRIVIAL_ROUTE]
            before = proc.cpu_times()
            gen = spawn(args, capture=True, log=logdir / "loadgen.log")
            try:
                stdout, _ = gen.communicate(timeout=300)
            finally:
                stop(gen)
            after = proc.cpu_times()
            lines = [ln for ln in stdout.decode().splitlines() if ln.startswith("{")]
            if not lines:
                raise RuntimeError(f"load generator printed nothing (see {logdir}/loadgen.log)")
            figures = json.loads(lines[-1])
            # The web process's CPU (user + system) over the load generator's whole run, per
            # request answered 2xx (the warm-up's requests included: they were served too).
            answered = warmup + sum(n for code, n in figures["statuses"].items() if code.startswith("2"))
            cpu = (after.user - before.user) + (after.system - before.system)
            figures["web_cpu_seconds"] = round(cpu, 3)
            figures["web_cpu_ms_per_request"] = round(cpu * 1000 / answered, 4) if answered else None
            out[(client, phase)] = figures
    finally:
        stop(web)
        peak = sampler.stop()
    return out, peak.get(web.pid)


# --- the raw limit: the same upsert from one process ---------------------------------------------


async def raw_limit(url: str, events: int, hot: bool) -> dict[str, Any]:
    bodies = loadgen.Bodies()
    pool = AsyncConnectionPool(
        url, min_size=CONCURRENCY, max_size=CONCURRENCY, open=False, kwargs={"autocommit": True}, timeout=10
    )
    await pool.open(wait=True, timeout=30)
    latencies: list[float] = []

    def event(i: int) -> JobEvent:
        page = loadgen.notion_page_id(0 if hot else (i % PAGES))
        _, body = bodies.notion_event(page)
        payload = json.loads(body)
        return JobEvent(
            source_type="notion",
            source_page_id=page,
            payload=payload,
            event_id=payload["id"],
            debounce_seconds=300.0,
            max_wait_seconds=3600.0,
        )

    todo = iter([event(i) for i in range(events)])
    try:

        async def one() -> None:
            for ev in todo:
                t0 = time.perf_counter()
                await queue.enqueue(pool, [ev])
                latencies.append((time.perf_counter() - t0) * 1000)

        # warm up: prepared statements on every connection
        await asyncio.gather(*(queue.enqueue(pool, [event(i)]) for i in range(CONCURRENCY * 3)))
        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(CONCURRENCY))), timeout=180)
        elapsed = time.perf_counter() - started
    finally:
        await pool.close()
    lat = sorted(latencies)
    return {
        "events": len(lat),
        "seconds": round(elapsed, 3),
        "statements_per_s": round(len(lat) / elapsed, 1),
        "p50_ms": round(lat[len(lat) // 2], 2),
        "p99_ms": round(lat[int(len(lat) * 0.99)], 2),
    }


# --- pgbench: the one-statement limit ------------------------------------------------------------


def pgbench_script(hot: bool) -> str:
    """``enqueue`` from sql/queries/queue.sql with its array parameters written as one-element
    array literals (pgbench cannot bind arrays); the statement is otherwise unchanged."""
    payload = json.loads((loadgen.EXAMPLES / "notion" / "page.content_updated.json").read_text())
    payload_sql = json.dumps(payload, separators=(",", ":")).replace("'", "''")
    page = "'bench-hot'" if hot else "'bench-page-' || (:pid)::text"
    subst = {
        "now": "NULL",
        "source_types": "ARRAY['notion']",
        "source_page_ids": f"ARRAY[{page}]",
        "payloads": f"ARRAY['{payload_sql}'::jsonb]",
        "event_ids": "ARRAY[md5(random()::text || clock_timestamp()::text)]",
        "debounce_seconds": "ARRAY[300.0::float8]",
        "max_wait_seconds": "ARRAY[3600.0::float8]",
        "priorities": "ARRAY[0]",
        "max_attempts": "ARRAY[5]",
        "workspace_ids": "ARRAY[NULL::bigint]",
        "change_kinds": "ARRAY['content']",
    }
    text = queries("queue")["enqueue"]
    text = re.sub(r"%\((\w+)\)[sbt]", lambda m: subst[m.group(1)], text)
    text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("--"))
    head = "" if hot else f"\\set pid random(1, {PAGES})\n"
    return head + text.strip() + ";\n"


def bare_upsert_script(hot: bool) -> str:
    """The bare debounce upsert (issue 38's peer): one ``INSERT … ON CONFLICT … DO UPDATE`` of
    a page's active job per transaction — the payload replaced, the event counted, the due time
    pushed but never past the max wait — and nothing else the service's ``enqueue`` does
    (idempotency keys, merging a batch, the workspace's line, the notification, the answer per
    event). What the statement itself has grown to cost is ``enqueue`` against this."""
    payload = json.loads((loadgen.EXAMPLES / "notion" / "page.content_updated.json").read_text())
    payload_sql = json.dumps(payload, separators=(",", ":")).replace("'", "''")
    page = "'bench-hot'" if hot else "'bench-page-' || (:pid)::text"
    head = "" if hot else f"\\set pid random(1, {PAGES})\n"
    return head + (
        "insert into sync_jobs as j (source_type, source_page_id, status, payload, event_id,"
        " event_count, priority, max_attempts, scheduled_at, first_event_at, max_wait_until,"
        " revision, created_at, updated_at)"
        f" values ('notion', {page}, 'pending', '{payload_sql}'::jsonb,"
        " md5(random()::text || clock_timestamp()::text), 1, 0, 5, now() + interval '300 s',"
        " now(), now() + interval '3600 s', 1, now(), now())"
        " on conflict (source_type, source_page_id) where status in ('pending', 'processing')"
        " do update set payload = excluded.payload, event_id = excluded.event_id,"
        " event_count = j.event_count + 1, revision = j.revision + 1,"
        " scheduled_at = least(excluded.scheduled_at, j.max_wait_until),"
        " updated_at = excluded.updated_at;\n"
    )


def run_pgbench(url: str, seconds: int, hot: bool, workdir: Path, bare: bool = False) -> dict[str, Any]:
    """pgbench running ``enqueue`` (``bare``: :func:`bare_upsert_script`) for ``seconds``,
    ``PGBENCH_CLIENTS`` clients, prepared statements: transactions per second, latency, failed."""
    name = ("bare" if bare else "enqueue") + ("_hot" if hot else "") + ".sql"
    script = workdir / name
    script.write_text(bare_upsert_script(hot) if bare else pgbench_script(hot))
    env = {**libpq_env(url)}
    import os

    cmd = [
        "pgbench",
        "-n",
        "-M",
        "prepared",
        "-c",
        str(PGBENCH_CLIENTS),
        "-j",
        "2",
        "-T",
        str(seconds),
        "-f",
        str(script),
    ]
    proc = subprocess.run(
        cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=seconds + 60
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed: {proc.stderr.strip()[-2000:]}")
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", proc.stdout)
    lat = re.search(r"latency average = ([\d.]+) ms", proc.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", proc.stdout)
    return {
        "tps": float(tps.group(1)) if tps else None,
        "latency_avg_ms": float(lat.group(1)) if lat else None,
        "failed": int(failed.group(1)) if failed else None,
        "clients": PGBENCH_CLIENTS,
        "seconds": seconds,
        "mode": "prepared",
    }


def run(server_url: str, quick: bool) -> dict[str, Any]:
    events = 2000 if quick else 20000
    pgbench_seconds = 5 if quick else 15
    load_generators = clients()
    if "wrk" not in load_generators:
        note("ingest: wrk is not installed (apt-get install wrk): no wrk phases")
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        workdir = Path(tmp)
        with scratch_database(server_url, "ingest") as url:
            note(f"ingest: web + load generator, {events} events x 2 phases")
            web, web_peak_rss_mib = run_web(url, events, workdir, load_generators)
            log_tail = (workdir / "web.log").read_text(errors="replace")[-3000:]
        if any(v["non_2xx"] for v in web.values()):
            note("web log tail:\n" + log_tail)
        with scratch_database(server_url, "raw") as url:
            note("ingest: raw psycopg limit")
            raw_spread = asyncio.run(raw_limit(url, events, hot=False))
            raw_hot = asyncio.run(raw_limit(url, events, hot=True))
        with scratch_database(server_url, "pgbench") as url:
            note("ingest: pgbench limit")
            pgb_spread = run_pgbench(url, pgbench_seconds, False, workdir)
            pgb_hot = run_pgbench(url, pgbench_seconds, True, workdir)
        with scratch_database(server_url, "bare") as url:
            note("ingest: pgbench, the bare upsert")
            bare_spread = run_pgbench(url, pgbench_seconds, False, workdir, bare=True)
            bare_hot = run_pgbench(url, pgbench_seconds, True, workdir, bare=True)
    res: dict[tuple[str, str], dict[str, Any]] = {}
    for client, phase, raw, pgb, bare in (
        (c, p, r, g, b)
        for c in load_generators
        for p, r, g, b in (
            ("spread", raw_spread, pgb_spread, bare_spread),
            ("hot", raw_hot, pgb_hot, bare_hot),
        )
    ):
        w = web[(client, phase)]
        trivial = web[(client, "trivial")]
        rps = w["requests_per_s"]
        rec = emit(
            "ingest",
            client=client,
            phase=phase,
            pages=1 if phase == "hot" else PAGES,
            events=w["requests"],
            concurrency=CONCURRENCY,
            requests_per_s=rps,
            p50_ms=w["p50_ms"],
            p95_ms=w["p95_ms"],
            p99_ms=w["p99_ms"],
            max_ms=w["max_ms"],
            non_2xx=w["non_2xx"],
            client_errors=w["client_errors"],
            raw_statements_per_s=raw["statements_per_s"],
            raw_p99_ms=raw["p99_ms"],
            ratio_ingest_to_raw=round(rps / raw["statements_per_s"], 2),
            pgbench_tps=pgb["tps"],
            pgbench_latency_avg_ms=pgb["latency_avg_ms"],
            pgbench_failed=pgb["failed"],
            ratio_ingest_to_pgbench=round(rps / pgb["tps"], 2) if pgb["tps"] else None,
            bare_upsert_tps=bare["tps"],
            bare_upsert_latency_avg_ms=bare["latency_avg_ms"],
            ratio_enqueue_to_bare_upsert=(
                round(pgb["tps"] / bare["tps"], 2) if pgb["tps"] and bare["tps"] else None
            ),
            ratio_ingest_to_bare_upsert=round(rps / bare["tps"], 2) if bare["tps"] else None,
            web_cpu_ms_per_webhook=w["web_cpu_ms_per_request"],
            trivial_route=TRIVIAL_ROUTE,
            trivial_requests_per_s=trivial["requests_per_s"],
            trivial_web_cpu_ms_per_request=trivial["web_cpu_ms_per_request"],
            ratio_ingest_to_trivial=(
                round(rps / trivial["requests_per_s"], 2) if trivial["requests_per_s"] else None
            ),
        )
        res[(client, phase)] = rec
    for client in load_generators:
        _goals(client, res[(client, "spread")], res[(client, "hot")])
    emit(
        "memory",
        process="web",
        during="ingest",
        peak_rss_mib=web_peak_rss_mib,
        goal_le_100_mib=bool(web_peak_rss_mib and web_peak_rss_mib <= 100),
    )
    return {f"{k[0]}_{k[1]}": v for k, v in res.items()}


def _goals(client: str, s: dict[str, Any], h: dict[str, Any]) -> None:
    goal_spread = bool(s["ratio_ingest_to_pgbench"] and s["ratio_ingest_to_pgbench"] >= 1.0)
    cpu = s["web_cpu_ms_per_webhook"]
    emit(
        "ingest_goals",
        client=client,
        spread_ge_1x_pgbench=goal_spread,
        spread_ge_0_8x_pgbench=bool(s["ratio_ingest_to_pgbench"] and s["ratio_ingest_to_pgbench"] >= 0.8),
        web_cpu_le_0_25_ms_per_webhook=bool(cpu is not None and cpu <= 0.25),
        hot_ge_1_5x_pgbench_hot=bool(h["ratio_ingest_to_pgbench"] and h["ratio_ingest_to_pgbench"] >= 1.5),
        spread_p99_le_20ms=s["p99_ms"] <= 20,
        hot_p99_le_20ms=h["p99_ms"] <= 20,
        zero_non_2xx=(
            s["non_2xx"] == 0 and h["non_2xx"] == 0 and not s["client_errors"] and not h["client_errors"]
        ),
        hot_ge_2x_pgbench_hot=bool(h["ratio_ingest_to_pgbench"] and h["ratio_ingest_to_pgbench"] >= 2.0),
        # issue 38: against the bare upsert, not the service's own statement
        spread_ge_0_8x_bare_upsert=bool(
            s["ratio_ingest_to_bare_upsert"] and s["ratio_ingest_to_bare_upsert"] >= 0.8
        ),
        hot_ge_1_5x_bare_upsert_hot=bool(
            h["ratio_ingest_to_bare_upsert"] and h["ratio_ingest_to_bare_upsert"] >= 1.5
        ),
        spread_p99_le_25ms=s["p99_ms"] <= 25,
    )
