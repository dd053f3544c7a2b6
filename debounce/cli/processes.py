"""The service processes the CLI starts: the worker, the web, and both in one (``serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Callable

import psycopg
import uvicorn

from debounce import registry
from debounce.cli.errors import CliError
from debounce.config import Settings
from debounce.infra.db import check_connection_budget, open_pool
from debounce.infra.heap import freeze_startup_objects
from debounce.infra.server import QuietServer
from debounce.migrate import migrate, schema_status

__all__ = ["PROCESS_COMMANDS", "bind", "database", "redact", "require_migrated", "run_worker", "serve"]

log = logging.getLogger("debounce.cli")


def install_signals(stop: Callable[[], None]) -> None:
    """Call ``stop`` on SIGTERM and SIGINT (inside a running event loop)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs)."""
    return re.sub(r"(//[^:/@]+:)[^@]+@", r"\1***@", url)


#: The Procfile's processes (and ``debounce web``, its ``web`` line): they need the service's
#: database, ``DATABASE_URL``; without it they stop at once with one line naming it.
PROCESS_COMMANDS = ("migrate", "worker", "web")


@contextlib.asynccontextmanager
async def database(settings: Settings, command: str) -> AsyncIterator[Settings]:
    """Settings with a database URL for ``debounce COMMAND``: ``DATABASE_URL``; else, for
    ``serve``, the embedded Postgres under ``DEBOUNCE_DATA_DIR`` (created if need be), and for
    a command a person runs by hand (``jobs``, ``documents``, ``workspaces``…) that embedded
    Postgres if ``serve`` created it. Started here, stopped at exit.

    Raises:
        CliError: (code 2) ``DATABASE_URL`` is unset and ``command`` is one of
            :data:`PROCESS_COMMANDS`, or no embedded database exists for a hand-run command.
    """
    if settings.database_url:
        yield settings
        return
    if command in PROCESS_COMMANDS:
        raise CliError(
            f"configuration error: DATABASE_URL is not set (`debounce {command}` "
            "needs the service's database; only `debounce serve` starts an "
            "embedded Postgres)",
            2,
        )
    from debounce.infra.embedded import EmbeddedPostgres

    embedded = EmbeddedPostgres(settings.data_dir)
    if command != "serve" and not embedded.exists():
        raise CliError(
            f"configuration error: DATABASE_URL is not set and there is no "
            f"embedded database in {settings.data_dir}/ (`debounce serve` creates "
            "it; or set DATABASE_URL)",
            2,
        )
    url = await asyncio.to_thread(embedded.start, announce=command == "serve")
    try:
        yield settings.with_(database_url=url)
    finally:
        await asyncio.to_thread(embedded.stop)


async def require_migrated(settings: Settings, *, embedded: bool) -> None:
    """Check that the database at ``settings.database_url`` has every migration of this
    release; it changes nothing (only ``migrate`` and ``serve`` migrate). ``embedded``: the
    database is the embedded one (which ``serve`` migrates).

    Raises:
        CliError: the schema is behind (one line: its version, the one needed, what to run).
        psycopg.OperationalError: the database is unreachable.
    """
    assert settings.database_url
    async with await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True) as conn:
        status = await schema_status(conn)
    if status.ok:
        return
    how = (
        f"run `debounce serve` (it migrates the embedded database in {settings.data_dir}/)"
        if embedded
        else "run `debounce migrate`"
    )
    raise CliError(
        f"database schema is not migrated (at version {status.current} of {status.required}): {how}", 1
    )


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``, bound before anything is started or logged
    so that a port in use is one line naming ``PORT``.

    Raises:
        CliError: the port is in use or the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} is in use: set PORT or --port", 1) from None
        raise CliError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}: set --host, PORT or --port", 1
        ) from None
    return sock


async def run_worker(settings: Settings, *, install_signal_handlers: bool = True) -> int:
    """Run the worker process until SIGTERM/SIGINT; returns the exit code (0)."""
    from debounce.worker import Worker

    assert settings.database_url
    await check_connection_budget(settings.database_url, "worker", *settings.connections("worker"))
    pool = open_pool(
        settings.database_url,
        max_size=settings.worker_pool_size(),
        timeout=settings.pool_timeout_seconds,
        name="debounce-worker",
    )
    await pool.open(wait=False)
    syncers = registry.create_all(settings)
    worker = Worker(settings, pool, syncers, conninfo=settings.database_url)
    if install_signal_handlers:
        install_signals(worker.stop)
    freeze_startup_objects()
    metrics_server = None
    if settings.metrics_port:
        from prometheus_client import start_http_server

        from debounce.infra.metrics import WORKER

        try:
            metrics_server, _ = start_http_server(settings.metrics_port, registry=WORKER.registry)
        except OSError as exc:
            await pool.close()
            raise CliError(
                f"cannot serve the worker's metrics on port {settings.metrics_port} "
                f"({exc.strerror or exc}): set DEBOUNCE_METRICS_PORT",
                1,
            ) from None
        log.info("worker metrics at http://0.0.0.0:%d/metrics", settings.metrics_port)
    try:
        await worker.run()
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        for syncer in syncers.values():
            await syncer.aclose()
        await pool.close()
    return 0


async def serve(settings: Settings, host: str, port: int, *, demo: bool, with_worker: bool) -> int:
    """``debounce web`` / ``debounce serve [--demo]``: the web app on ``host:port`` and, with
    ``with_worker``, a worker in the same process, migrating first (``web`` does not migrate:
    like the Procfile's web line it answers 503 until ``debounce migrate`` runs). The port is
    bound before anything starts. Returns the exit code.

    Raises:
        CliError: the port is in use, ``web`` without ``DATABASE_URL``, or (``demo``)
            another demo runs in the data directory (:func:`~debounce.cli.demo.hold_demo_lock`).
    """
    from debounce.cli.demo import connect_demo_workspaces, demo_tour, hold_demo_lock, start_demo
    from debounce.web import create_app
    from debounce.worker import Worker

    demo_lock = hold_demo_lock(settings, host, port) if demo else None  # before anything
    try:
        sock = bind(host, port)
    except CliError:
        if demo_lock is not None:
            os.close(demo_lock)
        raise
    async with contextlib.AsyncExitStack() as stack:
        if demo_lock is not None:
            stack.callback(os.close, demo_lock)  # after the demo's state file is removed
        stack.callback(sock.close)
        settings = await stack.enter_async_context(database(settings, "serve" if with_worker else "web"))
        assert settings.database_url
        if with_worker:
            await migrate(settings.database_url)
        demo_run = None
        if demo:
            settings, demo_run = start_demo(settings, stack)
        assert settings.database_url
        process = "serve" if with_worker else "web"
        await check_connection_budget(settings.database_url, process, *settings.connections(process))
        pool = open_pool(
            settings.database_url,
            max_size=settings.pool_max_size + (4 if with_worker else 0),
            timeout=settings.pool_timeout_seconds,
            name="debounce",
        )
        await pool.open(wait=True, timeout=30)
        stack.push_async_callback(pool.close)
        if demo_run is not None:
            await connect_demo_workspaces(settings, pool, demo_run)
        app = create_app(settings, pool=pool, freeze_heap=True)
        server = QuietServer(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_config=None,
                access_log=False,
                lifespan="on",
                proxy_headers=True,
                forwarded_allow_ips=settings.forwarded_allow_ips,
            )
        )
        worker = None
        if with_worker:
            syncers = registry.create_all(settings)
            worker = Worker(settings, pool, syncers, conninfo=settings.database_url)
            for syncer in syncers.values():
                stack.push_async_callback(syncer.aclose)

        def stop() -> None:
            log.info("stopping")
            app.state.web.stop_waiting()  # answer the feed's long-polls now, not at their end
            server.should_exit = True
            if worker is not None:
                worker.stop()

        install_signals(stop)
        tasks = [asyncio.create_task(server.serve(sockets=[sock]))]
        if worker is not None:
            tasks.append(asyncio.create_task(worker.run()))
        base = f"http://{host}:{port}"
        log.info(
            "serving %s (webhooks at %s/webhooks/{%s}; database %s)",
            base,
            base,
            ",".join(registry.source_types()),
            redact(settings.database_url),
        )
        if demo_run is not None:
            tasks.append(asyncio.create_task(demo_tour(settings, base, server, pool, demo_run)))
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                stop()
                raise task.exception()  # type: ignore[misc]
        await asyncio.gather(*tasks, return_exceptions=True)
    return 0


async def standins(host: str) -> int:
    """``debounce standins``: start every source's local API stand-in (the tests' and
    ``serve --demo``'s, with their demo content) and print the variables that point a service
    at them (sourceable: ``. ./standins.env``), and, as comments, the token of each further
    demo workspace; run until SIGTERM/SIGINT. Returns the exit code (0)."""
    stopped = asyncio.Event()
    install_signals(stopped.set)
    from debounce.cli.demo import demo_setups

    with contextlib.ExitStack() as stack:
        for source, setup in demo_setups(stack):
            env = {s.name: s.env for s in source.settings}
            for name, value in setup.settings.items():
                print(f"export {env.get(name, name.upper())}={value}")
            for w in setup.workspaces:  # sourcing skips comments: these are for a person
                print(
                    f"# another {source.source_type} workspace, {w.name} ({w.external_id}): "
                    f"debounce workspaces add {source.source_type} --token {w.token}"
                )
        print("# the stand-ins run until Ctrl-C", flush=True)
        await stopped.wait()
    return 0
