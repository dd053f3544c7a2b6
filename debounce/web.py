"""The HTTP surface (Starlette): webhooks in, admin routes, health and metrics.

Routes (docs/design.md, "HTTP surface"):

- ``POST /webhooks/{source}``: verify and parse through the source's integration, debounce the
  events (one statement, batched with concurrent deliveries), answer. No source API is called
  on this path: Slack wants an answer within 3 s.
- ``POST /resync/{source}/{page_id}``, ``GET /jobs``, ``GET /jobs/{id}``,
  ``POST /jobs/{id}/retry``, ``GET /stats``, ``GET /admin/verification-token/{source}``:
  admin, ``Authorization: Bearer $DEBOUNCE_ADMIN_TOKEN``.
- ``GET /healthz`` (alive), ``GET /readyz`` (database reachable), ``GET /metrics``.

Errors are JSON ``{"error": "...", "detail": "..."}``: 400 malformed, 401 bad or stale
signature / admin token, 404 unknown source or job, 409 conflict, 413 body too large, 503
database unavailable or feature not configured. A refused request writes nothing.

``uvicorn debounce.web:app`` serves an app configured from the environment.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import integrations
from debounce import queue
from debounce.batcher import EnqueueBatcher
from debounce.config import Settings
from debounce.db import fetch_one, is_transient, open_pool
from debounce.metrics import WebMetrics
from debounce.sql import queries
from debounce.types import JobEvent, JobStatus
from integrations.base import Integration, WebhookError, normalize_page_id

__all__ = ["app", "create_app", "error"]

log = logging.getLogger("debounce.web")
_Q = queries("admin")

#: Seconds /readyz waits for the database before answering 503.
READY_TIMEOUT_SECONDS = 2.0
#: Handshake tokens remembered per source: unsigned verification requests can come from
#: anyone before a secret is configured, so what they can store is bounded.
VERIFICATION_TOKENS_KEPT = 5


def error(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error response ``{"error": code, "detail": detail}`` with ``status``."""
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


class _BodyTooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (without reading it all) anything over ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _db_unavailable(exc: BaseException) -> JSONResponse:
    if isinstance(exc, TimeoutError):
        log.warning("database too slow: no commit within the webhook deadline")
        detail = ("the database did not commit within the deadline; nothing was acknowledged, "
                  "retry the delivery later")
    else:
        log.warning("database unavailable: %s", exc.__class__.__name__)
        detail = "the database is unavailable; nothing was recorded, retry the delivery later"
    return error(503, "database_unavailable", detail, headers={"Retry-After": "5"})


def _unstorable(exc: psycopg.Error) -> bool:
    """The database refused *this* request's data (invalid text, a value too large for an
    index, nesting too deep), as opposed to being unavailable or our own bug."""
    state = exc.sqlstate or ""
    return isinstance(exc, psycopg.DataError) or state.startswith("54")


#: A positive bigint written in ASCII digits (``str.isdigit`` also accepts ``²``).
_ID = re.compile(r"[0-9]{1,19}")


def _int_param(raw: str | None, name: str, default: int | None = None) -> int | None:
    """An integer query or path parameter: ASCII digits within bigint.

    Raises:
        ValueError: anything else (names the parameter).
    """
    if raw is None or raw == "":
        return default
    if not _ID.fullmatch(raw) or int(raw) > queue.MAX_BIGINT:
        raise ValueError(f"{name} must be a whole number between 0 and {queue.MAX_BIGINT}")
    return int(raw)


class _ErrorBoundary:
    """ASGI middleware that turns an unhandled exception into ``handler``'s JSON response and
    stops it there. (Starlette's own 500 handler answers but then re-raises, so the server logs
    a full traceback for every such request.) An exception after the response started is
    re-raised: nothing else can be sent then."""

    def __init__(
        self, app: ASGIApp, handler: Callable[[Request, Exception], Awaitable[Response]]
    ) -> None:
        self.app = app
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                raise
            response = await self.handler(Request(scope), exc)
            await response(scope, receive, send)


def create_app(
    settings: Settings,
    *,
    pool: AsyncConnectionPool[Any] | None = None,
    sources: dict[str, Integration] | None = None,
) -> Starlette:
    """Build the web app.

    ``pool``: an open pool to use (the caller closes it); by default the lifespan opens one on
    ``settings.database_url`` and closes it. ``sources``: integrations by source type; by
    default every registered one (parse half only: no document store in the web process).

    Raises:
        ValueError: no pool given and ``settings.database_url`` is unset.
    """
    if pool is None and not settings.database_url:
        raise ValueError("DATABASE_URL is not set (debounce serve starts an embedded Postgres)")
    metrics = WebMetrics()
    state: dict[str, Any] = {"pool": pool}
    registry = sources if sources is not None else integrations.create_all(settings)

    def db() -> AsyncConnectionPool[Any]:
        current = state["pool"]
        assert current is not None, "the app's lifespan has not started"
        return current  # type: ignore[no-any-return]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        own = state["pool"] is None
        if own:
            assert settings.database_url
            new_pool = open_pool(
                settings.database_url,
                max_size=settings.pool_max_size,
                timeout=min(settings.pool_timeout_seconds, settings.webhook_deadline_seconds),
                name="debounce-web",
                statement_timeout=settings.webhook_deadline_seconds,
            )
            await new_pool.open(wait=False)
            state["pool"] = new_pool
        batcher = EnqueueBatcher(db(), flushers=max(1, min(4, settings.pool_max_size // 2)))
        batcher.start()
        state["batcher"] = batcher
        try:
            yield
        finally:
            await batcher.stop()
            if own:
                await db().close()

    def admin(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            if not settings.admin_token:
                return error(
                    503,
                    "admin_disabled",
                    "admin routes are disabled: set DEBOUNCE_ADMIN_TOKEN and send "
                    "'Authorization: Bearer <token>'",
                )
            given = request.headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), settings.admin_token.encode()
            ):
                return error(
                    401,
                    "unauthorized",
                    "missing or wrong admin token (Authorization: Bearer $DEBOUNCE_ADMIN_TOKEN)",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            try:
                return await handler(request)
            except Exception as exc:
                if is_transient(exc):
                    return _db_unavailable(exc)
                raise

        return guarded

    async def webhook(request: Request) -> Response:
        source = request.path_params["source"]
        integration = registry.get(source)
        if integration is None:
            return error(404, "unknown_source", f"no integration named {source!r}; "
                         f"known: {', '.join(sorted(registry)) or 'none'}")
        try:
            body = await _read_body(request, settings.max_body_bytes)
        except _BodyTooLarge:
            metrics.webhooks.labels(source, "payload_too_large").inc()
            return error(413, "payload_too_large",
                         f"body exceeds {settings.max_body_bytes} bytes (DEBOUNCE_MAX_BODY_BYTES)")
        except ClientDisconnect:
            return error(400, "client_disconnected", "the body was not received in full")
        try:
            result = integration.parse_webhook(request.headers, body)
        except RecursionError:
            metrics.webhooks.labels(source, "malformed_body").inc()
            return error(400, "malformed_body", "the JSON body is nested too deeply")
        except WebhookError as exc:
            metrics.webhooks.labels(source, exc.error).inc()
            log.info("webhook refused: %s", exc.detail,
                     extra={"source": source, "status": exc.status, "error": exc.error})
            return error(exc.status, exc.error, exc.detail)
        if result.warning:
            metrics.warnings.labels(source).inc()
            log.warning("%s webhook: %s", source, result.warning, extra={"source": source})
        if result.verification_token:
            try:
                async with asyncio.timeout(settings.webhook_deadline_seconds):
                    await fetch_one(db(), _Q["save_verification_token"],
                                    {"source_type": source, "token": result.verification_token,
                                     "keep": VERIFICATION_TOKENS_KEPT})
            except Exception as exc:
                if is_transient(exc):
                    return _db_unavailable(exc)
                raise
            log.warning(
                "%s verification token received: %r — paste it into the source's webhook "
                "settings to verify the endpoint, then set it as NOTION_WEBHOOK_SECRET "
                "(also shown by `debounce notion-token`)",
                source, result.verification_token, extra={"source": source},
            )
            metrics.webhooks.labels(source, "handshake").inc()
            return JSONResponse({"ok": True, "detail": "verification token received"})
        window = settings.window(source)
        events = [
            JobEvent(
                source_type=source,
                source_page_id=e.source_page_id,
                payload=e.payload,
                event_id=e.event_id,
                debounce_seconds=window.debounce_seconds,
                max_wait_seconds=window.max_wait_seconds,
                max_attempts=settings.max_attempts,
            )
            for e in result.events
        ]
        try:
            for event in events:
                queue.validate_event(event)
        except ValueError as exc:
            metrics.webhooks.labels(source, "malformed_body").inc()
            return error(400, "malformed_body", str(exc))
        if not events:
            metrics.webhooks.labels(source, "handshake" if result.reply else "ignored").inc()
            if result.note:
                log.info("%s webhook acknowledged: %s", source, result.note, extra={"source": source})
            return JSONResponse(result.reply if result.reply is not None
                                else {"ok": True, "detail": result.note or "nothing to sync"})
        started = time.perf_counter()
        try:
            # The deadline bounds the whole wait (a pool connection, the batch's statement and
            # commit): a delivery is answered well inside Slack's 3 s. A batch that commits
            # after we answered 503 is harmless: the redelivery carries the same event id.
            async with asyncio.timeout(settings.webhook_deadline_seconds):
                outcomes = await state["batcher"].submit(events)
        except Exception as exc:
            if is_transient(exc):
                metrics.webhooks.labels(source, "database_unavailable").inc()
                return _db_unavailable(exc)
            if isinstance(exc, psycopg.Error) and _unstorable(exc):
                metrics.webhooks.labels(source, "unstorable").inc()
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return error(400, "unstorable_event",
                             f"the database cannot store this event: {detail}")
            raise
        metrics.enqueue_seconds.observe(time.perf_counter() - started)
        jobs = []
        for outcome in outcomes:
            metrics.webhooks.labels(source, outcome.outcome.value).inc()
            job = outcome.job
            if job is not None and log.isEnabledFor(logging.DEBUG):
                log.debug("event %s", outcome.outcome.value, extra={
                    **job.log_fields(), "event_count": job.event_count,
                    "scheduled_at": job.scheduled_at.isoformat()})
            jobs.append({"outcome": outcome.outcome.value,
                         "job_id": job.id if job else None,
                         "scheduled_at": job.scheduled_at.isoformat() if job else None})
        body_out: dict[str, Any] = dict(result.reply) if result.reply else {"ok": True}
        body_out["jobs"] = jobs
        return JSONResponse(body_out)

    async def resync(request: Request) -> Response:
        source = request.path_params["source"]
        if source not in registry:
            return error(404, "unknown_source", f"no integration named {source!r}")
        page_id = normalize_page_id(registry[source], request.path_params["page_id"])
        try:
            job = await queue.resync(db(), source, page_id, max_attempts=settings.max_attempts)
        except ValueError as exc:
            return error(400, "bad_request", str(exc))
        log.info("manual re-sync requested", extra=job.log_fields())
        return JSONResponse({"job": job.to_json()}, status_code=202)

    async def list_jobs(request: Request) -> Response:
        params = request.query_params
        try:
            limit = _int_param(params.get("limit"), "limit", 50)
            cursor = _int_param(params.get("cursor"), "cursor")
        except ValueError as exc:
            return error(400, "bad_request", str(exc))
        assert limit is not None
        try:
            page = await queue.list_jobs(
                db(),
                status=params.get("status") or None,
                source_type=params.get("source") or None,
                source_page_id=params.get("page_id") or None,
                limit=limit,
                cursor=cursor,
            )
        except ValueError as exc:
            return error(400, "bad_request", str(exc))
        return JSONResponse({"jobs": [j.to_json() for j in page.jobs],
                             "next_cursor": page.next_cursor})

    def _job_id(request: Request) -> int | None:
        try:
            job_id = _int_param(request.path_params["job_id"], "job id")
        except ValueError:
            return None
        return job_id if job_id else None

    async def get_job(request: Request) -> Response:
        job_id = _job_id(request)
        job = await queue.get(db(), job_id) if job_id else None
        if job is None:
            return error(404, "not_found", f"no job {request.path_params['job_id']!r}")
        return JSONResponse({"job": job.to_json()})

    async def retry_job(request: Request) -> Response:
        job_id = _job_id(request)
        if job_id is None:
            return error(404, "not_found", f"no job {request.path_params['job_id']!r}")
        try:
            job = await queue.retry(db(), job_id)
        except queue.JobNotFound:
            return error(404, "not_found", f"no job {job_id}")
        except queue.JobConflict as exc:
            return error(409, "conflict", str(exc))
        log.info("manual retry", extra=job.log_fields())
        return JSONResponse({"job": job.to_json()})

    async def stats(request: Request) -> Response:
        return JSONResponse(await queue.stats(db()))

    async def verification_token(request: Request) -> Response:
        source = request.path_params["source"]
        row = await fetch_one(db(), _Q["latest_verification_token"], {"source_type": source})
        if row is None:
            return error(404, "not_found", f"no verification token received from {source!r} yet")
        return JSONResponse({"source": source, "token": row["token"],
                             "received_at": row["received_at"].isoformat()})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Response:
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                async with db().connection(timeout=READY_TIMEOUT_SECONDS) as conn:
                    await conn.execute(_Q["ping"])
        except (TimeoutError, OSError, psycopg.Error, PoolTimeout) as exc:
            return error(503, "database_unavailable", f"database not reachable ({exc.__class__.__name__})")
        return JSONResponse({"ok": True, "database": "reachable"})

    async def metrics_route(request: Request) -> Response:
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                current = await queue.stats(db())
            metrics.jobs.clear()
            for source, counts in current["by_source"].items():
                for status in JobStatus:
                    metrics.jobs.labels(source, status.value).set(counts[status.value])
            metrics.oldest_due_age.set(current["oldest_due_age_seconds"])
        except (TimeoutError, OSError, psycopg.Error, PoolTimeout) as exc:
            log.warning("metrics: queue depth unavailable (%s)", exc.__class__.__name__)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, "not_found", f"no route {request.method} {request.url.path}")

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return error(405, "method_not_allowed", f"{request.method} not allowed on {request.url.path}")

    reported: set[tuple[str, str]] = set()

    async def server_error(request: Request, exc: Exception) -> Response:
        if is_transient(exc):
            return _db_unavailable(exc)
        # A full traceback once per route and error type; one line for each repeat, so a
        # client hammering an unauthenticated route cannot flood the log with tracebacks.
        route = request.scope.get("route")
        key = (getattr(route, "path", "?"), exc.__class__.__name__)
        if key in reported:
            log.error("unhandled error on %s %s: %s (traceback logged before)",
                      request.method, key[0], exc.__class__.__name__)
        else:
            reported.add(key)
            log.error("unhandled error on %s %s", request.method, key[0], exc_info=exc)
        return error(500, "internal_error", "unexpected error; see the service log")

    routes = [
        Route("/webhooks/{source}", webhook, methods=["POST"]),
        Route("/resync/{source}/{page_id:path}", admin(resync), methods=["POST"]),
        Route("/jobs", admin(list_jobs), methods=["GET"]),
        Route("/jobs/{job_id}", admin(get_job), methods=["GET"]),
        Route("/jobs/{job_id}/retry", admin(retry_job), methods=["POST"]),
        Route("/stats", admin(stats), methods=["GET"]),
        Route("/admin/verification-token/{source}", admin(verification_token), methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
    ]
    application = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_ErrorBoundary, handler=server_error)],
        exception_handlers={404: not_found, 405: method_not_allowed},
    )
    application.state.metrics = metrics
    application.state.settings = settings
    return application


def app_from_env() -> Starlette:
    """``uvicorn --factory debounce.web:app_from_env``: the app configured from the environment."""
    from debounce.logs import configure

    settings = Settings.from_env()
    configure(settings.log_format, settings.log_level)
    return create_app(settings)


class _LazyApp:
    """``uvicorn debounce.web:app``: builds the app from the environment on first use."""

    _app: Starlette | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            self._app = app_from_env()
        await self._app(scope, receive, send)


app = _LazyApp()
