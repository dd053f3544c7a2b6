"""The ``debounce`` command (also ``python -m debounce``).

Configuration comes from the environment (see the README); ``debounce --help`` and
``debounce COMMAND --help`` explain each command. Modules: :mod:`.parser` (the commands and
their help), :mod:`.processes` (worker, web, serve), :mod:`.demo` (``serve --demo``),
:mod:`.send` (signing and ``debounce send``), :mod:`.admin` (the admin commands' table).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from debounce.cli import workspace_cmds
from debounce.cli.admin import COMMANDS
from debounce.cli.demo import EXAMPLES
from debounce.cli.errors import report
from debounce.cli.parser import build_parser
from debounce.cli.processes import database, require_migrated, run_worker, serve, standins
from debounce.cli.send import send, sign_request
from debounce.config import Settings
from debounce.infra import eventloop
from debounce.infra.db import open_pool
from debounce.infra.logs import configure
from debounce.migrate import migrate

__all__ = ["EXAMPLES", "build_parser", "main", "run_worker", "sign_request"]

#: The commands whose log is their output (the service's processes, the stand-ins); the others
#: log warnings and errors only unless DEBOUNCE_LOG_LEVEL asks for more than INFO.
_LOGGING_COMMANDS = ("migrate", "worker", "web", "serve", "standins")


async def _migrate(settings: Settings) -> int:
    async with database(settings, "migrate") as s:
        assert s.database_url
        applied = await migrate(s.database_url)
        print("applied: " + ", ".join(applied) if applied else "schema up to date")
    return 0


async def _worker(settings: Settings) -> int:
    async with database(settings, "worker") as s:
        return await run_worker(s)


#: The hand-run commands that only read: with ``DATABASE_REPLICA_URL`` set they read there.
READ_ONLY_COMMANDS = ("documents", "jobs", "stats")


async def _admin(args: argparse.Namespace, settings: Settings) -> int:
    """A command a person runs by hand: it reads or enqueues, and never migrates (an
    unmigrated database is one line saying how to migrate). The commands that only read
    (:data:`READ_ONLY_COMMANDS`) use ``DATABASE_REPLICA_URL`` when it is set."""
    async with database(settings, args.command) as s:
        assert s.database_url
        await require_migrated(s, embedded=not settings.database_url)
        url = s.database_url
        if args.command in READ_ONLY_COMMANDS and s.database_replica_url:
            url = s.database_replica_url
        pool = open_pool(url, max_size=2)
        await pool.open(wait=True, timeout=30)
        try:
            return await COMMANDS[args.command](args, s, pool)
        finally:
            await pool.close()


def _command(args: argparse.Namespace, settings: Settings) -> Coroutine[Any, Any, int]:
    if args.command == "migrate":
        return _migrate(settings)
    if args.command == "worker":
        return _worker(settings)
    if args.command in ("serve", "web"):
        return serve(
            settings,
            args.host,
            args.port,
            demo=getattr(args, "demo", False),
            with_worker=args.command == "serve",
        )
    if args.command == "workspaces" and args.workspace_command == "new-key":
        return workspace_cmds.new_key_command(args)
    if args.command == "send":
        return send(args.source, args.files, args.url, args.secret, settings, demo=args.demo)
    if args.command == "standins":
        return standins(args.host)
    return _admin(args, settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``debounce``; returns the process exit code. Every error is one line on
    stderr and a non-zero exit, never a traceback (:mod:`.errors`): 2 for a usage or
    configuration error, 1 for the rest (database unreachable or not migrated, a source
    refusing a token, a port in use)."""
    args = build_parser().parse_args(argv)  # a usage error: one line, exit 2 (.parser)
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    level = settings.log_level
    if args.command not in _LOGGING_COMMANDS and level == "INFO":
        level = "WARNING"  # a hand-run command prints its answer; libraries' INFO is noise
    configure(settings.log_format, level)
    if getattr(args, "port", 0) is None:
        args.port = settings.port
    try:
        code = eventloop.run(_command(args, settings))
        sys.stdout.flush()  # a closed pipe (`| head`) shows here, inside the boundary
        return code
    except BrokenPipeError:
        # The reader went away (`debounce documents --id 7 | head`): a normal end, not an
        # error; stdout points at devnull so the interpreter's own flush at exit stays quiet
        # (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        if isinstance(exc.code, str):  # a one-line reason
            print(exc.code, file=sys.stderr)
            return 2
        raise
    except Exception as exc:  # the boundary: one line (.errors), never a traceback
        return report(
            exc, "DATABASE_URL" if settings.database_url else f"the embedded database in {settings.data_dir}/"
        )
