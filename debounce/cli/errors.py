"""The CLI's error boundary: every error a command ends with becomes one line on stderr and a
non-zero exit code, never a traceback (see :func:`one_line`)."""

from __future__ import annotations

import logging
import sys

import httpx
import psycopg
from psycopg_pool import PoolTimeout

from debounce.contract import SyncError
from debounce.infra.db import unreachable_reason
from debounce.infra.secrets import SecretKeyError

__all__ = ["CliError", "cannot_connect", "fail", "one_line", "report", "unreachable"]

log = logging.getLogger("debounce.cli")


class CliError(Exception):
    """An expected failure of a command: ``message`` (one line, said as is) and the exit
    ``code`` (2: configuration or usage, 1: anything else)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = 1) -> int:
    """Say ``message`` (one line) on stderr; returns the exit ``code`` (2: configuration or
    usage, 1: anything else) for the command to return."""
    print(message, file=sys.stderr)
    return code


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def cannot_connect(exc: BaseException) -> bool:
    """Whether ``exc`` is a database that could not be reached at all (refused, unknown host,
    timed out, authentication refused: libpq's errors, which carry no SQLSTATE, and a pool
    that got no connection), not an error of a statement."""
    if isinstance(exc, PoolTimeout):
        return True
    return isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None


def unreachable(exc: BaseException, database: str) -> str:
    """``exc`` (see :func:`cannot_connect`) in one line naming ``database``, the setting or
    place the URL came from (``DATABASE_URL``)."""
    why = unreachable_reason(exc) or _first_line(exc)  # a PoolTimeout: its own words
    return f"cannot connect to the database at {database}: {why}"


def one_line(exc: Exception, database: str = "DATABASE_URL") -> tuple[str, int]:
    """The line to print for ``exc`` and the exit code: 2 for a configuration error, 1 for
    the rest (the database unreachable — named by ``database``, where its URL came from — a
    source refusing a token or unreachable, a port in use, an unexpected error — named by
    its type, the traceback only at ``DEBOUNCE_LOG_LEVEL=DEBUG``)."""
    if isinstance(exc, CliError):
        return exc.message, exc.code
    if isinstance(exc, SecretKeyError):
        return f"configuration error: {exc}", 2
    if cannot_connect(exc):
        return f"database error: {unreachable(exc, database)}", 1
    if isinstance(exc, psycopg.OperationalError):
        return f"database error: {_first_line(exc)}", 1
    if isinstance(exc, psycopg.Error):
        return f"database error: {exc.__class__.__name__}: {_first_line(exc)}", 1
    if isinstance(exc, SyncError):  # AuthRevoked: a source refused the token
        return f"error: {_first_line(exc)}", 1
    if isinstance(exc, httpx.HTTPError):
        try:
            where = f" {exc.request.url}"
        except RuntimeError:  # no request attached
            where = ""
        return f"error: cannot reach{where}: {_first_line(exc)}", 1
    if isinstance(exc, OSError):
        return f"error: {_first_line(exc)}", 1
    return (f"error: {exc.__class__.__name__}: {_first_line(exc)} (DEBOUNCE_LOG_LEVEL=DEBUG shows where)"), 1


def report(exc: Exception, database: str = "DATABASE_URL") -> int:
    """Print ``exc`` as one line on stderr (its traceback too when the log level is DEBUG);
    ``database``: where the database's URL came from (:func:`one_line`). Returns the exit
    code."""
    message, code = one_line(exc, database)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("the error's traceback", exc_info=exc)
    print(message, file=sys.stderr)
    return code
