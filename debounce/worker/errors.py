"""How the worker's loops report a database error: one line for a database that is away,
a traceback for anything else (a bug, which must not kill the loop either)."""

from __future__ import annotations

import logging
from typing import Any

from debounce.db import is_transient

__all__ = ["log_db_error"]

log = logging.getLogger("debounce.worker")


def log_db_error(what: str, exc: Exception, delay: float | None = None, **extra: Any) -> None:
    """Log that ``what`` failed with ``exc`` (and is retried in ``delay`` seconds)."""
    retry = f"; retrying in {delay:.1f} s" if delay is not None else ""
    if is_transient(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        log.warning("database unavailable: %s (%s: %s)%s", what, exc.__class__.__name__, first,
                    retry, extra=extra)
    else:
        log.error("unexpected error: %s%s", what, retry, exc_info=exc, extra=extra)
