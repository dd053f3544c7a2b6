"""How the dashboard answers: the Jinja2 templates (``debounce/web/dashboard/templates/``, autoescaped),
their filters, the page helper that adds what every page shows (navigation, flash messages,
the CSRF token), the HTML error pages, and the security headers of every answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from debounce.web.errors import server_error

__all__ = [
    "LoginRequired",
    "SecurityHeaders",
    "base_path",
    "flash",
    "html_error",
    "html_server_error",
    "login_required",
    "page",
    "templates",
]

log = logging.getLogger("debounce.web")

#: Headers on every dashboard answer. The CSP allows no script at all (the dashboard has
#: none), styles only inline (the base template's), images from https (a document's
#: Markdown may show some), and forms posting only to ourselves.
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' https: data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def _ts(value: datetime | str | None) -> str:
    """``2024-05-01 12:03:04 UTC``, or an em dash for ``None``; ``value``: a time, or its ISO
    8601 text with an offset (as the backfill's progress carries it)."""
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(value: float | None) -> str:
    """A duration in seconds for people: ``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60)} s"
    if value < 86400:
        return f"{int(value // 3600)} h {int(value % 3600 // 60)} min"
    return f"{int(value // 86400)} d {int(value % 86400 // 3600)} h"


def _window(seconds: float) -> str:
    """A window length for a heading: ``7 days``, ``1 day``, ``6 h``, else as :func:`_seconds`."""
    if seconds >= 86400 and seconds % 86400 == 0:
        days = int(seconds // 86400)
        return f"{days} day{'s' if days != 1 else ''}"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    return _seconds(seconds)


def _seconds_param(seconds: float) -> str:
    """A number of seconds for a query string (``finished_within``): ``604800``, ``0.5``."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{seconds:.6f}".rstrip("0")


def _ago(value: datetime | None) -> str:
    """How long ago ``value`` was (``in …`` for a future time), or an em dash."""
    if value is None:
        return "—"
    delta = (datetime.now(UTC) - value).total_seconds()
    return f"{_seconds(delta)} ago" if delta >= 0 else f"in {_seconds(-delta)}"


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("debounce.web.dashboard", "templates"),
        autoescape=True,  # every value is escaped unless marked safe (only rendered Markdown is)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ts=_ts,
        ago=_ago,
        seconds=_seconds,
        window=_window,
        seconds_param=_seconds_param,
        pretty_json=_pretty_json,
    )
    return env


#: The dashboard's templates (``debounce/web/dashboard/templates/*.html``).
templates = Jinja2Templates(env=_environment())


def base_path(request: Request) -> str:
    """Where the dashboard is mounted, as seen by the browser (``/admin``, or with the app's
    own root path before it)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def flash(request: Request, level: str, text: str) -> None:
    """Keep a message (``level``: ``ok`` or ``error``) for the next page this session sees."""
    messages = list(request.session.get("flash", []))[-4:]
    messages.append([level, text])
    request.session["flash"] = messages


def page(
    request: Request, name: str, context: Mapping[str, Any] | None = None, *, status: int = 200
) -> Response:
    """Render template ``name`` with ``context`` plus what every page uses: ``base`` (the
    mount path), ``csrf_token``, ``signed_in``, ``flashes`` (taken from the session) and
    ``nav`` (the current screen)."""
    session = request.session if "session" in request.scope else {}
    flashes = session.pop("flash", []) if session else []
    full = {
        "base": base_path(request),
        "csrf_token": session.get("csrf", ""),
        "signed_in": bool(session.get("auth")),
        "flashes": flashes,
        "nav": "",
        **(context or {}),
    }
    return templates.TemplateResponse(request, name, full, status_code=status)


class LoginRequired(Exception):
    """Raised by a screen for a request without a signed-in session: the answer is a redirect
    to the login form, which comes back to ``next`` afterwards."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


async def login_required(request: Request, exc: Exception) -> Response:
    """Exception handler for :class:`LoginRequired`: 303 to ``<base>/login?next=…``."""
    assert isinstance(exc, LoginRequired)
    url = request.url.replace(path=f"{base_path(request)}/login", query="")
    return RedirectResponse(str(url.include_query_params(next=exc.next_path)), status_code=303)


_TITLES = {
    400: "Bad request",
    401: "Not signed in",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    500: "Internal error",
    503: "Unavailable",
}


def error_page(
    request: Request, status: int, detail: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The HTML error page: ``status`` with its title and ``detail`` (escaped)."""
    response = page(
        request,
        "error.html",
        {"status": status, "title": _TITLES.get(status, "Error"), "detail": detail},
        status=status,
    )
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


async def html_error(request: Request, exc: Exception) -> Response:
    """Exception handler for every ``HTTPException`` under the dashboard (our ``ApiError``\\ s,
    Starlette's 404/405): the HTML error page with the same status."""
    assert isinstance(exc, HTTPException)
    detail = exc.detail
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"nothing at {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return error_page(request, exc.status_code, detail, exc.headers)


async def html_server_error(request: Request, exc: Exception) -> Response:
    """The answer to an unhandled exception under the dashboard: the service's one mapping
    (:func:`debounce.web.errors.server_error`: 503 when the database is unavailable, else
    500, the traceback logged once), as an HTML page."""
    mapped = await server_error(request, exc)
    try:
        detail = str(json.loads(bytes(mapped.body))["detail"])
    except (ValueError, KeyError, TypeError):
        detail = "unexpected error; see the service log"
    retry_after = mapped.headers.get("retry-after")
    return error_page(
        request, mapped.status_code, detail, {"Retry-After": retry_after} if retry_after else None
    )


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP answer it passes on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)
