"""Signing in to the dashboard: the session cookie, the CSRF token, form bodies, login and logout.

- **Sign-in** is the admin token (``DEBOUNCE_ADMIN_TOKEN``) typed into a form, compared with
  ``hmac.compare_digest``. While the token is unset every dashboard page answers 503 saying
  how to enable it.
- **The session** is Starlette's signed cookie (``SessionMiddleware``, itsdangerous), named
  ``debounce_session``, path the dashboard's, ``HttpOnly``, ``SameSite=Strict``, valid
  :data:`SESSION_MAX_AGE` seconds after it was last written. Its signing key is an HMAC of a
  constant with the admin token (:func:`session_key`): no new setting, and changing the token
  signs everyone out. It is ``Secure`` when the request came over HTTPS (uvicorn takes the
  scheme from ``X-Forwarded-Proto`` of a trusted proxy, ``FORWARDED_ALLOW_IPS``) or when
  ``DEBOUNCE_DASHBOARD_SECURE_COOKIE`` is set (a proxy that does not forward the scheme); over
  plain HTTP (loopback, tests) a ``Secure`` cookie would never come back.
- **CSRF**: every session carries a random token; every form has it in a hidden field and
  every POST is checked (:func:`checked_form`); a missing or wrong one is a 403 page. Login
  is a POST too: the login page gives the anonymous session its token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import parse_qsl

from starlette.datastructures import URL
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from debounce.web.dashboard.render import LoginRequired, base_path, flash, page
from debounce.web.errors import ApiError
from debounce.web.state import WebState, web_state

__all__ = [
    "SESSION_COOKIE",
    "SESSION_MAX_AGE",
    "DashboardSessions",
    "admin_enabled",
    "checked_form",
    "ensure_csrf",
    "login",
    "login_form",
    "logout",
    "safe_next",
    "session_key",
    "signed_in",
]

SESSION_COOKIE = "debounce_session"
#: Seconds a session stays valid after it was last written (sign-in, an action, a message).
SESSION_MAX_AGE = 12 * 3600
#: Largest form body accepted, bytes (the dashboard's forms are a few fields).
MAX_FORM_BYTES = 16 * 1024
_KEY_LABEL = b"debounce dashboard session v1"


def session_key(admin_token: str | None) -> str:
    """The session cookie's signing key: hex HMAC-SHA256 of a constant keyed with
    ``admin_token``; a random key when the token is unset (nobody can sign in then)."""
    if not admin_token:
        return secrets.token_hex(32)
    return hmac.new(admin_token.encode("utf-8"), _KEY_LABEL, hashlib.sha256).hexdigest()


class DashboardSessions:
    """ASGI middleware: Starlette's ``SessionMiddleware`` with the cookie's ``Secure`` flag
    chosen per request (HTTPS, or always when ``force_secure``); see the module docstring."""

    def __init__(
        self, app: ASGIApp, *, admin_token: str | None, path: str = "/admin", force_secure: bool = False
    ) -> None:
        key = session_key(admin_token)

        def sessions(https_only: bool) -> SessionMiddleware:
            return SessionMiddleware(
                app,
                secret_key=key,
                session_cookie=SESSION_COOKIE,
                max_age=SESSION_MAX_AGE,
                path=path,
                same_site="strict",
                https_only=https_only,
            )

        self.secure = sessions(True)
        self.plain = sessions(False)
        self.force_secure = force_secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        secure = self.force_secure or scope.get("scheme") in ("https", "wss")
        await (self.secure if secure else self.plain)(scope, receive, send)


def admin_enabled(request: Request) -> WebState:
    """The app's state, if the dashboard is enabled.

    Raises:
        ApiError: 503 ``admin_disabled`` (rendered as a page) while ``DEBOUNCE_ADMIN_TOKEN``
            is unset.
    """
    state = web_state(request)
    if not state.settings.admin_token:
        raise ApiError(
            503,
            "admin_disabled",
            "The dashboard is disabled because no admin token is configured. Set "
            "DEBOUNCE_ADMIN_TOKEN in the web process's environment and restart it, "
            "then sign in here with that token.",
        )
    return state


def signed_in(request: Request) -> WebState:
    """The app's state, if ``request`` belongs to a signed-in session.

    Raises:
        ApiError: 503 while the dashboard is disabled.
        LoginRequired: no signed-in session (answered with a redirect to the login form).
    """
    state = admin_enabled(request)
    if request.session.get("auth") is not True:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(path)
    return state


def ensure_csrf(request: Request) -> str:
    """This session's CSRF token, created (32 random bytes, URL-safe) when it has none."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


async def _form(request: Request) -> dict[str, str]:
    """The fields of an ``application/x-www-form-urlencoded`` body (the last value of a field
    given twice); an empty mapping for any other content type.

    Raises:
        ApiError: 413 past :data:`MAX_FORM_BYTES`.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ApiError(413, "payload_too_large", f"a form is at most {MAX_FORM_BYTES} bytes")
    if kind != "application/x-www-form-urlencoded":
        return {}
    pairs = parse_qsl(
        body.decode("latin-1"), keep_blank_values=True, max_num_fields=50, encoding="utf-8", errors="replace"
    )
    return dict(pairs)


async def checked_form(request: Request) -> dict[str, str]:
    """The form of a POST whose ``csrf_token`` field matches the session's token.

    Raises:
        ApiError: 403 ``csrf`` when the token is missing or wrong; 413 for a body too large.
    """
    form = await _form(request)
    expected = request.session.get("csrf")
    given = form.get("csrf_token", "")
    if (
        not isinstance(expected, str)
        or not expected
        or not given
        or not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))
    ):
        raise ApiError(
            403,
            "csrf",
            "This form is missing its CSRF token, or the token belongs to "
            "another session. Reload the page and try again.",
        )
    return form


def safe_next(request: Request, value: str | None) -> str:
    """``value`` when it is a path under the dashboard (no scheme, host or ``//``), else the
    overview: where to go after signing in or after an action (no open redirect)."""
    base = base_path(request)
    if (
        value
        and value.startswith(base + "/")
        and "//" not in value
        and "\\" not in value
        and not any(ord(c) < 32 for c in value)
    ):
        return value
    return base + "/"


async def login_form(request: Request) -> Response:
    """``GET /admin/login``: the sign-in form (503 page while the dashboard is disabled)."""
    admin_enabled(request)
    ensure_csrf(request)
    return page(
        request, "login.html", {"next": safe_next(request, request.query_params.get("next")), "error": None}
    )


async def login(request: Request) -> Response:
    """``POST /admin/login`` (``token``, ``next``, ``csrf_token``): a right token starts a new
    session (fresh CSRF token) and redirects to ``next``; a wrong one answers 401 with the
    form again."""
    state = admin_enabled(request)
    form = await checked_form(request)
    expected = state.settings.admin_token
    assert expected
    token = form.get("token", "").strip()
    if not token or not hmac.compare_digest(token.encode("utf-8", "replace"), expected.encode()):
        return page(
            request,
            "login.html",
            {"next": safe_next(request, form.get("next")), "error": "Wrong admin token."},
            status=401,
        )
    request.session.clear()
    request.session["auth"] = True
    ensure_csrf(request)
    flash(request, "ok", "Signed in.")
    return RedirectResponse(str(URL(safe_next(request, form.get("next")))), status_code=303)


async def logout(request: Request) -> Response:
    """``POST /admin/logout`` (``csrf_token``): ends the session, back to the login form."""
    admin_enabled(request)
    await checked_form(request)
    request.session.clear()
    flash(request, "ok", "Signed out.")
    return RedirectResponse(f"{base_path(request)}/login", status_code=303)
