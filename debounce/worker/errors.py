"""How the worker's loops report a database error: one line for a database that is away,
a traceback for anything else (a bug, which must not kill the loop either)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from debounce.infra.db import is_transient

__all__ = ["log_db_error", "stop_if_cancelled"]

log = logging.getLogger("debounce.worker")


def log_db_error(what: str, exc: Exception, delay: float | None = None, **extra: Any) -> None:
    """Log that ``what`` failed with ``exc`` (and is retried in ``delay`` seconds).

    Raises:
        asyncio.CancelledError: the calling task is being cancelled (a shutdown): the
            database driver can turn the cancellation of a statement into another error,
            which a loop that logs and goes on would otherwise swallow, never to stop.
    """
    stop_if_cancelled()
    retry = f"; retrying in {delay:.1f} s" if delay is not None else ""
    if is_transient(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        log.warning(
            "database unavailable: %s (%s: %s)%s", what, exc.__class__.__name__, first, retry, extra=extra
        )
    else:
        log.error("unexpected error: %s%s", what, retry, exc_info=exc, extra=extra)


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if the calling task is being cancelled. The loops beside the
    claim loop call it before they sleep: on Python 3.11 a cancellation that arrives while
    the connection pool hands over a connection can be lost inside ``asyncio.wait_for`` (the
    task stays "cancelling" and sleeps on, and the shutdown that awaits it never ends).

    Raises:
        asyncio.CancelledError: the task is being cancelled.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
