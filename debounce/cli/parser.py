"""The argument parser of the ``debounce`` command: every command with a description."""

from __future__ import annotations

import argparse
from typing import NoReturn

from debounce import registry
from debounce.cli import backfill, deletions, subscriptions, workspace_cmds
from debounce.cli.admin import handshake_commands
from debounce.documents.kinds import DOCUMENT_KINDS

__all__ = ["OneLineParser", "build_parser", "known_source"]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (what is wrong and where
    the help is) and exit code 2, not the usage block; its subcommands' parsers are too."""

    def error(self, message: str) -> NoReturn:
        """Print ``debounce COMMAND: MESSAGE (see `debounce COMMAND --help`)`` and exit 2."""
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def known_source(value: str) -> str:
    """``value`` if it names a source (an ``argparse`` type: a filter naming no source would
    match nothing and print nothing, so it is a usage error, as the read API's 400 is)."""
    names = registry.source_types()
    if value not in names:
        raise argparse.ArgumentTypeError(f"unknown source {value!r} (known: {', '.join(names)})")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``debounce`` command."""
    names = registry.source_types()
    listed = ", ".join(names)
    p = OneLineParser(
        prog="debounce",
        description=f"Webhook-ingesting debounce sync service: webhooks of {listed} in, one "
        "debounced sync job per page in Postgres, Markdown documents out. Configured by "
        "environment variables (DATABASE_URL, DEBOUNCE_* and each source's own; see docs/configuration.md).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text)

    command("migrate", "apply pending schema migrations (Procfile: release)")
    for name, text in (
        ("web", "run the HTTP service only (Procfile: web)"),
        (
            "serve",
            "web and worker in one process, migrating first; with no "
            "DATABASE_URL an embedded Postgres under .debounce/ (which "
            "the commands you run by hand then use too)",
        ),
    ):
        sp = command(name, text)
        sp.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
        sp.add_argument("--port", type=int, default=None, help="port (default $PORT or 8000)")
        if name == "serve":
            sp.add_argument(
                "--demo",
                action="store_true",
                help="start local stand-ins of the sources' APIs with demo "
                "content, use demo secrets and short windows, and send the "
                "example webhooks in examples/ to the service once it is up",
            )
    command("worker", "run the claim loop (Procfile: worker)")
    sp = command("resync", "sync one page now (manual re-sync, revives failed pages)")
    sp.add_argument("source", help=f"source type: {listed}")
    sp.add_argument("page_id", help="the page's id in its source (page, database, channel)")
    sp.add_argument(
        "--workspace",
        metavar="ID",
        help="the workspace whose token reads the page (its id or the source's id "
        "of it; default: the workspace of its document, else the environment's)",
    )
    sp = command("jobs", "list jobs, newest first (a table; --json for every field)")
    sp.add_argument("--status", choices=["pending", "processing", "completed", "failed"])
    sp.add_argument("--source", type=known_source, help=f"only this source ({listed})")
    sp.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    sp.add_argument("--cursor", type=int, help="next_cursor of the previous page")
    sp.add_argument("--json", action="store_true", help="JSON with every field, payloads included")
    command("stats", "job counts by source and state, queue lag (JSON)")
    sp = command("retry", "retry a failed job now (attempts reset)")
    sp.add_argument("job_id", type=int, help="the job's id (debounce jobs --status failed)")
    sp = command("prune", "delete finished jobs, remembered event ids and feed changes past retention")
    sp.add_argument("--older-than", type=float, help="seconds (default 7 days)")
    sp = sub.add_parser(
        "send",
        help="sign captured webhook bodies with the configured secret and post them to a running service",
        description="Sign captured webhook bodies with the configured secret and post them to a "
        "running service. With --demo, against a running `debounce serve --demo`: an example "
        "that describes an edit is first made real in the source's stand-in, and the command "
        "waits until the sync writes the edit and prints its change in the feed.",
        epilog="Edit a demo page and see the change arrive: `debounce send notion "
        "examples/notion/page.content_updated.json --demo` (Slack: `debounce send slack "
        "examples/slack/message_changed.json --demo`); then `debounce documents changes` "
        "lists the feed.",
    )
    sp.add_argument("source", choices=names)
    sp.add_argument("files", nargs="+", help="JSON bodies, e.g. examples/<source>/<event>.json")
    sp.add_argument(
        "--url",
        default=None,
        help="service base URL (default: with --demo the running demo's, else http://127.0.0.1:$PORT)",
    )
    sp.add_argument("--secret", help="signing secret (default: the source's configured secret)")
    sp.add_argument(
        "--demo",
        action="store_true",
        help="play the source's side of a running `debounce serve --demo` (the same "
        "DEBOUNCE_DATA_DIR): sign with its demo secret when the source's secret "
        "is not set, apply an example's edit to the stand-in before posting, "
        "and wait for the edit's change in the feed",
    )
    sp = command(
        "standins",
        "run local stand-ins of the sources' APIs (with demo content) and "
        "print the variables that point debounce at them",
    )
    sp.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    for name, source in handshake_commands().items():
        sp = command(name, f"print the verification token {source} sent")
        sp.set_defaults(handshake_source=source)
    workspace_cmds.add_parser(sub)
    subscriptions.add_parser(sub)
    backfill.add_parser(sub)
    deletions.add_parser(sub)
    sp = command(
        "documents",
        "list synced documents, newest first (by id, as the dashboard's "
        "Documents page), or print one as Markdown; `documents changes` "
        "prints the change feed",
    )
    sp.add_argument(
        "action",
        nargs="?",
        choices=["changes"],
        help="changes: the change feed, one line per change, then the cursor to "
        "resume from (docs/consumers.md)",
    )
    sp.add_argument("--source", type=known_source, help=f"only this source ({listed})")
    sp.add_argument(
        "--kind",
        choices=DOCUMENT_KINDS,
        help='only this kind of document (docs/consumers.md, "Kinds of document"); '
        "with changes: the changes of such documents",
    )
    sp.add_argument("--id", help="document id: print its Markdown")
    sp.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    sp.add_argument(
        "--after",
        metavar="CURSOR",
        help="changes: after this cursor (default: from the oldest retained change)",
    )
    sp.add_argument("--workspace", type=int, metavar="ID", help="changes: only this workspace")
    sp.add_argument(
        "--follow", action="store_true", help="changes: keep waiting for new changes until Ctrl-C"
    )
    return p
