"""The HTTP surface (Starlette), split by surface: :mod:`.app` (factory, lifespan),
:mod:`.webhooks`, :mod:`.admin_api`, :mod:`.health`, :mod:`.errors` (one JSON error mapping).

Errors are JSON ``{"error": "...", "detail": "..."}``: 400 malformed, 401 bad or stale
signature / admin token, 404 unknown source or job, 409 conflict, 413 body too large, 503
database unavailable or feature not configured. A refused request writes nothing.

``uvicorn debounce.web:app`` serves an app configured from the environment.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette

from debounce.config import Settings
from debounce.web.app import create_app
from debounce.web.errors import error

__all__ = ["app", "app_from_env", "create_app", "error"]


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
