"""Errors of the HTTP surface, raised once and mapped once.

Every error answer is JSON ``{"error": code, "detail": text}`` with the right status
(docs/design.md, "HTTP surface"): endpoints raise :class:`ApiError` (a Starlette
``HTTPException`` that carries the code), Starlette's own 404/405 arrive as ``HTTPException``
too, and :func:`http_error` renders them all. :class:`ErrorBoundary` turns anything unhandled
into a JSON 500 (or 503 when the database is unavailable) without a traceback per request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import psycopg
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from debounce.infra.db import is_transient

__all__ = [
    "ApiError",
    "ErrorBoundary",
    "db_unavailable",
    "error",
    "http_error",
    "schema_missing",
    "server_error",
]

log = logging.getLogger("debounce.web")

#: Seconds a sender is asked to wait before redelivering after a 503.
RETRY_AFTER_SECONDS = 5

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    503: "unavailable",
}


def error(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error response ``{"error": code, "detail": detail}`` with ``status``."""
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


class ApiError(HTTPException):
    """Raised by an endpoint to answer ``status`` with ``{"error": code, "detail": detail}``."""

    def __init__(self, status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.code = code


def db_unavailable(exc: BaseException) -> ApiError:
    """The 503 for a database that is unavailable (or did not commit within a deadline:
    ``TimeoutError``), with ``Retry-After`` so the sender redelivers."""
    if isinstance(exc, TimeoutError):
        log.warning("database too slow: no commit within the deadline")
        detail = "the database did not commit within the deadline; nothing was acknowledged, retry later"
    else:
        log.warning("database unavailable: %s", exc.__class__.__name__)
        detail = "the database is unavailable; nothing was recorded, retry later"
    return ApiError(503, "database_unavailable", detail, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def error_code(exc: BaseException) -> str | None:
    """The ``error`` code the boundary answers ``exc`` with when it is an expected one: an
    :class:`ApiError`'s code, ``database_unavailable`` for a transient database state (see
    :func:`server_error`); ``None`` for anything else. For counting answers by code."""
    if isinstance(exc, ApiError):
        return exc.code
    return "database_unavailable" if is_transient(exc) else None


async def http_error(request: Request, exc: Exception) -> Response:
    """Exception handler for every ``HTTPException`` (ours and Starlette's 404/405)."""
    assert isinstance(exc, HTTPException)
    code = exc.code if isinstance(exc, ApiError) else _CODES.get(exc.status_code, "error")
    detail = exc.detail
    if not isinstance(exc, ApiError):
        if exc.status_code == 404:
            detail = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            detail = f"{request.method} not allowed on {request.url.path}"
    return error(exc.status_code, code, detail, headers=dict(exc.headers) if exc.headers else None)


_reported: set[tuple[str, str]] = set()


#: SQLSTATEs of an unmigrated schema: undefined table, column, function (PostgreSQL manual,
#: Appendix A).
SCHEMA_SQLSTATES = frozenset({"42P01", "42703", "42883"})


def schema_missing(exc: BaseException) -> ApiError | None:
    """The 503 for a database whose schema lacks what this release uses, else ``None``."""
    if isinstance(exc, psycopg.Error) and exc.sqlstate in SCHEMA_SQLSTATES:
        log.error("database schema is not migrated: %s", str(exc).strip().splitlines()[0])
        return ApiError(
            503,
            "schema_not_migrated",
            "the database schema is older than this release: run `debounce migrate` "
            "(the Procfile's release phase); nothing was recorded",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return None


async def server_error(request: Request, exc: Exception) -> Response:
    """The answer to an unhandled exception: 503 for a database that is unavailable or not
    migrated, else a JSON 500. Its traceback is logged once per route and error type, then one
    line per repeat, so a client hammering an unauthenticated route cannot flood the log."""
    if is_transient(exc):
        return await http_error(request, db_unavailable(exc))
    missing = schema_missing(exc)
    if missing is not None:
        return await http_error(request, missing)
    route = request.scope.get("route")
    key = (str(getattr(route, "path", "?")), exc.__class__.__name__)
    if key in _reported:
        log.error(
            "unhandled error on %s %s: %s (traceback logged before)",
            request.method,
            key[0],
            exc.__class__.__name__,
        )
    else:
        _reported.add(key)
        log.error("unhandled error on %s %s", request.method, key[0], exc_info=exc)
    return error(500, "internal_error", "unexpected error; see the service log")


class ErrorBoundary:
    """ASGI middleware that turns an unhandled exception into ``handler``'s response and stops
    it there. (Starlette's own 500 handler answers but then re-raises, so the server logs a
    full traceback for every such request.) An exception after the response started is
    re-raised: nothing else can be sent then."""

    def __init__(self, app: ASGIApp, handler: Callable[[Request, Exception], Awaitable[Response]]) -> None:
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
