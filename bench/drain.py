"""One drain of the worker benchmark, for back-to-back comparisons of two versions of the code.

``python -m bench.drain [--jobs N] [--processes P] [--workspaces] [--code DIR] [--database-url URL]``

A fresh scratch database (migrated by this checkout), ``N`` due no-op jobs (``bench.throughput``'s
rows; with ``--workspaces`` spread over its 64 unmetered workspaces), drained by ``P``
``bench.worker_proc`` processes run from ``DIR`` (default: this checkout; a ``git worktree`` of
another commit compares that commit's worker on the same machine minutes apart). Prints one JSON
line: jobs/s from the first completion to the last, the workers' CPU (user + system) per job,
and the database transactions per job (``pg_stat_database.xact_commit``, which includes this
script's polling; backends report it about once a second, so read it from drains of several
seconds). The full ``--only worker`` benchmark also runs the rivals; one of its runs
moves by ±25 % on a 2-core machine, so alternate ``--code`` between versions a few times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench.common import DEFAULT_URL, ROOT, line_up, scratch_database, stop
from bench.throughput import (
    ADD_WORKSPACES,
    INSERT_JOBS,
    SECRET_KEY,
    SPREAD_JOBS,
    WORKSPACES,
)
from debounce.infra.secrets import Keyring

XACTS = "select xact_commit from pg_stat_database where datname = current_database()"
DONE = "select count(*) from finished_jobs where status = 'completed'"


def drain(
    url: str, jobs: int, processes: int, workspaces: bool, code: Path, timeout: float = 300.0
) -> dict[str, Any]:
    """Fill ``url`` with ``jobs`` due no-op jobs and time their drain (see the module)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(INSERT_JOBS, {"n": jobs})
        if workspaces:
            token = Keyring(SECRET_KEY).encrypt({"access_token": "bench-token"})
            conn.execute(ADD_WORKSPACES, {"n": WORKSPACES, "credentials": token})
            conn.execute(SPREAD_JOBS, {"n": WORKSPACES})
            line_up(conn)
            conn.execute("analyze workspaces")
        conn.execute("vacuum analyze sync_jobs")
    env = {**os.environ, "DATABASE_URL": url, "DEBOUNCE_SECRET_KEY": SECRET_KEY, "PYTHONPATH": str(code)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.worker_proc"],
            env=env,
            cwd=code,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(processes)
    ]
    watched = [psutil.Process(p.pid) for p in procs]

    def cpu() -> float:
        return sum(t.user + t.system for t in (w.cpu_times() for w in watched))

    out: dict[str, Any] = {
        "bench": "drain",
        "code": str(code),
        "jobs": jobs,
        "processes": processes,
        "workspaces": WORKSPACES if workspaces else 0,
    }
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            first: tuple[float, int, float, int] | None = None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                row = conn.execute(DONE).fetchone()
                done = int(row[0]) if row else 0
                now = time.monotonic()
                if first is None and done > 0:
                    x = conn.execute(XACTS).fetchone()
                    first = (now, done, cpu(), int(x[0]) if x else 0)
                if first is not None and done >= jobs and done > first[1]:
                    x = conn.execute(XACTS).fetchone()
                    n = done - first[1]
                    out["completed"] = done
                    out["completed_per_s"] = round(n / (now - first[0]), 1)
                    out["cpu_ms_per_job"] = round((cpu() - first[2]) * 1000 / n, 3)
                    out["transactions_per_job"] = round(((int(x[0]) if x else 0) - first[3]) / n, 3)
                    break
                time.sleep(0.02)
            else:
                out["timed_out"] = True
    finally:
        for p in procs:
            stop(p)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drain", description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--workspaces", action="store_true", help="spread the jobs over workspaces")
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose worker runs")
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or DEFAULT_URL,
        help="a server this script may create scratch databases on (as python -m bench)",
    )
    args = p.parse_args(argv)
    if not (args.code / "bench" / "worker_proc.py").is_file():
        p.error(f"--code {args.code}: no bench/worker_proc.py there")
    with scratch_database(args.database_url, "drain") as url:
        print(
            json.dumps(drain(url, args.jobs, args.processes, args.workspaces, args.code.resolve())),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
