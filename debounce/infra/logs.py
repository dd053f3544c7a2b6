"""Logging setup: plain text or JSON lines (``DEBOUNCE_LOG_FORMAT=json``).

Log lines about a job pass ``extra=job.log_fields()`` so they carry ``job_id``, ``source`` and
``page``; the JSON formatter emits every such extra field.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "TextFormatter", "configure", "escape_controls"]

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


#: C0 and C1 control characters (newline included) and the Unicode line/paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``, ``\\u2028``), so
    text from a request can never start a forged log line or drive a terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (ISO 8601 UTC), ``level``, ``logger``, ``msg``, the
    record's extra fields, and ``exc`` when an exception is attached."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value …`` with the record's extra fields appended."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The first line; the message and the extra fields have their control characters
        escaped (:func:`escape_controls`): one record is one line, whatever a request sent.
        A traceback (``exc_info``) still follows on its own lines."""
        record.message = escape_controls(record.message)
        line = super().formatMessage(record)
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={escape_controls(str(v))}" for k, v in extras.items())
        return line


def _libpq_in_one_line(record: logging.LogRecord) -> bool:
    """A filter of ``psycopg.pool``'s records: libpq's message continues on tab-indented
    lines ("…Connection refused\\n\\tIs the server running…"), which the text format would
    show as a literal ``\\n\\t``; they are joined with "; " instead."""
    message = record.getMessage()
    if "\n" in message:
        record.msg = "; ".join(part.strip() for part in message.splitlines() if part.strip())
        record.args = ()
    return True


def configure(log_format: str = "text", level: str = "INFO") -> None:
    """Route the root logger to stderr in ``log_format`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "psycopg.pool", "uvicorn.access", "pgserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    pool_log = logging.getLogger("psycopg.pool")
    if _libpq_in_one_line not in pool_log.filters:
        pool_log.addFilter(_libpq_in_one_line)
