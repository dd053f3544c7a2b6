"""Shared helpers: throwaway databases, subprocesses killed at exit, RSS sampling, figures."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

#: Every JSON line printed by this run (``python -m bench --out`` writes them to a file).
RESULTS: list[dict[str, Any]] = []


def emit(bench: str, **figures: Any) -> dict[str, Any]:
    """Print one figure line ``{"bench": ..., ...}`` and remember it."""
    record = {"bench": bench, **figures}
    RESULTS.append(record)
    print(json.dumps(record, default=str), flush=True)
    return record


def note(text: str) -> None:
    """Progress text, on stderr so stdout stays JSON lines."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def percentiles(values: Sequence[float], ps: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": …, "p95": …, "p99": …, "max": …}`` (nearest rank) of ``values``; {} if empty."""
    if not values:
        return {}
    s = sorted(values)
    out = {f"p{p:g}": s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))] for p in ps}
    out["max"] = s[-1]
    out["mean"] = sum(s) / len(s)
    return {k: round(v, 3) for k, v in out.items()}


# --- databases ----------------------------------------------------------------------------------


def with_dbname(url: str, dbname: str) -> str:
    return make_conninfo(url, dbname=dbname)


@contextlib.contextmanager
def scratch_database(server_url: str, label: str) -> Iterator[str]:
    """A fresh database ``bench_<label>_<hex>`` migrated with debounce's schema; dropped after
    (with force: any leftover connection of ours is closed). Yields its URL."""
    from debounce.migrate import migrate

    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    url = with_dbname(server_url, name)
    try:
        asyncio.run(migrate(url))
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


def line_up(conn: psycopg.Connection[Any]) -> int:
    """Put the workspaces of jobs a benchmark wrote with its own SQL (bulk rows, not the queue's
    statements) in the claim's line: the queue's repair, ``repair_lines`` (docs/claim.md,
    "Keeping the line"). Returns how many workspace rows changed."""
    from debounce.infra.sql import queries

    changed, after = 0, 0
    while True:
        row = conn.execute(
            queries("claim")["repair_lines"],
            {"after": after, "batch": 1000, "workspace_concurrency": 1_000_000},
        ).fetchone()
        if row is None or row[1] is None:
            return changed
        changed, after = changed + int(row[0] or 0), int(row[1])


def server_version(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select version()").fetchone()
        return str(row[0]) if row else "?"


def libpq_env(url: str) -> dict[str, str]:
    """PGHOST/PGPORT/PGUSER/PGDATABASE/PGPASSWORD for command-line tools (pgbench)."""
    d = conninfo_to_dict(url)
    env = {}
    for key, var in (
        ("host", "PGHOST"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("dbname", "PGDATABASE"),
        ("password", "PGPASSWORD"),
    ):
        if d.get(key):
            env[var] = str(d[key])
    return env


# --- subprocesses ------------------------------------------------------------------------------

_CHILDREN: list[subprocess.Popen[Any]] = []


def _kill_all() -> None:
    for proc in list(_CHILDREN):
        stop(proc, grace=2.0)


atexit.register(_kill_all)


def spawn(
    args: Sequence[str], *, env: dict[str, str] | None = None, log: Path | None = None, capture: bool = False
) -> subprocess.Popen[Any]:
    """Start a child in its own process group; it is killed at exit whatever happens.
    Its output goes to ``log`` (or nowhere); with ``capture`` its stdout is a pipe."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else ""
    )
    sink: Any = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        list(args),
        env=full_env,
        cwd=ROOT,
        stdout=subprocess.PIPE if capture else sink,
        stderr=sink if capture else subprocess.STDOUT,
        start_new_session=True,
    )
    _CHILDREN.append(proc)
    return proc


def stop(proc: subprocess.Popen[Any], *, grace: float = 10.0) -> int | None:
    """SIGTERM the child's process group, SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    if proc in _CHILDREN:
        _CHILDREN.remove(proc)
    return proc.returncode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s ({last})")


class RssSampler:
    """Samples the RSS of some processes (and their children) every ``interval`` seconds in a
    thread; ``peak_mib`` is the highest sum seen per process."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.pids: list[int] = []
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, pid: int) -> None:
        self.pids.append(pid)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            for pid in list(self.pids):
                try:
                    p = psutil.Process(pid)
                    rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
                except psutil.Error:
                    continue
                self.peak[pid] = max(self.peak.get(pid, 0), rss)
            self._stop.wait(self.interval)

    def stop(self) -> dict[int, float]:
        self._stop.set()
        self._thread.join(timeout=2)
        return {pid: round(v / 1048576, 1) for pid, v in self.peak.items()}
