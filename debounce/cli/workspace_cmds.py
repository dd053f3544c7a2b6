"""``debounce workspaces …``: list, add, pause, resume, remove workspaces; make (and keep) and
rotate the secret key. A workspace is named by its id or the source's id of it
(:func:`resolve_workspace`). Tokens are never printed: a fingerprint stands for each."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from debounce import queue, registry, workspaces
from debounce.cli.errors import fail
from debounce.config import Settings
from debounce.documents.store import purge_removed
from debounce.infra.secrets import Keyring, SecretKeyError, fingerprint, new_key
from debounce.queue import backfills
from debounce.workspaces import budgets

__all__ = ["Refused", "add_parser", "new_key_command", "resolve_workspace", "run"]

#: What a workspace argument takes (the help of every command that takes one).
ID_HELP = (
    "the workspace: its id or the source's id of it (the id or workspace column of "
    "`debounce workspaces list`, e.g. 3 or T07LABS42)"
)


def add_parser(sub: Any) -> None:
    """Add ``workspaces`` and its subcommands to the CLI's subparsers ``sub``."""
    text = (
        "connected workspaces (one per workspace or team of a source): list, add, pause, "
        "resume, remove, set-budget, set-reconcile, new-key, rotate-key"
    )
    p = sub.add_parser("workspaces", help=text, description=text)
    ws = p.add_subparsers(dest="workspace_command", required=True, metavar="ACTION")
    sp = ws.add_parser(
        "list",
        help="every workspace with its status and figures",
        description="every workspace with its status and figures",
    )
    sp.add_argument("--json", action="store_true", help="JSON")
    sp = ws.add_parser(
        "add",
        help="connect a workspace by its token (its id is asked of the source)",
        description="connect a workspace by its token",
    )
    sp.add_argument("source", choices=registry.source_types())
    sp.add_argument("--token", required=True, help="the workspace's access token")
    sp.add_argument("--name", help="display name (default: the source's)")
    for action in ("pause", "resume", "remove"):
        what = {
            "pause": "stop syncing a workspace (its events still queue)",
            "resume": "sync a paused or revoked workspace again",
            "remove": "disconnect a workspace (its pending jobs are cancelled, its documents "
            "stay unless --purge-documents; connecting it again brings it back)",
        }[action]
        sp = ws.add_parser(action, help=what, description=what)
        sp.add_argument("id", help=ID_HELP)
        if action == "remove":
            sp.add_argument(
                "--purge-documents",
                action="store_true",
                help="mark its documents deleted too: every consumer sees the deletions in the change feed",
            )
    what = (
        "set a workspace's API budget: requests per minute and burst (the bucket's "
        "capacity), shared by every worker; --default: back to the source's"
    )
    sp = ws.add_parser(
        "set-budget", help="set a workspace's API budget (requests per minute, burst)", description=what
    )
    sp.add_argument("id", help=ID_HELP)
    sp.add_argument("--per-minute", type=float, metavar="N", help="requests per minute (0: unmetered)")
    sp.add_argument("--burst", type=float, metavar="N", help="requests that may be sent at once (>= 1)")
    sp.add_argument(
        "--default",
        action="store_true",
        help="use the source's default budget (<SOURCE>_BUDGET_PER_MINUTE, <SOURCE>_BUDGET_BURST)",
    )
    what = (
        "reconcile a workspace periodically (a backfill on a schedule, for lost webhooks): on, off, or "
        "the source's default (Notion on, Slack off)"
    )
    sp = ws.add_parser("set-reconcile", help="turn a workspace's reconciliation on or off", description=what)
    sp.add_argument("id", help=ID_HELP)
    sp.add_argument("mode", choices=["on", "off", "default"])
    sp = ws.add_parser(
        "new-key",
        help="make a new DEBOUNCE_SECRET_KEY (print it, or keep it in a file: --append-to)",
        description="make a new Fernet key for DEBOUNCE_SECRET_KEY: print it, or "
        "append DEBOUNCE_SECRET_KEY=<key> to a file (mode 0600)",
    )
    sp.add_argument(
        "--append-to",
        metavar="FILE",
        help="append DEBOUNCE_SECRET_KEY=<key> to FILE (created if missing, mode "
        "0600; refused if FILE already has a DEBOUNCE_SECRET_KEY line)",
    )
    sp.add_argument(
        "--rotate",
        action="store_true",
        help="with --append-to: put the new key first on FILE's DEBOUNCE_SECRET_KEY "
        "line and keep the old key(s) after it (then `rotate-key`)",
    )
    ws.add_parser(
        "rotate-key",
        help="re-encrypt every stored credential with the first key of DEBOUNCE_SECRET_KEY",
        description="re-encrypt every stored credential with the first key of "
        "DEBOUNCE_SECRET_KEY (put the new key first, run this, then drop "
        "the old one)",
    )


class Refused(Exception):
    """A one-line reason a command refuses (printed on stderr, exit code ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'id':>4}  {'source':7} {'workspace':38} {'status':8} {'origin':6} {'pending':>7} "
        f"{'failed':>6} {'docs':>6}  {'budget':14}  {'token':19}  name"
    )
    for r in rows:
        print(
            f"{r['id']:>4}  {r['source_type']:7} {(r['external_id'] or '(not learned yet)')[:38]:38} "
            f"{r['status']:8} {r['origin']:6} {r['pending_jobs']:>7} {r['failed_jobs']:>6} "
            f"{r['documents']:>6}  {_budget(r['budget']):14}  {r['token_fingerprint'] or '':19}  "
            f"{r['name']}"
        )
        if r["last_auth_error"]:
            print(f"      last auth error: {r['last_auth_error']}")
        if r.get("credentials_error"):
            print(f"      credentials error: {r['credentials_error']}")
        if r.get("missing_scopes"):
            print(
                f"      missing scopes: {', '.join(r['missing_scopes'])} (add them to the app and "
                "reinstall it; what needs them fails until then)"
            )
    if rows:
        print("pause, resume, remove, set-budget and set-reconcile take the id or the workspace column")
    if any(not r["budget"]["source_default"] for r in rows):
        print("budget *: set for this workspace (`set-budget ID --default`: the source's again)")


def _budget(budget: dict[str, Any]) -> str:
    """``150/min +20`` (``*`` when set for this workspace), ``unmetered``."""
    if not budget["per_minute"]:
        return "unmetered"
    mark = "" if budget["source_default"] else "*"
    return f"{budget['per_minute']:g}/min +{budget['burst']:g}{mark}"


def _same_id(a: str, b: str) -> bool:
    """Two spellings of one source id: a Notion uuid with or without dashes, any case."""
    return a.replace("-", "").lower() == b.replace("-", "").lower()


async def resolve_workspace(
    pool: Any, settings: Settings, ref: str, source_type: str | None = None
) -> dict[str, Any]:
    """The workspace row (as :func:`debounce.workspaces.list_workspaces` gives it) that ``ref``
    names: a number is the workspace's id; anything else the source's id of it (``T07LABS42``,
    a Notion workspace uuid with or without dashes). ``source_type``: only that source's.

    Raises:
        Refused: no workspace, or several (the line lists them: give the numeric id).
    """
    rows = [
        r
        for r in await workspaces.list_workspaces(pool, budgets=settings.source_budgets())
        if source_type is None or r["source_type"] == source_type
    ]
    ref = ref.strip()
    if ref.isdigit():
        found = [r for r in rows if r["id"] == int(ref)]
    else:
        found = [r for r in rows if r["external_id"] and _same_id(r["external_id"], ref)]
    if not found:
        what = f"{source_type} workspace {ref}" if source_type else f"workspace {ref!r}"
        raise Refused(f"no {what} (`debounce workspaces list` shows the id and the workspace column)")
    if len(found) > 1:
        listed = ", ".join(f"{r['id']} ({r['source_type']} {r['name']})" for r in found)
        raise Refused(f"{ref!r} is more than one workspace: {listed}; give the numeric id")
    return found[0]


def _label(row: dict[str, Any]) -> str:
    return f"{row['source_type']} {row['external_id'] or '?'}"


async def _set_budget(args: argparse.Namespace, settings: Settings, pool: Any, row: dict[str, Any]) -> int:
    if args.default == (args.per_minute is not None or args.burst is not None):
        return fail("give --per-minute and/or --burst, or --default", 2)
    current = row["budget"]
    per_minute, burst = (
        (None, None)
        if args.default
        else (
            args.per_minute if args.per_minute is not None else current["per_minute"],
            args.burst if args.burst is not None else current["burst"],
        )
    )
    try:
        await budgets.set_budget(pool, row["id"], per_minute, burst)
    except ValueError as exc:
        return fail(str(exc), 2)
    (row,) = await workspaces.list_workspaces(pool, row["id"], budgets=settings.source_budgets())
    text = _budget(row["budget"]).rstrip("*")
    print(
        f"workspace {row['id']} ({_label(row)}): budget {text} "
        + ("(the source's default)" if row["budget"]["source_default"] else "(set for this workspace)")
    )
    return 0


def _token_env(source: Any) -> str:
    """The variable of ``source``'s environment token (``NOTION_TOKEN``)."""
    return next(
        (s.env for s in source.settings if s.name == source.token_setting), f"the {source.source_type} token"
    )


async def _refuse_env_token(args: argparse.Namespace, settings: Settings, pool: Any, source: Any) -> None:
    """Refuse ``add`` with the environment's own token: it already defines a workspace.

    Raises:
        Refused: the token is the environment's (``<SOURCE>_TOKEN``, or the one a web or
            worker process registered, by fingerprint).
    """
    env = _token_env(source)
    row: dict[str, Any] | None
    if workspaces.env_tokens(settings).get(args.source) == args.token:
        row = await workspaces.ensure_env_workspace(pool, args.source, args.token)
    else:
        listed = await workspaces.list_workspaces(pool, budgets=settings.source_budgets())
        row = next(
            (
                r
                for r in listed
                if r["source_type"] == args.source
                and r["origin"] == "env"
                and r["token_fingerprint"] == fingerprint(args.token)
            ),
            None,
        )
        if row is None:
            return
    raise Refused(
        f"this token is {env}: it already defines the environment's {args.source} "
        f"workspace {row['id']} (`debounce workspaces list`); nothing stored"
    )


async def _add(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    source = registry.get(args.source)
    if source.identify is None:
        return fail(f"source {args.source} cannot identify a token", 2)
    keyring = Keyring(settings.secret_key)  # SecretKeyError when unset: one line
    await _refuse_env_token(args, settings, pool, source)
    identity = await source.identify(source.configure(settings), args.token)
    if not identity.external_id:
        return fail(f"{args.source} did not say which workspace this token belongs to", 1)
    row = await workspaces.save(
        pool,
        keyring,
        source_type=args.source,
        external_id=identity.external_id,
        name=args.name or identity.name,
        credentials={"access_token": args.token},
        origin="cli",
        enterprise_id=identity.enterprise_id,
        bot_user_id=identity.bot_user_id,
    )
    verb = "connected" if row.get("inserted") else "re-connected"
    print(
        f"{verb} workspace {row['id']}: {args.source} {row['external_id']} "
        f"({row['name']}), token {row['token_fingerprint']}"
    )
    return 0


async def _rotate_key(settings: Settings, pool: Any) -> int:
    """``rotate-key``: every stored credential re-encrypted with the first key, in one
    transaction (a credential no key decrypts changes nothing: SecretKeyError, one line)."""
    keyring = Keyring(settings.secret_key)  # SecretKeyError when unset: one line
    try:
        async with pool.connection() as conn, conn.transaction():
            count = await workspaces.rotate_key(conn, keyring)
    except SecretKeyError:
        return fail(
            "configuration error: a stored credential does not decrypt with any key of "
            "DEBOUNCE_SECRET_KEY (put the key that encrypted it after the new one): "
            "nothing re-encrypted",
            2,
        )
    keys = len([k for k in (settings.secret_key or "").split(",") if k.strip()])
    print(
        f"re-encrypted {count} stored credential{'s' if count != 1 else ''} with the first "
        f"key of DEBOUNCE_SECRET_KEY ({keys} key{'s' if keys != 1 else ''} given)"
        + ("; drop the others once web and worker run with it" if keys > 1 else "")
    )
    return 0


_KEY_LINE = re.compile(r"^(\s*(?:export\s+)?DEBOUNCE_SECRET_KEY\s*=)\s*(.*?)\s*$")


def _keep_key(path: Path, key: str, *, rotate: bool) -> str:
    """Write ``key`` into ``path`` (mode 0600): append ``DEBOUNCE_SECRET_KEY=<key>``, or with
    ``rotate`` put it first on the existing line. Returns what was done, for the operator.

    Raises:
        Refused: ``path`` already has a DEBOUNCE_SECRET_KEY line (and not ``rotate``), or
            more than one.
        OSError: ``path`` cannot be read or written.
    """
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines(keepends=True)
    found = [i for i, line in enumerate(lines) if _KEY_LINE.match(line)]
    if len(found) > 1:
        raise Refused(
            f"{path} has {len(found)} DEBOUNCE_SECRET_KEY lines: keep one, then run "
            "this again; nothing written"
        )
    if found and not rotate:
        raise Refused(
            f"{path} already has a DEBOUNCE_SECRET_KEY line (its key decrypts the "
            "tokens stored with it): nothing written; --rotate puts a new key first "
            "and keeps the old one after it"
        )
    if found:
        match = _KEY_LINE.match(lines[found[0]])
        assert match is not None
        old = match.group(2).strip("'\"")
        lines[found[0]] = f"{match.group(1)}{key},{old}\n" if old else f"{match.group(1)}{key}\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
        with os.fdopen(fd, "w") as f:
            f.write("".join(lines))
        os.replace(tmp, path)
        return (
            f"new key put first on {path}'s DEBOUNCE_SECRET_KEY line, the old one kept after it (mode 0600)"
        )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(("\n" if text and not text.endswith("\n") else "") + f"DEBOUNCE_SECRET_KEY={key}\n")
    return f"DEBOUNCE_SECRET_KEY appended to {path} (mode 0600)"


async def new_key_command(args: argparse.Namespace) -> int:
    """``workspaces new-key [--append-to FILE [--rotate]]``: print a new key (and, on stderr,
    to keep it), or keep it in FILE and say where and what to restart. Needs no database."""
    key = new_key()
    if args.append_to is None:
        if args.rotate:
            return fail("--rotate needs --append-to FILE (the file with DEBOUNCE_SECRET_KEY)", 2)
        print(key)
        print(
            "keep this key: only it decrypts the tokens stored with it (`debounce workspaces "
            "new-key --append-to FILE` keeps it in a file)",
            file=sys.stderr,
        )
        return 0
    path = Path(args.append_to)
    try:
        done = _keep_key(path, key, rotate=args.rotate)
    except Refused as exc:
        return fail(str(exc), exc.code)
    except OSError as exc:
        return fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"{done}. Keep that file: only this key decrypts the tokens stored with it.")
    if args.rotate:
        print(
            f"Restart web and worker with {path}'s DEBOUNCE_SECRET_KEY, run `debounce "
            "workspaces rotate-key` with it, then drop the old key from the line and restart "
            "them again."
        )
    else:
        shell = shlex.quote(str(path) if "/" in str(path) else f"./{path}")
        runner = (
            "`honcho start` reads ./.env"
            if path.name == ".env"
            else f"`honcho start --env {shlex.quote(str(path))}`"
        )
        print(
            f"Restart web and worker with it ({runner}), and set it in this shell for "
            f"`debounce workspaces add`: set -a && . {shell} && set +a"
        )
    return 0


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce workspaces ACTION``; returns the exit code."""
    action = args.workspace_command
    try:
        if action == "list":
            rows = await workspaces.list_workspaces(pool, budgets=settings.source_budgets())
            if args.json:
                print(json.dumps(rows, indent=2, default=str))
            else:
                _table(rows)
            return 0
        if action == "add":
            return await _add(args, settings, pool)
        if action == "rotate-key":
            return await _rotate_key(settings, pool)
        row = await resolve_workspace(pool, settings, args.id)
        if action == "set-budget":
            return await _set_budget(args, settings, pool, row)
        if action == "set-reconcile":
            on = {"on": True, "off": False, "default": None}[args.mode]
            if await backfills.set_reconcile(pool, row["id"], on) is None:
                return fail(f"no workspace {args.id}")
            print(f"workspace {row['id']} ({_label(row)}): reconciliation {args.mode}")
            return 0
        if action == "remove":
            await workspaces.remove(pool, row["id"], purge_documents=args.purge_documents)
            done = await queue.cancel_removed(pool, workspace_id=row["id"])
            kept = "documents kept"
            if args.purge_documents:
                kept = f"{await purge_removed(pool, workspace_id=row['id'])} documents marked deleted"
            print(
                f"removed workspace {row['id']} ({_label(row)}; {done['jobs']} pending jobs and "
                f"{done['backfills']} backfills cancelled; {kept})"
            )
            return 0
        status = {"pause": "paused", "resume": "active"}[action]
        row = await workspaces.set_status(pool, row["id"], status)
    except Refused as exc:
        return fail(str(exc), exc.code)
    except workspaces.WorkspaceNotFound:
        return fail(f"no workspace {args.id}")
    print(f"workspace {row['id']} ({_label(row)}) is {row['status']}")
    return 0
