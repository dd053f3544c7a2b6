"""The admin commands: each a coroutine ``(args, settings, pool) -> exit code``, in one table
(:data:`COMMANDS`) the parser and ``main`` share."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any

from debounce import queue, registry
from debounce.cli import backfill, changes, deletions, subscriptions, workspace_cmds
from debounce.cli.errors import fail
from debounce.config import Settings
from debounce.documents import audiences, feed, reads
from debounce.workspaces import verification

__all__ = ["COMMANDS", "handshake_commands"]

Command = Callable[[argparse.Namespace, Settings, Any], Awaitable[int]]


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


async def resync(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Manual re-sync of one page (due now); ``--workspace`` (id or the source's id): the
    workspace whose token reads a page debounce has not synced yet."""
    source = registry.sources().get(args.source)
    if source is None:
        return fail(f"unknown source {args.source!r} (known: {', '.join(registry.source_types())})", 2)
    try:
        page_id = source.page_id(args.page_id)
    except ValueError as exc:
        return fail(str(exc), 2)
    workspace_id = None
    if args.workspace is not None:
        try:
            workspace_id = int(
                (await workspace_cmds.resolve_workspace(pool, settings, args.workspace, args.source))["id"]
            )
        except workspace_cmds.Refused as exc:
            return fail(str(exc), 1)
    try:
        _print(
            (
                await queue.resync(
                    pool, args.source, page_id, max_attempts=settings.max_attempts, workspace_id=workspace_id
                )
            ).to_json()
        )
    except queue.JobConflict as exc:
        return fail(f"cannot re-sync: {exc}")
    return 0


async def jobs(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Jobs newest first: a table (payloads left out), or JSON with ``--json``."""
    try:
        page = await queue.list_jobs(
            pool, status=args.status, source_type=args.source, limit=args.limit, cursor=args.cursor
        )
    except ValueError as exc:
        return fail(f"error: {exc}", 2)
    if args.json:
        _print({"jobs": [j.to_json() for j in page.jobs], "next_cursor": page.next_cursor})
        return 0
    print(
        f"{'id':>6}  {'source':8} {'page':38} {'status':10} {'events':>6} {'tries':>5}  "
        f"{'due (UTC)':19}  last error"
    )
    for j in page.jobs:
        error = (j.last_error or "").splitlines()[0][:60] if j.last_error else ""
        print(
            f"{j.id:>6}  {j.source_type:8} {j.source_page_id[:38]:38} {j.status.value:10} "
            f"{j.event_count:>6} {j.attempts:>5}  {j.scheduled_at:%Y-%m-%d %H:%M:%S}  {error}"
        )
    if page.next_cursor:
        print(f"more: debounce jobs --cursor {page.next_cursor}")
    return 0


async def stats(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Queue statistics as JSON."""
    _print(await queue.stats(pool))
    return 0


async def retry(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Retry a failed job now."""
    try:
        _print((await queue.retry(pool, args.job_id)).to_json())
    except (queue.JobNotFound, queue.JobConflict) as exc:
        reason = f"no job {exc}" if isinstance(exc, queue.JobNotFound) else str(exc)
        return fail(f"cannot retry: {reason}")
    return 0


async def prune(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Delete finished jobs, remembered event ids and feed changes past retention."""
    # exclusive: a worker's prune running meanwhile makes the same partitions of finished_jobs
    done = await queue.prune(
        pool,
        args.older_than or settings.job_retention_seconds,
        event_older_than=settings.event_retention_seconds,
        exclusive=True,
    )
    if done is None:
        return fail("cannot prune now: a worker is pruning (try again in a minute)")
    # exclusive: a worker's prune running meanwhile makes the same partitions (None: it does)
    pruned = await feed.prune_changes(pool, settings.change_retention_seconds, exclusive=True)
    done["changes"] = pruned.changes if pruned is not None else 0
    _print(done)
    return 0


async def handshake_token(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Print the newest handshake token a source sent (its ``handshake_command``)."""
    latest = await verification.latest(pool, args.handshake_source)
    if latest is None:
        return fail(f"no verification request received from {args.handshake_source} yet")
    print(latest[0])
    return 0


async def documents(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """List documents (with the numeric id the dashboard shows), or print one as Markdown:
    ``--id`` takes the page id (any spelling of its source) or the numeric id. ``documents
    changes`` prints the change feed (:mod:`.changes`)."""
    if args.action == "changes":
        return await changes.run(args, settings, pool)
    if args.follow or args.after or args.workspace is not None:
        return fail("--follow, --after and --workspace go with `debounce documents changes`", 2)
    if args.id:
        found = await _find_documents(pool, args.id)
        if len(found) > 1:
            listed = ", ".join(f"{r['id']} ({r['source_type']} {r['document_id']})" for r in found)
            return fail(
                f"{args.id!r} names more than one document: {listed}; name the one you mean by its other id"
            )
        if not found:
            return fail(f"no document {args.id!r} (`debounce documents` lists the ids)")
        (row,) = found
        print(
            f"# {row['title']}\n<!-- {row['source_type']} {row['document_id']} "
            f"{row['url'] or ''} synced {row['synced_at']} -->\n"
            f"<!-- audience: {audiences.describe(row)} -->\n"
        )
        print(row["content"])
        return 0
    rows = await reads.latest_documents(
        pool, source_type=args.source, limit=args.limit, document_kind=args.kind
    )
    if rows:
        print(f"{'id':>6}  {'source':7} {'document id':45} {'kind':12} {'size':>12}  {'audience':12} title")
    for r in rows:
        flag = " (deleted)" if r["deleted_at"] else ""
        print(
            f"{r['id']:>6}  {r['source_type']:7} {r['document_id']:45} {r['kind']:12} {r['chars']:6} chars  "
            f"{audiences.short(r):12} {r['title'][:50]}{flag}"
        )
    if rows:
        print(
            "newest first, as the dashboard's Documents page lists them; `debounce documents "
            "--id ID` prints one: ID is the id or the document id"
        )
    return 0


async def _find_documents(pool: Any, ref: str) -> list[Any]:
    """The documents ``ref`` names: by page id (as given or as any source spells it; the
    newest of each spelling) and, if it is a number, by numeric id — at most one row each."""
    found: dict[int, Any] = {}
    ref = ref.strip()
    candidates = {ref} | {s.normalize_page_id(ref) for s in registry.sources().values()}
    for document_id in sorted(candidates):
        row = await reads.newest_by_document_id(pool, document_id)
        if row is not None:
            found.setdefault(int(row["id"]), row)
    if ref.isdigit():
        row = await reads.document_by_row_id(pool, int(ref))
        if row is not None:
            found.setdefault(int(row["id"]), row)
    return [found[k] for k in sorted(found)]


def handshake_commands() -> dict[str, str]:
    """``{command name: source type}`` of the sources that have a handshake token."""
    return {s.handshake_command: s.source_type for s in registry.sources().values() if s.handshake_command}


COMMANDS: dict[str, Command] = {
    "resync": resync,
    "jobs": jobs,
    "stats": stats,
    "retry": retry,
    "prune": prune,
    "documents": documents,
    "workspaces": workspace_cmds.run,
    "backfill": backfill.run,
    "subscriptions": subscriptions.run,
    "deletions": deletions.run,
    **dict.fromkeys(handshake_commands(), handshake_token),
}
