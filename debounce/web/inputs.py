"""What every route checks of its inputs before anything reaches Postgres.

- :class:`ControlCharacterGuard`: a path or query parameter holding a control character (a NUL
  byte above all: Postgres text cannot hold one, and psycopg refuses to send it) is answered
  400 naming the parameter, for every route of the API at once, instead of a 500 from the
  database driver deep inside an endpoint (the dashboard, a mounted app, checks its own
  parameters and answers with pages).
- :func:`source_param`: a ``{source}`` (or ``source=``) outside the registry is answered 400
  naming the parameter and the known sources.

Page ids are each source's business (:meth:`debounce.contract.Source.page_id`): the routes
that take one call it and answer its ``ValueError`` with 400.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from debounce.web.errors import ApiError

__all__ = ["ControlCharacterGuard", "source_param"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def source_param(
    sources: Collection[str], raw: str | None, name: str = "source", *, code: str = "unknown_source"
) -> str:
    """``raw`` if it names a registered source.

    Raises:
        ApiError: 400 ``code`` (``unknown_source`` for a path's ``{source}``; the query
            parameters of the read API answer ``bad_request``, as their other parameters do)
            naming ``name`` and the known sources.
    """
    if raw is None or raw not in sources:
        shown = "" if raw is None else raw[:80]
        raise ApiError(
            400, code, f"{name} must be one of {', '.join(sorted(sources)) or 'no source'}, got {shown!r}"
        )
    return raw


def _path_parameter(routes: Iterable[BaseRoute], scope: Scope) -> str | None:
    """The name of the path parameter of the route matching ``scope`` that holds a control
    character (``None``: no route's parameter does)."""
    for route in routes:
        match, child = route.matches(scope)
        if match is not Match.FULL:
            continue
        for name, value in child.get("path_params", {}).items():
            if isinstance(value, str) and _CONTROL.search(value):
                return str(name)
        if isinstance(route, Mount):
            inner = _path_parameter(route.routes, {**scope, **child})
            if inner is not None:
                return inner
        return None
    return None


class ControlCharacterGuard:
    """ASGI middleware: 400 ``bad_request`` for a request whose path or query parameters hold
    a control character (U+0000–U+001F, U+007F), naming the parameter; other requests pass
    untouched. ``routes``: the app's routes, to name a path parameter."""

    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]) -> None:
        self.app = app
        self.routes = list(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            detail = self._refusal(scope)
            if detail is not None:
                response = JSONResponse({"error": "bad_request", "detail": detail}, status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> str | None:
        query = scope.get("query_string", b"").decode("latin-1")
        detail = None
        if query:
            for key, value in parse_qsl(query, keep_blank_values=True):
                if _CONTROL.search(key) or _CONTROL.search(value):
                    detail = f"query parameter {key[:80]!r} must not contain control characters (such as %00)"
                    break
        if detail is None and _CONTROL.search(scope.get("path", "")):
            name = _path_parameter(self.routes, scope)
            where = f"path parameter {name!r}" if name else "the path"
            detail = f"{where} must not contain control characters (such as %00)"
        if detail is None:  # the common case: no route matched here (the router does it)
            return None
        for route in self.routes:  # the route that will answer: the first that matches
            if route.matches(scope)[0] is Match.FULL:
                if isinstance(route, Mount):
                    return None  # a mounted app (the dashboard) renders its own 4xx pages
                break
        return detail
