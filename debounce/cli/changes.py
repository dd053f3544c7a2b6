"""``debounce documents changes``: the change feed read straight from the database, one line
per change; ``--follow`` waits for more (the feed's frontier, polled while it waits) until
interrupted. With ``DATABASE_REPLICA_URL`` set it reads the replica."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from debounce import workspaces
from debounce.cli.errors import CliError
from debounce.config import Settings
from debounce.documents import feed
from debounce.documents.feed_listen import ChangeSignal, read_waiting

__all__ = ["FOLLOW_WAIT_SECONDS", "change_line", "run"]

#: Seconds one wait of ``--follow`` lasts before it reads again (a backstop: the frontier's
#: moves wake it sooner).
FOLLOW_WAIT_SECONDS = 30.0


def change_line(change: feed.Change) -> str:
    """One change as a line: op (the kind of change), source, document id, kind of document,
    workspace, time (UTC), content hash and the cursor to resume after it."""
    workspace = change.workspace_id if change.workspace_id is not None else "-"
    return (
        f"{change.op:6} {change.source:7} {change.document_id}  kind={change.kind}  workspace={workspace}  "
        f"{change.updated_at.isoformat()}  sha256={change.content_sha256[:16]}  "
        f"cursor={change.cursor.encode()}"
    )


def _resume(cursor: feed.Cursor) -> str:
    return f"next: debounce documents changes --after {cursor.encode()}"


async def _check_workspace(pool: Any, workspace_id: int, source_type: str | None) -> None:
    """Refuse a ``--workspace`` filter that can match nothing: a workspace that never was (no
    row, and no change of it left from before it was removed), or one of another source than
    ``--source``.

    Raises:
        CliError: the line saying so (exit 1).
    """
    rows = await workspaces.list_workspaces(pool, workspace_id)
    if not rows:
        if not await feed.has_changes_of_workspace(pool, workspace_id):
            raise CliError(f"error: no workspace {workspace_id} (`debounce workspaces list` shows the ids)")
        return
    kind = rows[0]["source_type"]
    if source_type is not None and kind != source_type:
        raise CliError(
            f"error: workspace {workspace_id} is a {kind} workspace, not {source_type}: "
            "no change matches both filters"
        )


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Print the changes after ``--after`` (default: the oldest retained), at most
    ``--limit`` per read, filtered by ``--source``/``--workspace``/``--kind`` (a kind of
    document); then the line to resume
    from. With ``--follow``, keep reading until Ctrl-C.

    Raises:
        CliError: a malformed cursor, a bad limit, a workspace that is not there (or not of
            ``--source``), or a cursor the feed cannot follow (another database, pruned: the
            message says what to do).
    """
    try:
        after = feed.Cursor.decode(args.after) if args.after else None
    except feed.CursorError as exc:
        raise CliError(f"error: {exc} (pass a cursor this command printed)", 2) from None
    if not 1 <= args.limit <= feed.MAX_LIMIT:
        raise CliError(f"error: --limit must be between 1 and {feed.MAX_LIMIT}", 2)
    if args.workspace is not None:
        await _check_workspace(pool, args.workspace, args.source)
    filters = {"source_type": args.source, "workspace_id": args.workspace, "document_kind": args.kind}
    try:
        if not args.follow:
            page = await feed.read_changes(pool, after, args.limit, **filters)
            for change in page.changes:
                print(change_line(change))
            print(_resume(page.next))
            return 0
        signal = ChangeSignal(pool)
        position = after
        try:
            with contextlib.suppress(asyncio.CancelledError):
                while True:
                    page = await read_waiting(
                        pool, signal, position, args.limit, FOLLOW_WAIT_SECONDS, **filters
                    )
                    for change in page.changes:
                        print(change_line(change), flush=True)
                    position = page.next
        finally:
            await signal.close()
            if position is not None:
                print(_resume(position), file=sys.stderr)
        return 130
    except feed.CursorGone as gone:
        raise CliError(f"error: {gone.explain()}; the head is {gone.head.encode()}") from None
