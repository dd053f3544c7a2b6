"""Benchmark 3 (worker throughput) and half of 5 (worker memory).

N due no-op jobs, drained by 1 and by 4 ``debounce worker`` processes (``bench.worker_proc``:
the real worker with a ``noop`` source, default settings), first jobs of no workspace, then the
same jobs spread over 64 workspaces with no budget (unmetered); the worker processes' CPU per job
is read with ``psutil``; then, in the same database, the same
number of no-op jobs drained by pgqueuer and by procrastinate with the same process counts
(``bench.rivals``). Every drain is timed the same way: the orchestrator polls the library's
tables every 20 ms, from the first finished job to the last (process start-up is excluded).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg
from cryptography.fernet import Fernet

from bench.common import RssSampler, emit, line_up, note, scratch_database, spawn, stop
from debounce.infra.secrets import Keyring

INSERT_JOBS = """
insert into sync_jobs (source_type, source_page_id, status, payload, event_count, scheduled_at,
                       first_event_at, max_wait_until, revision)
select 'noop', 'page-' || g, 'pending', '{}'::jsonb, 1, now() - interval '1 second',
       now() - interval '1 second', now() + interval '1 hour', 1
  from generate_series(1, %(n)s) g
"""

#: jobs/s of this benchmark at the first release (57dc66f), by process count (issue 24's goal).
FIRST_RELEASE = {1: 2028.0, 4: 2784.0}
#: The same jobs spread over this many workspaces (unmetered: the noop source has no budget),
#: each allowing the default workspace concurrency (4 syncs in flight), each with its own
#: token stored encrypted (the workers get the key): what a sync of a workspace costs on top.
WORKSPACES = 64
ADD_WORKSPACES = """
insert into workspaces (source_type, external_id, name, origin, credentials)
select 'noop', 'TBENCH' || g, 'bench ' || g, 'cli', %(credentials)s
  from generate_series(1, %(n)s) g
"""
#: The key of the stored tokens (a throwaway Fernet key made per run).
SECRET_KEY = Fernet.generate_key().decode()
SPREAD_JOBS = """
update sync_jobs j set workspace_id = w.id
  from workspaces w
 where w.source_type = 'noop' and w.external_id = 'TBENCH' || (1 + j.id %% %(n)s)
"""

COUNTS = {
    "debounce": "select (select count(*) from finished_jobs where source_type = 'noop'), "
    "(select count(*) from finished_jobs where source_type = 'noop') "
    "+ (select count(*) from sync_jobs where status = 'processing' and source_type = 'noop')",
    "pgqueuer": "select %(n)s - count(*), %(n)s - count(*) filter (where status = 'queued') from pgqueuer",
    "procrastinate": "select count(*) filter (where status = 'succeeded'), "
    "count(*) filter (where status in ('doing', 'succeeded')) "
    "from procrastinate_jobs",
}


def _drain(url: str, lib: str, procs: list[Any], n: int, timeout: float) -> dict[str, Any]:
    """Poll until ``n`` jobs are done; rates from the first observed completion."""
    sampler = RssSampler().start()
    for p in procs:
        sampler.watch(p.pid)
    watched = [psutil.Process(p.pid) for p in procs]

    def cpu() -> float:
        total = 0.0
        for w in watched:
            try:
                t = w.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

    t_first = t_claimed = t_done = None
    c_first = 0
    cpu_first = cpu_done = 0.0
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            done, claimed = conn.execute(COUNTS[lib], {"n": n}).fetchone()  # type: ignore[misc]
            now = time.monotonic()
            if t_first is None and done > 0:
                t_first, c_first, cpu_first = now, done, cpu()
            if t_claimed is None and claimed >= n:
                t_claimed = now
            if done >= n:
                t_done = now
                cpu_done = cpu()
                break
            if lib != "debounce" and all(p.poll() is not None for p in procs):
                break  # drain-mode rivals exited
            time.sleep(0.02)
    peaks = sampler.stop()
    out: dict[str, Any] = {"completed": done, "timed_out": t_done is None}
    if t_first is not None and t_done is not None and t_done > t_first:
        out["completed_per_s"] = round((n - c_first) / (t_done - t_first), 1)
        out["seconds"] = round(t_done - t_first, 2)
        # The worker processes' CPU (user + system) per job over the same span.
        out["cpu_ms_per_job"] = round((cpu_done - cpu_first) * 1000 / (n - c_first), 4)
        if lib == "debounce" and t_claimed is not None and t_claimed > t_first:
            out["claimed_per_s"] = round((n - c_first) / (t_claimed - t_first), 1)
    out["peak_rss_mib_per_process"] = max(peaks.values()) if peaks else None
    return out


def run(server_url: str, quick: bool) -> dict[str, Any]:
    n = 2000 if quick else 20000
    timeout = 120.0 if quick else 300.0
    results: dict[tuple[str, int], dict[str, Any]] = {}  # (variant or rival, workers)
    with (
        tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp,
        scratch_database(server_url, "worker") as url,
    ):
        logdir = Path(tmp)
        for workers in (1, 4):
            # debounce: jobs of no workspace, then the same jobs spread over workspaces
            for variant in ("debounce", "debounce_workspaces"):
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("delete from sync_jobs")
                    conn.execute("truncate finished_jobs")
                    conn.execute(INSERT_JOBS, {"n": n})
                    # No cascade since migration 022 (a removal is a tombstone): the previous
                    # run's rows that refer to its workspaces go first, in the scratch database.
                    conn.execute("delete from workspace_sync_costs")
                    conn.execute("delete from documents")
                    conn.execute("delete from backfills")
                    conn.execute("delete from conversation_audiences")
                    conn.execute("delete from workspaces where source_type = 'noop'")
                    if variant == "debounce_workspaces":
                        token = Keyring(SECRET_KEY).encrypt({"access_token": "bench-token"})
                        conn.execute(ADD_WORKSPACES, {"n": WORKSPACES, "credentials": token})
                        conn.execute(SPREAD_JOBS, {"n": WORKSPACES})
                        line_up(conn)
                        conn.execute("analyze workspaces")
                    conn.execute("vacuum analyze sync_jobs")
                note(f"worker throughput: {variant}, {workers} process(es), {n} jobs")
                procs = [
                    spawn(
                        [sys.executable, "-m", "bench.worker_proc"],
                        env={"DATABASE_URL": url, "DEBOUNCE_SECRET_KEY": SECRET_KEY},
                        log=logdir / "worker.log",
                    )
                    for _ in range(workers)
                ]
                try:
                    r = _drain(url, "debounce", procs, n, timeout)
                finally:
                    for p in procs:
                        stop(p)
                results[(variant, workers)] = r
            # rivals, same database
            for lib in ("pgqueuer", "procrastinate"):
                note(f"worker throughput: {lib}, {workers} process(es), {n} jobs")
                setup = spawn(
                    [sys.executable, "-m", "bench.rivals", lib, "setup", url, str(n)],
                    log=logdir / f"{lib}.log",
                )
                try:
                    if setup.wait(timeout=180) != 0:
                        raise RuntimeError(
                            f"{lib} setup failed: " + (logdir / f"{lib}.log").read_text()[-2000:]
                        )
                finally:
                    stop(setup)
                procs = [
                    spawn([sys.executable, "-m", "bench.rivals", lib, "work", url], log=logdir / f"{lib}.log")
                    for _ in range(workers)
                ]
                try:
                    r = _drain(url, lib, procs, n, timeout)
                finally:
                    for p in procs:
                        stop(p)
                results[(lib, workers)] = r
                if lib == "procrastinate":
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("delete from procrastinate_jobs")
        log_tail = (logdir / "worker.log").read_text(errors="replace")[-1500:]
    for workers in (1, 4):
        d = results[("debounce", workers)]
        dw = results[("debounce_workspaces", workers)]
        pq = results[("pgqueuer", workers)]
        pc = results[("procrastinate", workers)]
        rate = d.get("completed_per_s")
        rate_ws = dw.get("completed_per_s")
        r_ws = round(rate_ws / rate, 2) if rate and rate_ws else None
        r_pq = round(rate / pq["completed_per_s"], 2) if rate and pq.get("completed_per_s") else None
        r_pc = round(rate / pc["completed_per_s"], 2) if rate and pc.get("completed_per_s") else None
        emit(
            "worker_throughput",
            processes=workers,
            jobs=n,
            claimed_per_s=d.get("claimed_per_s"),
            completed_per_s=rate,
            timed_out=d["timed_out"],
            cpu_ms_per_job=d.get("cpu_ms_per_job"),
            workspaces=WORKSPACES,
            workspaces_completed_per_s=rate_ws,
            workspaces_cpu_ms_per_job=dw.get("cpu_ms_per_job"),
            ratio_workspaces_to_none=r_ws,
            goal_workspaces_within_20pct=bool(r_ws and r_ws >= 0.8),
            goal_ge_first_release=bool(rate and rate >= FIRST_RELEASE[workers]),
            goal_ge_0_5x_pgqueuer=bool(r_pq and r_pq >= 0.5),
            pgqueuer_completed_per_s=pq.get("completed_per_s"),
            procrastinate_completed_per_s=pc.get("completed_per_s"),
            ratio_to_pgqueuer=r_pq,
            ratio_to_procrastinate=r_pc,
            goal_ge_2x_pgqueuer=bool(r_pq and r_pq >= 2.0),
            goal_ge_10x_procrastinate=bool(r_pc and r_pc >= 10.0),
            rival_peak_rss_mib={
                "pgqueuer": pq["peak_rss_mib_per_process"],
                "procrastinate": pc["peak_rss_mib_per_process"],
            },
        )
        if d["timed_out"] or dw["timed_out"]:
            note("worker log tail:\n" + log_tail)
    peak = max(
        (results[(v, w)]["peak_rss_mib_per_process"] or 0)
        for v in ("debounce", "debounce_workspaces")
        for w in (1, 4)
    )
    emit(
        "memory",
        process="worker",
        during="worker_throughput",
        peak_rss_mib=peak,
        goal_le_100_mib=bool(peak and peak <= 100),
    )
    return {f"{k[0]}_{k[1]}": v for k, v in results.items()}
