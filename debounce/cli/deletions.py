"""``debounce deletions list|show|apply|dismiss``: deletions the guard held because they
looked like a mistake (:mod:`debounce.documents.deletions`; ``/admin/deletions`` does the
same over HTTP)."""

from __future__ import annotations

import argparse
from typing import Any

from debounce.cli.errors import fail
from debounce.config import Settings
from debounce.documents import deletions

__all__ = ["add_parser", "hold_line", "run"]


def add_parser(sub: Any) -> None:
    """Add ``deletions`` to the CLI's subparsers ``sub``."""
    text = (
        "deletions held because they looked like a mistake (too many of a workspace at "
        "once): list them, show what one holds, apply or dismiss it"
    )
    sp = sub.add_parser("deletions", help=text, description=text)
    sp.add_argument(
        "action",
        choices=["list", "show", "apply", "dismiss"],
        help="list: the open holds (--all: every one); show ID: what it holds; "
        "apply ID: delete its documents; dismiss ID: keep them",
    )
    sp.add_argument("hold", nargs="?", type=int, metavar="ID", help="the hold (show, apply, dismiss)")
    sp.add_argument("--all", action="store_true", help="list: resolved holds too")
    sp.add_argument("--limit", type=int, default=20, help="list, show: how many (default 20)")


def hold_line(hold: deletions.Hold) -> str:
    """One hold as a line: id, status, workspace, documents held, when, and the reason."""
    where = f"workspace={hold.workspace_id if hold.workspace_id is not None else '-'}"
    count = f"held={hold.held}" if hold.status == "held" else f"{hold.status}={hold.resolved or 0}"
    return (
        f"{hold.id:>5} {hold.status:9} {hold.source_type:7} {where}  {count}  "
        f"since {hold.created_at.isoformat()}  {hold.reason}"
    )


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce deletions``; returns the exit code (2: a usage error; 1: no such hold,
    or it is not open any more)."""
    if not 1 <= args.limit <= 1000:
        return fail("error: --limit must be between 1 and 1000", 2)
    if args.action == "list":
        holds = await deletions.list_holds(pool, status=None if args.all else "held", limit=args.limit)
        for hold in holds:
            print(hold_line(hold))
        if not holds:
            print("no held deletions" if not args.all else "no holds")
        return 0
    if args.hold is None:
        return fail(
            f"error: deletions {args.action} needs the hold's id (debounce deletions list shows them)", 2
        )
    if args.action == "show":
        found = await deletions.get(pool, args.hold)
        if found is None:
            return fail(f"error: no hold {args.hold} (debounce deletions list shows them)")
        print(hold_line(found))
        for doc in await deletions.held_documents(pool, found.id, limit=args.limit):
            print(f"      {doc['source_type']} {doc['document_id']}  {doc['title']}")
        return 0
    try:
        hold = await deletions.resolve(pool, args.hold, args.action)
    except deletions.HoldNotOpen as exc:
        return fail(f"error: {exc}")
    verb = "deleted" if hold.status == "applied" else "kept"
    print(f"hold {hold.id} {hold.status}: {hold.resolved or 0} document(s) {verb}")
    return 0
