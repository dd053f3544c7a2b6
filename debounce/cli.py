"""The ``debounce`` command (also ``python -m debounce``).

Configuration comes from the environment (see ``docs/design.md``); ``debounce --help`` and
``debounce COMMAND --help`` explain each command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import integrations
from debounce import queue
from debounce.config import Settings, SourceWindow
from debounce.db import fetch_one, open_pool
from debounce.documents import DocumentStore
from debounce.logs import configure
from debounce.migrate import migrate
from debounce.server import QuietServer
from debounce.sql import queries

__all__ = ["DEMO_NOTION_SECRET", "DEMO_SLACK_SECRET", "build_parser", "main", "sign_request"]

log = logging.getLogger("debounce.cli")

#: Signing secrets of ``serve --demo`` (the Notion one is the token in
#: examples/notion/verification.json, as Notion signs with the verification token).
DEMO_NOTION_SECRET = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"
DEMO_SLACK_SECRET = "demo-slack-signing-secret"
DEMO_ADMIN_TOKEN = "demo-admin-token"
_HERE = Path(__file__).resolve().parent
#: Example webhook bodies: the checkout's examples/, or the copy a wheel carries.
EXAMPLES = _HERE / "_examples" if (_HERE / "_examples").is_dir() else _HERE.parent / "examples"


def _install_signals(stop: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


@contextlib.asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[Settings]:
    """Settings with a database URL: ``DATABASE_URL``, or the embedded Postgres."""
    if settings.database_url:
        yield settings
        return
    from debounce.embedded import EmbeddedPostgres

    embedded = EmbeddedPostgres(settings.data_dir)
    url = await asyncio.to_thread(embedded.start)
    try:
        yield settings.with_(database_url=url)
    finally:
        await asyncio.to_thread(embedded.stop)


# --- service processes --------------------------------------------------------------------------


async def run_worker(settings: Settings, *, install_signals: bool = True) -> int:
    """Run the worker process until SIGTERM/SIGINT; returns the exit code (0)."""
    from debounce.worker import Worker

    assert settings.database_url
    pool = open_pool(settings.database_url, max_size=settings.worker_concurrency + 4,
                     timeout=settings.pool_timeout_seconds, name="debounce-worker")
    await pool.open(wait=False)
    sources = integrations.create_all(settings, DocumentStore(pool))
    worker = Worker(settings, pool, sources, conninfo=settings.database_url)
    if install_signals:
        _install_signals(worker.stop)
    try:
        await worker.run()
    finally:
        for integration in sources.values():
            await integration.aclose()
        await pool.close()
    return 0


async def _serve(settings: Settings, host: str, port: int, *, demo: bool, with_worker: bool) -> int:
    from debounce.web import create_app
    from debounce.worker import Worker

    async with _database(settings) as settings, contextlib.AsyncExitStack() as stack:
        assert settings.database_url
        await migrate(settings.database_url)
        if demo:
            settings = _start_demo(settings, stack)
        assert settings.database_url
        pool = open_pool(settings.database_url, max_size=settings.pool_max_size + 4,
                         timeout=settings.pool_timeout_seconds, name="debounce")
        await pool.open(wait=True, timeout=30)
        stack.push_async_callback(pool.close)
        app = create_app(settings, pool=pool)
        server = QuietServer(uvicorn.Config(app, host=host, port=port, log_config=None,
                                        access_log=False, lifespan="on"))
        worker = None
        if with_worker:
            sources = integrations.create_all(settings, DocumentStore(pool))
            worker = Worker(settings, pool, sources, conninfo=settings.database_url)
            for integration in sources.values():
                stack.push_async_callback(integration.aclose)

        def stop() -> None:
            log.info("stopping")
            server.should_exit = True
            if worker is not None:
                worker.stop()

        _install_signals(stop)
        tasks = [asyncio.create_task(server.serve())]
        if worker is not None:
            tasks.append(asyncio.create_task(worker.run()))
        base = f"http://{host}:{port}"
        log.info("serving %s (webhooks at %s/webhooks/{notion,slack}; database %s)",
                 base, base, _redact(settings.database_url))
        if demo:
            tasks.append(asyncio.create_task(_demo_tour(settings, base, server, pool)))
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                stop()
                raise task.exception()  # type: ignore[misc]
        await asyncio.gather(*tasks, return_exceptions=True)
    return 0


def _redact(url: str) -> str:
    import re

    return re.sub(r"(//[^:/@]+:)[^@]+@", r"\1***@", url)


def _start_demo(settings: Settings, stack: contextlib.AsyncExitStack) -> Settings:
    """Start the local Notion and Slack stand-ins with demo content and point settings at
    them. Unset secrets and tokens get demo values; short windows make the tour quick."""
    from standins.notion_api import FakeNotion
    from standins.server import BackgroundServer
    from standins.slack_api import FakeSlack

    notion = FakeNotion.demo()
    slack = FakeSlack.demo(token="xoxb-debounce-demo")
    notion_server = BackgroundServer(notion.app())
    slack_server = BackgroundServer(slack.app())
    notion_server.start()
    slack_server.start()
    stack.callback(notion_server.stop)
    stack.callback(slack_server.stop)
    log.info("demo: local Notion API stand-in at %s, Slack at %s/api/",
             notion_server.url, slack_server.url)
    return settings.with_(
        notion_base_url=notion_server.url,
        notion_token=notion.token,
        notion_webhook_secret=settings.notion_webhook_secret or DEMO_NOTION_SECRET,
        slack_api_url=slack_server.url + "/api/",
        slack_bot_token=slack.token,
        slack_signing_secret=settings.slack_signing_secret or DEMO_SLACK_SECRET,
        admin_token=settings.admin_token or DEMO_ADMIN_TOKEN,
        windows={"notion": SourceWindow(3.0, 20.0), "slack": SourceWindow(2.0, 20.0)},
    )


async def _demo_tour(settings: Settings, base: str, server: uvicorn.Server, pool: Any) -> None:
    """Post the example webhooks to ourselves once the server is up, then show the documents
    the worker wrote."""
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.05)
    files = [
        *sorted((EXAMPLES / "notion").glob("page.*.json")),
        EXAMPLES / "slack" / "message.json",
        EXAMPLES / "slack" / "thread_reply.json",
        EXAMPLES / "slack" / "message_changed.json",
    ]
    async with httpx.AsyncClient(timeout=10) as client:
        for path in files:
            source = path.parent.name
            body = path.read_bytes()
            resp = await client.post(f"{base}/webhooks/{source}", content=body,
                                     headers=sign_request(source, body, _secret(settings, source)))
            log.info("demo: sent %s → %s %s", path.name, resp.status_code, resp.text[:200])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.should_exit:
        stats = await queue.stats(pool)
        if stats["totals"]["pending"] == 0 and stats["totals"]["processing"] == 0:
            break
        await asyncio.sleep(0.5)
    row = await fetch_one(pool, queries("cli")["document_summary"], {})
    log.info("demo: %s documents in the `documents` table — see them with "
             "`debounce documents` (DATABASE_URL unset uses the same embedded database)",
             row["n"] if row else 0)


def _secret(settings: Settings, source: str) -> str:
    if source == "notion":
        return settings.notion_webhook_secret or DEMO_NOTION_SECRET
    if source == "slack":
        return settings.slack_signing_secret or DEMO_SLACK_SECRET
    raise SystemExit(f"don't know how to sign for source {source!r}")


def sign_request(source: str, body: bytes, secret: str, *, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` the way ``source`` does.

    Notion: ``X-Notion-Signature: sha256=<hex HMAC-SHA256(body, verification token)>``
    (developers.notion.com, Webhooks). Slack: ``X-Slack-Request-Timestamp`` and
    ``X-Slack-Signature: v0=<hex HMAC-SHA256("v0:<ts>:<body>", signing secret)>``
    (api.slack.com/authentication/verifying-requests-from-slack).
    """
    headers = {"Content-Type": "application/json"}
    if source == "notion":
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers["X-Notion-Signature"] = f"sha256={digest}"
    elif source == "slack":
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        headers["X-Slack-Request-Timestamp"] = ts
        headers["X-Slack-Signature"] = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    else:
        raise ValueError(f"unknown source {source!r}")
    return headers


# --- admin commands ------------------------------------------------------------------------------


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


async def _with_db(settings: Settings, fn: Callable[[Any], Coroutine[Any, Any, int]]) -> int:
    async with _database(settings) as settings:
        assert settings.database_url
        await migrate(settings.database_url)
        pool = open_pool(settings.database_url, max_size=2)
        await pool.open(wait=True, timeout=30)
        try:
            return await fn(pool)
        finally:
            await pool.close()


def _cmd(args: argparse.Namespace, settings: Settings) -> Coroutine[Any, Any, int]:
    name = args.command

    if name == "migrate":
        async def run() -> int:
            async with _database(settings) as s:
                assert s.database_url
                applied = await migrate(s.database_url)
                print("applied: " + ", ".join(applied) if applied else "schema up to date")
            return 0
        return run()
    if name == "worker":
        async def worker_cmd() -> int:
            async with _database(settings) as s:
                return await run_worker(s)
        return worker_cmd()
    if name in ("serve", "web"):
        return _serve(settings, args.host, args.port, demo=getattr(args, "demo", False),
                      with_worker=name == "serve")
    if name == "send":
        return _send(args, settings)

    async def admin(pool: Any) -> int:
        if name == "resync":
            if args.source not in integrations.source_types():
                print(f"unknown source {args.source!r}", file=sys.stderr)
                return 2
            from integrations.base import normalize_page_id

            page_id = normalize_page_id(integrations.create(args.source, settings), args.page_id)
            _print((await queue.resync(pool, args.source, page_id)).to_json())
        elif name == "jobs":
            page = await queue.list_jobs(pool, status=args.status, source_type=args.source,
                                         limit=args.limit, cursor=args.cursor)
            _print({"jobs": [j.to_json() for j in page.jobs], "next_cursor": page.next_cursor})
        elif name == "stats":
            _print(await queue.stats(pool))
        elif name == "retry":
            try:
                _print((await queue.retry(pool, args.job_id)).to_json())
            except (queue.JobNotFound, queue.JobConflict) as exc:
                print(f"cannot retry: {exc}", file=sys.stderr)
                return 1
        elif name == "prune":
            _print(await queue.prune(pool, args.older_than or settings.job_retention_seconds,
                                     event_older_than=settings.event_retention_seconds))
        elif name == "notion-token":
            row = await fetch_one(pool, queries("admin")["latest_verification_token"],
                                  {"source_type": "notion"})
            if row is None:
                print("no verification request received from Notion yet", file=sys.stderr)
                return 1
            print(row["token"])
        elif name == "documents":
            q = queries("cli")
            if args.id:
                row = await fetch_one(pool, q["document"], {"document_id": args.id})
                if row is None:
                    print(f"no document {args.id!r}", file=sys.stderr)
                    return 1
                print(f"# {row['title']}\n<!-- {row['source_type']} {row['document_id']} "
                      f"{row['url'] or ''} synced {row['synced_at']} -->\n")
                print(row["content"])
            else:
                from debounce.db import fetch_all

                rows = await fetch_all(pool, q["documents"], {"source_type": args.source,
                                                              "limit": args.limit})
                for r in rows:
                    flag = " (deleted)" if r["deleted_at"] else ""
                    print(f"{r['source_type']:7} {r['document_id']:45} {r['chars']:6} chars  "
                          f"{r['title'][:50]}{flag}")
        return 0

    return _with_db(settings, admin)


async def _send(args: argparse.Namespace, settings: Settings) -> int:
    failures = 0
    async with httpx.AsyncClient(timeout=10) as client:
        for file in args.files:
            body = await asyncio.to_thread(Path(file).read_bytes)
            secret = args.secret or _secret(settings, args.source)
            headers = sign_request(args.source, body, secret)
            url = f"{args.url.rstrip('/')}/webhooks/{args.source}"
            try:
                resp = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                print(f"{file}: cannot reach {url}: {exc}", file=sys.stderr)
                return 1
            print(f"{file}: {resp.status_code} {resp.text}")
            failures += resp.status_code >= 300
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``debounce`` command."""
    p = argparse.ArgumentParser(
        prog="debounce",
        description="Webhook-ingesting debounce sync service: Notion and Slack webhooks in, "
        "one debounced sync job per page in Postgres, Markdown documents out. Configured by "
        "environment variables (DATABASE_URL, NOTION_*, SLACK_*, DEBOUNCE_*; see README).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("migrate", help="apply pending schema migrations (Procfile: release)")
    for name, text in (("web", "run the HTTP service only (Procfile: web)"),
                       ("serve", "web and worker in one process, migrating first; with no "
                                 "DATABASE_URL an embedded Postgres under .debounce/")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
        sp.add_argument("--port", type=int, default=None, help="port (default $PORT or 8000)")
        if name == "serve":
            sp.add_argument("--demo", action="store_true",
                            help="start local stand-ins of the Notion and Slack APIs with demo "
                                 "content, use demo secrets and short windows, and send the "
                                 "example webhooks in examples/ to the service once it is up")
    sub.add_parser("worker", help="run the claim loop (Procfile: worker)")
    sp = sub.add_parser("resync", help="sync one page now (manual re-sync, revives failed pages)")
    sp.add_argument("source", help="source type: notion or slack")
    sp.add_argument("page_id", help="Notion page/database id or Slack channel id")
    sp = sub.add_parser("jobs", help="list jobs, newest first")
    sp.add_argument("--status", choices=["pending", "processing", "completed", "failed"])
    sp.add_argument("--source")
    sp.add_argument("--limit", type=int, default=20)
    sp.add_argument("--cursor", type=int, help="next_cursor of the previous page")
    sub.add_parser("stats", help="job counts by source and state, queue lag")
    sp = sub.add_parser("retry", help="retry a failed job now (attempts reset)")
    sp.add_argument("job_id", type=int)
    sp = sub.add_parser("prune", help="delete finished jobs and remembered event ids past retention")
    sp.add_argument("--older-than", type=float, help="seconds (default 7 days)")
    sp = sub.add_parser("send", help="sign captured webhook bodies with the configured secret "
                                     "and post them to a running service")
    sp.add_argument("source", choices=["notion", "slack"])
    sp.add_argument("files", nargs="+", help="JSON bodies, e.g. examples/notion/page.created.json")
    sp.add_argument("--url", default=None, help="service base URL (default http://127.0.0.1:$PORT)")
    sp.add_argument("--secret", help="signing secret (default NOTION_WEBHOOK_SECRET / "
                                     "SLACK_SIGNING_SECRET, else the demo secret)")
    sub.add_parser("notion-token", help="print the verification token Notion sent")
    sp = sub.add_parser("documents", help="list synced documents, or print one as Markdown")
    sp.add_argument("--source")
    sp.add_argument("--id", help="document id: print its Markdown")
    sp.add_argument("--limit", type=int, default=50)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``debounce``; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    configure(settings.log_format, settings.log_level)
    if getattr(args, "port", 0) is None:
        args.port = settings.port
    if getattr(args, "url", 0) is None:
        args.url = f"http://127.0.0.1:{settings.port}"
    try:
        return asyncio.run(_cmd(args, settings))
    except KeyboardInterrupt:
        return 130
