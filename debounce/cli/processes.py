"""The service processes the CLI starts: the worker, the web, and both in one (``serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
from collections.abc import AsyncIterator, Callable

import uvicorn

import integrations
from debounce.config import Settings
from debounce.db import open_pool
from debounce.documents import DocumentStore
from debounce.migrate import migrate
from debounce.server import QuietServer

__all__ = ["database", "redact", "run_worker", "serve"]

log = logging.getLogger("debounce.cli")


def install_signals(stop: Callable[[], None]) -> None:
    """Call ``stop`` on SIGTERM and SIGINT (inside a running event loop)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs)."""
    return re.sub(r"(//[^:/@]+:)[^@]+@", r"\1***@", url)


@contextlib.asynccontextmanager
async def database(settings: Settings) -> AsyncIterator[Settings]:
    """Settings with a database URL: ``DATABASE_URL``, or the embedded Postgres under
    ``DEBOUNCE_DATA_DIR`` (started here, stopped at exit)."""
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


async def run_worker(settings: Settings, *, install_signal_handlers: bool = True) -> int:
    """Run the worker process until SIGTERM/SIGINT; returns the exit code (0)."""
    from debounce.worker import Worker

    assert settings.database_url
    pool = open_pool(settings.database_url, max_size=settings.worker_concurrency + 4,
                     timeout=settings.pool_timeout_seconds, name="debounce-worker")
    await pool.open(wait=False)
    sources = integrations.create_all(settings, DocumentStore(pool))
    worker = Worker(settings, pool, sources, conninfo=settings.database_url)
    if install_signal_handlers:
        install_signals(worker.stop)
    metrics_server = None
    if settings.metrics_port:
        from prometheus_client import start_http_server

        from debounce.metrics import WORKER

        metrics_server, _ = start_http_server(settings.metrics_port, registry=WORKER.registry)
        log.info("worker metrics at http://0.0.0.0:%d/metrics", settings.metrics_port)
    try:
        await worker.run()
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        for integration in sources.values():
            await integration.aclose()
        await pool.close()
    return 0


async def serve(settings: Settings, host: str, port: int, *, demo: bool, with_worker: bool) -> int:
    """``debounce web`` / ``debounce serve [--demo]``: the web app on ``host:port`` and, with
    ``with_worker``, a worker in the same process, migrating first. Returns the exit code."""
    from debounce.cli.demo import connect_demo_workspaces, demo_tour, start_demo
    from debounce.web import create_app
    from debounce.worker import Worker

    async with database(settings) as settings, contextlib.AsyncExitStack() as stack:
        assert settings.database_url
        await migrate(settings.database_url)
        demo_run = None
        if demo:
            settings, demo_run = start_demo(settings, stack)
        assert settings.database_url
        pool = open_pool(settings.database_url, max_size=settings.pool_max_size + 4,
                         timeout=settings.pool_timeout_seconds, name="debounce")
        await pool.open(wait=True, timeout=30)
        stack.push_async_callback(pool.close)
        if demo_run is not None:
            await connect_demo_workspaces(settings, pool, demo_run)
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

        install_signals(stop)
        tasks = [asyncio.create_task(server.serve())]
        if worker is not None:
            tasks.append(asyncio.create_task(worker.run()))
        base = f"http://{host}:{port}"
        log.info("serving %s (webhooks at %s/webhooks/{%s}; database %s)", base, base,
                 ",".join(integrations.source_types()), redact(settings.database_url))
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
    at them; run until SIGTERM/SIGINT. Returns the exit code (0)."""
    stopped = asyncio.Event()
    install_signals(stopped.set)
    with contextlib.ExitStack() as stack:
        for source in integrations.sources().values():
            if source.demo is None:
                continue
            setup = source.demo()
            stack.callback(setup.stop)
            env = {s.name: s.env for s in source.settings}
            for name, value in setup.settings.items():
                print(f"export {env.get(name, name.upper())}={value}")
        print("# the stand-ins run until Ctrl-C", flush=True)
        await stopped.wait()
    return 0
