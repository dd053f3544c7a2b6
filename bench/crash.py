"""``python -m bench.crash [--seconds N] [--pages N]``: the crash drill.

The processes of the Procfile (``uvicorn debounce.web:app`` and three ``debounce worker``) run
against an embedded Postgres of their own (``pgserver``, so the drill can restart it) and the
Notion stand-in, through the real SDK. Signed webhooks arrive at a steady rate over a few
hundred pages while, every few seconds, a worker is killed with SIGKILL and a new one started
(a platform's crash or deploy), and once, in the middle, Postgres is stopped in immediate mode
(a crash) and started again. Afterwards:

- every due job is synced (nothing pending or processing, nothing failed), every page whose
  webhook was accepted has its document, and no workspace is left at its concurrency limit;
- no webhook was answered 5xx outside the restart (from the stop until the server accepted
  connections again, plus the pool's reconnection: ``RESTART_SLACK`` seconds).

Prints JSON lines (``bench.common.emit``) with ``goal_*`` booleans; exits 1 when a goal is
missed. Not part of ``python -m bench``: it restarts its own server and takes about two
minutes. Run it before landing a change to the claim, a workspace's state, or what a process
reads at start.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.common import ROOT, emit, free_port, note, spawn, stop, wait_http
from debounce.cli import sign_request
from debounce.migrate import migrate
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer

TOKEN = "secret_crash_drill_token"
SECRET = "secret_crash_drill_signing"
#: Seconds after Postgres accepts connections again during which a 5xx still counts as the
#: restart's (the pools notice the dead connections and open new ones).
RESTART_SLACK = 5.0
EXAMPLE = json.loads((ROOT / "examples" / "notion" / "page.content_updated.json").read_text())


def _pg_ctl(data: Path, *args: str) -> None:
    """``pg_ctl`` of pgserver's build on ``data``, as the user that owns it (pgserver runs
    Postgres as ``pgserver`` when started by root)."""
    import pgserver

    pg_ctl = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    command = [str(pg_ctl), "-D", str(data), *args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "pgserver", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _scalar(url: str, query: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        return row[0] if row else None


async def _load(
    web: str, pages: list[str], seconds: float, rate: float, answers: list[tuple[float, int, str]]
) -> None:
    """Post signed ``page.content_updated`` webhooks at ``rate`` per second for ``seconds``;
    each answer as (monotonic time, status (0: no answer), page)."""
    rng = random.Random(32)
    async with httpx.AsyncClient(base_url=web, timeout=10.0) as client:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            body = copy.deepcopy(EXAMPLE)
            n += 1
            body["id"] = f"00000000-0000-4000-9000-{n:012d}"
            body["entity"]["id"] = rng.choice(pages)
            raw = json.dumps(body).encode()
            try:
                resp = await client.post(
                    "/webhooks/notion",
                    content=raw,
                    headers={**sign_request("notion", raw, SECRET), "content-type": "application/json"},
                )
                answers.append((time.monotonic(), resp.status_code, body["entity"]["id"]))
            except httpx.HTTPError:
                answers.append((time.monotonic(), 0, body["entity"]["id"]))
            await asyncio.sleep(1.0 / rate)


def drill(seconds: float, n_pages: int) -> bool:
    """Run the drill (see the module docstring); returns whether every goal was met."""
    import pgserver

    work = Path(tempfile.mkdtemp(prefix="debounce-crash-"))
    data = work / "pgdata"
    server = pgserver.get_server(data, cleanup_mode=None)
    url = server.get_uri()
    asyncio.run(migrate(url))
    api = FakeNotion(token=TOKEN)
    pages = api.add_pages(n_pages, blocks=1, title="Crash")
    port = free_port()
    logs = work / "logs"
    logs.mkdir()
    with BackgroundServer(api.app()) as notion:
        env = {
            "DATABASE_URL": url,
            "NOTION_TOKEN": TOKEN,
            "NOTION_BASE_URL": notion.url,
            "NOTION_WEBHOOK_SECRET": SECRET,
            "NOTION_DEBOUNCE_SECONDS": "1",
            "NOTION_MAX_WAIT_SECONDS": "5",
            "DEBOUNCE_LEASE_SECONDS": "3",
            "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.5",
            "DEBOUNCE_BACKFILL_ON_CONNECT": "false",
            "DEBOUNCE_RECONCILE_INTERVAL_SECONDS": "0",
            "NOTION_BUDGET_PER_MINUTE": "6000",
            "NOTION_BUDGET_BURST": "50",
            "PORT": str(port),
        }
        for name in ("SLACK_BOT_TOKEN", "DEBOUNCE_SECRET_KEY"):
            os.environ.pop(name, None)
        web = spawn(
            [sys.executable, "-m", "uvicorn", "debounce.web:app", "--port", str(port), "--no-access-log"],
            env=env,
            log=logs / "web.log",
        )
        workers = [
            spawn([sys.executable, "-m", "debounce", "worker"], env=env, log=logs / f"worker-{i}.log")
            for i in range(3)
        ]
        wait_http(f"http://127.0.0.1:{port}/healthz")
        answers: list[tuple[float, int, str]] = []
        kills = 0
        restart: tuple[float, float] = (0.0, 0.0)

        async def faults() -> None:
            nonlocal kills, restart
            started = time.monotonic()
            rng = random.Random(9)
            restarted = False
            while time.monotonic() - started < seconds:
                await asyncio.sleep(3.0)
                victim = rng.randrange(len(workers))
                workers[victim].kill()  # SIGKILL: its leases are left behind
                kills += 1
                workers[victim] = spawn(
                    [sys.executable, "-m", "debounce", "worker"],
                    env=env,
                    log=logs / f"worker-{len(workers) + kills}.log",
                )
                if not restarted and time.monotonic() - started > seconds / 2:
                    restarted = True
                    down = time.monotonic()
                    # restart: stop in immediate mode (a crash), start with the same options
                    # (postmaster.opts: pgserver's socket directory, no TCP)
                    await asyncio.to_thread(
                        _pg_ctl, data, "restart", "-m", "immediate", "-w", "-l", str(data / "restart.log")
                    )
                    restart = (down, time.monotonic() + RESTART_SLACK)
                    note(f"crash: Postgres restarted in {time.monotonic() - down:.1f} s")

        async def both() -> None:
            await asyncio.gather(_load(f"http://127.0.0.1:{port}", pages, seconds, 40.0, answers), faults())

        asyncio.run(both())
        deadline = time.monotonic() + 60
        while _scalar(url, "select count(*) from sync_jobs where status in ('pending', 'processing')"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        drained_in = round(time.monotonic() - (deadline - 60), 1)
        left = _scalar(url, "select count(*) from sync_jobs where status in ('pending', 'processing')")
        failed = _scalar(url, "select count(*) from finished_jobs where status = 'failed'")
        accepted = sorted({page for _, status, page in answers if 200 <= status < 300})
        with psycopg.connect(url, autocommit=True) as conn:
            counted = conn.execute(
                "select count(*) from documents where deleted_at is null and document_id = any(%s)",
                (accepted,),
            ).fetchone()
            assert counted is not None  # count(*) answers one row
            documents = counted[0]
        at_limit = _scalar(url, "select count(*) from workspaces where at_concurrency_limit")
        for proc in [web, *workers]:
            stop(proc)
    server5xx = [(t, s) for t, s, _ in answers if s >= 500 or s == 0]
    outside = [s for t, s in server5xx if not restart[0] <= t <= restart[1]]
    ok2xx = sum(1 for _, s, _ in answers if 200 <= s < 300)
    goals = {
        "goal_everything_due_synced": left == 0 and failed == 0,
        "goal_every_edited_page_has_its_document": documents == len(accepted),
        "goal_no_workspace_left_at_its_limit": at_limit == 0,
        "goal_no_5xx_outside_the_restart": not outside,
    }
    emit(
        "crash",
        webhooks=len(answers),
        answered_2xx=ok2xx,
        answered_5xx_or_none_during_restart=len(server5xx) - len(outside),
        answered_5xx_or_none_outside_restart=len(outside),
        workers_killed=kills,
        postgres_restart_seconds=round(restart[1] - RESTART_SLACK - restart[0], 1),
        drained_within_seconds=drained_in,
        left_due_or_running=left,
        failed=failed,
        documents=documents,
        pages_edited=len(accepted),
        **goals,
    )
    _pg_ctl(data, "stop", "-m", "fast", "-w")
    with_errors = sorted(p.name for p in logs.iterdir() if "Traceback" in p.read_text())
    if with_errors or not all(goals.values()):
        note(
            f"crash: logs kept in {logs}"
            + (f"; tracebacks in {', '.join(with_errors)}" if with_errors else "")
        )
    else:
        shutil.rmtree(work, ignore_errors=True)
    return all(goals.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.crash",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seconds", type=float, default=40.0, help="length of the load (default 40)")
    p.add_argument("--pages", type=int, default=300, help="pages edited (default 300)")
    args = p.parse_args(argv)
    return 0 if drill(args.seconds, args.pages) else 1


if __name__ == "__main__":
    sys.exit(main())
