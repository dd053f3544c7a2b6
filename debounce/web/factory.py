"""The app factory and its lifespan: routes wired to the endpoint modules, one error mapping.

Routes (docs/design.md, "HTTP surface"): ``POST /webhooks/{source}`` (:mod:`.webhooks`); the
admin API (:mod:`.admin_api`); the read API, ``/documents`` and the change feed
(:mod:`.read_api`); ``GET /healthz``, ``/readyz``, ``/metrics`` (:mod:`.health`);
the dashboard under ``/admin/`` (:mod:`.dashboard`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route

from debounce import registry
from debounce.config import Settings
from debounce.contract import WebhookParser
from debounce.infra.db import check_connection_budget, open_pool
from debounce.infra.heap import freeze_startup_objects
from debounce.queue.batcher import EnqueueBatcher
from debounce.web import (
    admin_api,
    dashboard,
    deletions_api,
    health,
    oauth,
    read_api,
    subscriptions_api,
    webhooks,
    workspace_api,
)
from debounce.web.errors import ErrorBoundary, http_error, server_error
from debounce.web.inputs import ControlCharacterGuard
from debounce.web.state import WebState
from debounce.workspaces import Directory, env_tokens

__all__ = ["answer_waiters_on_signals", "create_app"]

ROUTES = [
    Route("/webhooks/{source}", webhooks.webhook, methods=["POST"]),
    Route("/resync/{source}/{page_id:path}", admin_api.resync, methods=["POST"]),
    Route("/jobs", admin_api.list_jobs, methods=["GET"]),
    Route("/jobs/{job_id}", admin_api.get_job, methods=["GET"]),
    Route("/jobs/{job_id}/retry", admin_api.retry_job, methods=["POST"]),
    Route("/stats", admin_api.stats, methods=["GET"]),
    Route("/admin/verification-token/{source}", admin_api.verification_token, methods=["GET"]),
    Route("/admin/deletions", deletions_api.list_holds, methods=["GET"]),
    Route("/admin/deletions/{hold_id}", deletions_api.get_hold, methods=["GET"]),
    Route("/admin/deletions/{hold_id}/{action}", deletions_api.resolve_hold, methods=["POST"]),
    Route("/workspaces", workspace_api.list_workspaces, methods=["GET"]),
    Route("/workspaces/{workspace_id}", workspace_api.get_workspace, methods=["GET"]),
    Route("/workspaces/{workspace_id}/{action}", workspace_api.set_workspace_status, methods=["POST"]),
    *[
        route
        for source in registry.source_types()
        for route in (
            Route(f"/{source}/install", oauth.install, methods=["GET"]),
            Route(f"/{source}/oauth_redirect", oauth.oauth_redirect, methods=["GET"]),
        )
    ],
    Route("/subscriptions", subscriptions_api.list_all, methods=["GET"]),
    Route("/subscriptions", subscriptions_api.create, methods=["POST"]),
    Route("/subscriptions/{subscription_id}", subscriptions_api.one, methods=["GET", "DELETE"]),
    Route("/subscriptions/{subscription_id}/{action}", subscriptions_api.act, methods=["POST"]),
    Route("/documents", read_api.list_documents, methods=["GET"]),
    Route("/documents/changes", read_api.changes, methods=["GET"]),
    Route("/documents/{source}/{document_id:path}", read_api.get_document, methods=["GET"]),
    Route("/healthz", health.healthz, methods=["GET"]),
    Route("/readyz", health.readyz, methods=["GET"]),
    Route("/metrics", health.metrics, methods=["GET"]),
]


def answer_waiters_on_signals(state: WebState) -> Callable[[], None]:
    """Under a server that handles SIGTERM/SIGINT with Python handlers (``uvicorn
    debounce.web:app``, the Procfile's web line), answer the feed's waiting followers as soon
    as the signal comes: uvicorn waits for open requests *before* the lifespan ends, and a
    long-poll may last 60 s, beyond a platform's shutdown grace. The server's own handler runs
    after. Nothing outside the main thread, or where the handler is not a Python function
    (``debounce web``/``serve`` stop the waiters themselves). Returns what restores the
    handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    import asyncio

    loop = asyncio.get_running_loop()
    saved: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous) or getattr(previous, "__module__", "") == "asyncio.unix_events":
            continue

        def chained(
            signum: int, frame: FrameType | None, previous: Callable[[int, FrameType | None], Any] = previous
        ) -> None:
            loop.call_soon_threadsafe(state.stop_waiting)
            previous(signum, frame)

        saved[sig] = previous
        signal.signal(sig, chained)

    def restore() -> None:
        for sig, previous in saved.items():
            if signal.getsignal(sig) is not previous:
                signal.signal(sig, previous)

    return restore


def create_app(
    settings: Settings,
    *,
    pool: AsyncConnectionPool[Any] | None = None,
    parsers: dict[str, WebhookParser] | None = None,
    freeze_heap: bool = False,
) -> Starlette:
    """Build the web app.

    ``pool``: an open pool to use (the caller closes it); by default the lifespan opens one on
    ``settings.database_url`` (its statements limited to the webhook deadline) and closes it.
    ``parsers``: webhook parsers by source type; by default every registered source's
    (``registry.parsers``: the web builds no syncer). ``freeze_heap``: once the lifespan
    has started, freeze what start-up loaded (:func:`debounce.infra.heap.freeze_startup_objects`;
    for the process's own app, not for apps built inside another program such as a test).

    Raises:
        ValueError: no pool given and ``settings.database_url`` is unset.
    """
    if pool is None and not settings.database_url:
        raise ValueError("DATABASE_URL is not set (debounce serve starts an embedded Postgres)")
    if parsers is None:
        parsers = registry.parsers(settings)
    registered = registry.sources()
    state = WebState(
        settings=settings,
        parsers=parsers,
        pool=pool,
        audience_sources=frozenset(
            name for name in parsers if name in registered and registered[name].audiences
        ),
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        own = state.pool is None
        if own:
            assert settings.database_url
            await check_connection_budget(settings.database_url, "web", *settings.connections("web"))
            state.pool = open_pool(
                settings.database_url,
                max_size=settings.pool_max_size,
                timeout=min(settings.pool_timeout_seconds, settings.webhook_deadline_seconds),
                name="debounce-web",
                statement_timeout=settings.webhook_deadline_seconds,
            )
            await state.pool.open(wait=False)
        if settings.database_replica_url and state.replica is None:
            state.replica = open_pool(
                settings.database_replica_url,
                max_size=settings.pool_max_size,
                timeout=settings.pool_timeout_seconds,
                name="debounce-web-replica",
                statement_timeout=settings.webhook_deadline_seconds,
            )
            await state.replica.open(wait=False)
        restore_signals = answer_waiters_on_signals(state)
        state.batcher = EnqueueBatcher(
            state.db,
            flushers=max(1, min(4, settings.pool_max_size // 2)),
            notify_within=settings.poll_interval_seconds,
        )
        state.batcher.start()
        state.directory = Directory(state.db, env_tokens=env_tokens(settings))
        if freeze_heap:
            freeze_startup_objects()
        try:
            yield
        finally:
            restore_signals()
            state.stop_waiting()
            await state.batcher.stop()
            state.batcher = None
            if state.signal is not None:
                await state.signal.close()
                state.signal = None
            if state.replica is not None:
                await state.replica.close()
                state.replica = None
            state.stopping = False
            if own:
                await state.db.close()
                state.pool = None

    # The API's routes first: /admin/verification-token/{source} stays the API's.
    routes = [*ROUTES, dashboard.mount(settings, state)]
    application = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(ErrorBoundary, handler=server_error),
            Middleware(ControlCharacterGuard, routes=routes),
        ],
        exception_handlers={HTTPException: http_error},
    )
    application.state.web = state
    application.state.metrics = state.metrics
    application.state.settings = settings
    return application
