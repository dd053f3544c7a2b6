"""``debounce workspaces …``: list, add, pause, resume, remove workspaces; make and rotate the
secret key. Tokens are never printed: a fingerprint stands for each."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import integrations
from debounce import budgets, enumerations, workspaces
from debounce.config import Settings
from debounce.secrets import Keyring

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add ``workspaces`` and its subcommands to the CLI's subparsers ``sub``."""
    text = ("connected workspaces (one per workspace or team of a source): list, add, pause, "
            "resume, remove, set-budget, set-reconcile")
    p = sub.add_parser("workspaces", help=text, description=text)
    ws = p.add_subparsers(dest="workspace_command", required=True, metavar="ACTION")
    sp = ws.add_parser("list", help="every workspace with its status and figures",
                       description="every workspace with its status and figures")
    sp.add_argument("--json", action="store_true", help="JSON")
    sp = ws.add_parser("add", help="connect a workspace by its token (its id is asked of the "
                                   "source)", description="connect a workspace by its token")
    sp.add_argument("source", choices=integrations.source_types())
    sp.add_argument("--token", required=True, help="the workspace's access token")
    sp.add_argument("--name", help="display name (default: the source's)")
    for action in ("pause", "resume", "remove"):
        what = {"pause": "stop syncing a workspace (its events still queue)",
                "resume": "sync a paused or revoked workspace again",
                "remove": "disconnect a workspace (its pending jobs go, its documents stay)"}[action]
        sp = ws.add_parser(action, help=what, description=what)
        sp.add_argument("id", type=int, help="the workspace's id (debounce workspaces list)")
    what = ("set a workspace's API budget: requests per minute and burst (the bucket's "
            "capacity), shared by every worker; --default: back to the source's")
    sp = ws.add_parser("set-budget", help="set a workspace's API budget (requests per minute, "
                                          "burst)", description=what)
    sp.add_argument("id", type=int, help="the workspace's id (debounce workspaces list)")
    sp.add_argument("--per-minute", type=float, metavar="N",
                    help="requests per minute (0: unmetered)")
    sp.add_argument("--burst", type=float, metavar="N",
                    help="requests that may be sent at once (>= 1)")
    sp.add_argument("--default", action="store_true",
                    help="use the source's default budget (<SOURCE>_BUDGET_PER_MINUTE, "
                         "<SOURCE>_BUDGET_BURST)")
    what = ("sweep a workspace for lost webhooks periodically (reconciliation): on, off, or "
            "the source's default (Notion on, Slack off)")
    sp = ws.add_parser("set-reconcile", help="turn a workspace's reconciliation on or off",
                       description=what)
    sp.add_argument("id", type=int, help="the workspace's id (debounce workspaces list)")
    sp.add_argument("mode", choices=["on", "off", "default"])
    ws.add_parser("new-key", help="print a new DEBOUNCE_SECRET_KEY",
                  description="print a new Fernet key for DEBOUNCE_SECRET_KEY")
    ws.add_parser("rotate-key", help="re-encrypt every stored credential with the first key of "
                                     "DEBOUNCE_SECRET_KEY",
                  description="re-encrypt every stored credential with the first key of "
                              "DEBOUNCE_SECRET_KEY (put the new key first, run this, then drop "
                              "the old one)")


def _fail(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


def _table(rows: list[dict[str, Any]]) -> None:
    print(f"{'id':>4}  {'source':7} {'workspace':38} {'status':8} {'origin':6} {'pending':>7} "
          f"{'failed':>6} {'docs':>6}  {'budget':14}  {'token':19}  name")
    for r in rows:
        print(f"{r['id']:>4}  {r['source_type']:7} {(r['external_id'] or '(not learned yet)')[:38]:38} "
              f"{r['status']:8} {r['origin']:6} {r['pending_jobs']:>7} {r['failed_jobs']:>6} "
              f"{r['documents']:>6}  {_budget(r['budget']):14}  {r['token_fingerprint'] or '':19}  "
              f"{r['name']}")
        if r["last_auth_error"]:
            print(f"      last auth error: {r['last_auth_error']}")


def _budget(budget: dict[str, Any]) -> str:
    """``150/min +20`` (``*`` when set for this workspace), ``unmetered``."""
    if not budget["per_minute"]:
        return "unmetered"
    mark = "" if budget["source_default"] else "*"
    return f"{budget['per_minute']:g}/min +{budget['burst']:g}{mark}"


async def _set_budget(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    if args.default == (args.per_minute is not None or args.burst is not None):
        return _fail("give --per-minute and/or --burst, or --default", 2)
    rows = await workspaces.list_workspaces(pool, args.id, budgets=settings.source_budgets())
    if not rows:
        return _fail(f"no workspace {args.id}")
    current = rows[0]["budget"]
    per_minute, burst = (None, None) if args.default else (
        args.per_minute if args.per_minute is not None else current["per_minute"],
        args.burst if args.burst is not None else current["burst"])
    try:
        await budgets.set_budget(pool, args.id, per_minute, burst)
    except ValueError as exc:
        return _fail(str(exc), 2)
    (row,) = await workspaces.list_workspaces(pool, args.id, budgets=settings.source_budgets())
    print(f"workspace {args.id} ({row['source_type']} {row['external_id'] or '?'}): budget "
          f"{_budget(row['budget'])}" + (" (the source's default)" if args.default else ""))
    return 0


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce workspaces ACTION``; returns the exit code."""
    action = args.workspace_command
    if action == "list":
        rows = await workspaces.list_workspaces(pool, budgets=settings.source_budgets())
        if args.json:
            print(json.dumps(rows, indent=2, default=str))
        else:
            _table(rows)
        return 0
    if action == "set-budget":
        return await _set_budget(args, settings, pool)
    if action == "set-reconcile":
        on = {"on": True, "off": False, "default": None}[args.mode]
        row = await enumerations.set_reconcile(pool, args.id, on)
        if row is None:
            return _fail(f"no workspace {args.id}")
        print(f"workspace {args.id}: reconciliation {args.mode}")
        return 0
    if action == "add":
        source = integrations.get(args.source)
        if source.identify is None:
            return _fail(f"source {args.source} cannot identify a token", 2)
        keyring = Keyring(settings.secret_key)  # SecretKeyError when unset: one line
        identity = await source.identify(settings, args.token)
        if not identity.external_id:
            return _fail(f"{args.source} did not say which workspace this token belongs to", 1)
        row = await workspaces.save(
            pool, keyring, source_type=args.source, external_id=identity.external_id,
            name=args.name or identity.name, credentials={"access_token": args.token},
            origin="cli", enterprise_id=identity.enterprise_id, bot_user_id=identity.bot_user_id)
        verb = "connected" if row.get("inserted") else "re-connected"
        print(f"{verb} workspace {row['id']}: {args.source} {row['external_id']} "
              f"({row['name']}), token {row['token_fingerprint']}")
        return 0
    try:
        if action == "remove":
            dropped = await workspaces.remove(pool, args.id)
            print(f"removed workspace {args.id} ({dropped} pending jobs dropped; documents kept)")
            return 0
        status = {"pause": "paused", "resume": "active"}[action]
        row = await workspaces.set_status(pool, args.id, status)
    except workspaces.WorkspaceNotFound:
        return _fail(f"no workspace {args.id}")
    print(f"workspace {row['id']} ({row['source_type']} {row['external_id'] or '?'}) is {row['status']}")
    return 0
