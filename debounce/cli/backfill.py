"""``debounce backfill SOURCE [--workspace ID]``: copy everything a workspace can see.

Requests a backfill of each chosen workspace (``POST /workspaces/{id}/backfill`` does the
same) and, unless ``--no-wait``, shows its progress until every page is synced: listed /
synced / remaining, with an ETA from the workspace's API budget. The work itself is done by
the running workers (the enumeration, then bulk jobs through the fair claim), so stopping
this command (Ctrl-C) stops nothing; running it again shows the same backfill (it is
idempotent).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from tqdm import tqdm

import integrations
from debounce import enumerations, workspaces
from debounce.config import Settings

__all__ = ["add_parser", "run"]

#: Seconds between two looks at the progress.
POLL_SECONDS = 1.0
#: Seconds without any progress after which the command says no worker seems to run.
STALL_SECONDS = 15.0


def add_parser(sub: Any) -> None:
    """Add ``backfill`` to the CLI's subparsers ``sub``."""
    text = ("copy every page (channel) a workspace can see: enumerate it and sync what is "
            "missing or stale, in the bulk lane (the workers do it); shows the progress")
    sp = sub.add_parser("backfill", help=text, description=text)
    sp.add_argument("source", choices=integrations.source_types())
    sp.add_argument("--workspace", type=int, metavar="ID",
                    help="only this workspace (default: every active one of SOURCE)")
    sp.add_argument("--no-wait", action="store_true", help="request it and return")


def _fail(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce backfill``; returns the exit code (1: no such workspace, or one
    failed)."""
    rows = [r for r in await workspaces.list_workspaces(pool, args.workspace,
                                                        budgets=settings.source_budgets())
            if r["source_type"] == args.source]
    if args.workspace is not None and not rows:
        return _fail(f"no {args.source} workspace {args.workspace}")
    rows = [r for r in rows if r["status"] == "active"]
    if not rows:
        return _fail(f"no active {args.source} workspace: connect one first "
                     "(debounce workspaces add, or an install flow)")
    source = integrations.get(args.source)
    for row in rows:
        started = await enumerations.request(pool, row["id"], "backfill")
        verb = ("started" if started and started.get("inserted")
                else f"already running ({started['kind'] if started else 'backfill'})")
        print(f"backfill of workspace {row['id']} ({row['external_id'] or row['name']}): {verb}")
    if args.no_wait:
        return 0
    failed = 0
    for row in rows:
        failed += await _watch(pool, row, source.requests_per_page)
    return 1 if failed else 0


async def _watch(pool: Any, row: dict[str, Any], requests_per_page: float) -> int:
    """Show one workspace's backfill until it is done; 1 if it failed."""
    per_minute = float(row["budget"]["per_minute"] or 0)
    bar = tqdm(total=0, unit="page", desc=f"workspace {row['id']}", dynamic_ncols=True,
               file=sys.stdout, disable=None)
    last, last_change, said = None, time.monotonic(), False
    try:
        while True:
            p = await enumerations.latest(pool, row["id"], per_minute=per_minute,
                                          requests_per_page=requests_per_page)
            if p is None:
                return 1
            bar.total = max(p.enqueued + p.rechecks, 1)
            bar.n = p.synced
            eta = f"{p.eta_seconds:.0f} s" if p.eta_seconds is not None else "-"
            bar.set_postfix_str(f"listed {p.discovered}, current {p.current}, "
                                f"remaining {p.remaining}, ETA {eta} (budget)", refresh=False)
            bar.refresh()
            figures = (p.discovered, p.synced, p.remaining, p.status)
            if figures != last:
                last, last_change = figures, time.monotonic()
            elif not said and time.monotonic() - last_change > STALL_SECONDS:
                said = True
                bar.write("no progress for a while: is a worker running (debounce worker)?")
            if p.status == "failed":
                bar.write(f"backfill failed: {p.error}")
                return 1
            if p.status in ("done", "cancelled") and p.remaining == 0:
                bar.write(f"workspace {row['id']}: {p.discovered} listed, {p.synced} synced, "
                          f"{p.current} already current")
                return 0
            await asyncio.sleep(POLL_SECONDS)
    finally:
        bar.close()
