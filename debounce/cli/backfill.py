"""``debounce backfill SOURCE [--workspace ID]``: copy everything a workspace can see.

Requests a backfill of each chosen workspace (``POST /workspaces/{id}/backfill`` does the
same) and, unless ``--no-wait``, shows its progress until every page is synced: listed /
synced / remaining, with an ETA from the workspace's API budget. The work itself is done by
the running workers (the backfill, then bulk jobs through the fair claim), so stopping
this command (Ctrl-C) stops nothing; running it again shows the same backfill (it is
idempotent). A workspace whose stored token the workers cannot decrypt (its
``credentials_error``, see ``debounce.workspaces``) blocks its backfill: the command says so
in one line and exits 1 (the backfill stays requested and goes on once a worker with the
right ``DEBOUNCE_SECRET_KEY`` starts).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from tqdm import tqdm

from debounce import registry, workspaces
from debounce.cli.errors import fail
from debounce.cli.workspace_cmds import Refused, resolve_workspace
from debounce.config import Settings
from debounce.queue import backfills

__all__ = ["add_parser", "run"]

#: Seconds between two looks at the progress.
POLL_SECONDS = 1.0
#: Seconds without any progress after which the command says no worker seems to run.
STALL_SECONDS = 15.0


def add_parser(sub: Any) -> None:
    """Add ``backfill`` to the CLI's subparsers ``sub``."""
    text = (
        "copy every page (channel) a workspace can see: list it and sync what is "
        "missing or stale, in the bulk lane (the workers do it); shows the progress"
    )
    sp = sub.add_parser("backfill", help=text, description=text)
    sp.add_argument("source", choices=registry.source_types())
    sp.add_argument(
        "--workspace",
        metavar="ID",
        help="only this workspace: its id or the source's id of it (default: every active one of SOURCE)",
    )
    sp.add_argument("--no-wait", action="store_true", help="request it and return")


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce backfill``; returns the exit code (1: no such workspace, or one
    failed or is blocked by its credentials error). The environment's workspace of the
    source (its token set, e.g. ``NOTION_TOKEN``) is registered first, as a worker or web
    process does when it starts: the command need not wait for one to have run."""
    token = workspaces.env_tokens(settings).get(args.source)
    if token:
        await workspaces.ensure_env_workspace(pool, args.source, token)
    if args.workspace is not None:
        try:
            rows = [await resolve_workspace(pool, settings, args.workspace, args.source)]
        except Refused as exc:
            return fail(str(exc), exc.code)
    else:
        rows = [
            r
            for r in await workspaces.list_workspaces(pool, budgets=settings.source_budgets())
            if r["source_type"] == args.source
        ]
    rows = [r for r in rows if r["status"] == "active"]
    source = registry.get(args.source)
    if not rows:
        token_env = next((s.env for s in source.settings if s.name == source.token_setting), None)
        enough = (
            f"set {token_env} (its token is the environment's {args.source} workspace: "
            "enough for one), or connect one"
            if token_env and not token
            else "connect one"
        )
        return fail(
            f"no active {args.source} workspace: {enough} (debounce workspaces add "
            f"{args.source} --token …, or an install flow)"
        )
    for row in rows:
        started = await backfills.request(pool, row["id"], "backfill")
        verb = (
            "is removed: nothing started"
            if started is None
            else "started"
            if started.get("inserted")
            else f"already running ({started['kind']})"
        )
        print(f"backfill of workspace {row['id']} ({row['external_id'] or row['name']}): {verb}")
    if args.no_wait:
        blocked = [b for row in rows if (b := await _blocked(pool, row)) is not None]
        for line in blocked:
            print(line, file=sys.stderr)
        return 1 if blocked else 0
    failed = 0
    for row in rows:
        failed += await _watch(pool, row, source.requests_per_page)
    return 1 if failed else 0


async def _blocked(pool: Any, row: dict[str, Any]) -> str | None:
    """The line saying what blocks ``row``'s backfill (its credentials error), or ``None``."""
    error = await workspaces.credentials_error(pool, row["id"])
    if error is None:
        return None
    reason, since = error
    return (
        f"backfill of workspace {row['id']} ({row['source_type']} "
        f"{row['external_id'] or row['name']}) blocked since "
        f"{since.isoformat(timespec='seconds')}: {reason}; it goes on once a worker with the "
        "right key starts"
    )


async def _watch(pool: Any, row: dict[str, Any], requests_per_page: float) -> int:
    """Show one workspace's backfill until it is done; 1 if it failed or is blocked."""
    per_minute = float(row["budget"]["per_minute"] or 0)
    bar = tqdm(
        total=0, unit="page", desc=f"workspace {row['id']}", dynamic_ncols=True, file=sys.stdout, disable=None
    )
    last, last_change, said = None, time.monotonic(), False
    try:
        while True:
            p = await backfills.latest(
                pool, row["id"], per_minute=per_minute, requests_per_page=requests_per_page
            )
            if p is None:
                return 1
            bar.total = max(p.enqueued + p.rechecks, 1)
            bar.n = p.synced
            eta = f"{p.eta_seconds:.0f} s" if p.eta_seconds is not None else "-"
            bar.set_postfix_str(
                f"listed {p.discovered}, current {p.current}, remaining {p.remaining}, ETA {eta} (budget)",
                refresh=False,
            )
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
                bar.write(
                    f"workspace {row['id']}: {p.discovered} listed, {p.synced} synced, "
                    f"{p.current} already current"
                )
                return 0
            blocked = await _blocked(pool, row)
            if blocked is not None:
                bar.write(blocked, file=sys.stderr)
                return 1
            await asyncio.sleep(POLL_SECONDS)
    finally:
        bar.close()
