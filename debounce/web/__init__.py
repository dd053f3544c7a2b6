"""The HTTP surface (Starlette), split by surface: :mod:`.factory` (app factory, lifespan,
routes), :mod:`.webhooks`, :mod:`.admin_api`, :mod:`.health`, :mod:`.errors` (one JSON error
mapping), :mod:`.state`.

Errors are JSON ``{"error": "...", "detail": "..."}``: 400 malformed, 401 bad or stale
signature / admin token, 404 unknown source or job, 409 conflict, 413 body too large, 503
database unavailable, schema not migrated, or feature not configured. A refused request writes
nothing.

``uvicorn debounce.web:app`` (the Procfile's ``web``) serves an app configured from the
environment, built when uvicorn imports it — before it binds the port — so a configuration
error is one line on stderr and exit code 2, not a server answering 500.
"""

from __future__ import annotations

import sys
from typing import Any

from starlette.applications import Starlette

from debounce.config import Settings
from debounce.web.errors import error
from debounce.web.factory import create_app

__all__ = ["app", "app_from_env", "create_app", "error"]


def app_from_env() -> Starlette:
    """The app configured from the environment (``uvicorn --factory debounce.web:app_from_env``
    works too).

    Raises:
        SystemExit: (code 2) a setting is malformed or ``DATABASE_URL`` is unset; the reason
            is printed as one line on stderr.
    """
    from debounce.infra.logs import configure

    try:
        settings = Settings.from_env()
        if not settings.database_url:
            raise ValueError(
                "DATABASE_URL is not set (`debounce serve` starts an embedded "
                "Postgres; the web process needs the service's database)"
            )
        configure(settings.log_format, settings.log_level)
        return create_app(settings, freeze_heap=True)
    except ValueError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def __getattr__(name: str) -> Any:
    """``debounce.web.app``: built from the environment on first access (uvicorn's import)."""
    if name == "app":
        built = app_from_env()
        globals()["app"] = built
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
