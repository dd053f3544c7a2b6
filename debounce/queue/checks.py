"""What the queue accepts: limits of ids and payloads, argument checks. Every check raises
``ValueError`` naming the argument, before anything is sent to the database."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime

import orjson

from debounce.types import JobEvent

__all__ = [
    "MAX_BIGINT",
    "MAX_ERROR_CHARS",
    "MAX_KEY_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "NOTIFY_CHANNEL",
    "RESYNC_PRIORITY",
    "check_payload",
    "payload_text",
    "unstorable",
    "validate_event",
]

#: LISTEN/NOTIFY channel on which a job that becomes due *now* is announced (payload: source).
NOTIFY_CHANNEL = "debounce_jobs"
#: Priority of a manual re-sync (webhook events default to 0; higher is claimed first).
RESYNC_PRIORITY = 100
#: Longest text kept in ``last_error``.
MAX_ERROR_CHARS = 2000
#: Longest source type, page id or event id accepted, in UTF-8 bytes. They are index keys
#: (``sync_jobs_active_page``, ``seen_events``, ``documents``), and a B-tree entry must fit in
#: a third of a page (about 2 700 bytes, PostgreSQL's ``ProgramLimitExceeded`` beyond): the
#: sources' ids are far shorter (UUIDs, short opaque ids).
MAX_KEY_BYTES = 512
#: Deepest JSON nesting accepted in a payload (PostgreSQL's jsonb parser recurses, and a
#: body nested thousands deep exhausts its stack).
MAX_PAYLOAD_DEPTH = 64
#: Largest value of a bigint column (job ids, cursors).
MAX_BIGINT = 2**63 - 1


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store ``text`` (a NUL character, which ``text`` and ``jsonb``
    refuse; a lone surrogate, which is not valid UTF-8), or ``None`` when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
    return None


def check_text(name: str, value: object, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    problem = unstorable(value)
    if problem:
        raise ValueError(f"{name} {problem}")
    if max_bytes is not None and len(value.encode("utf-8")) > max_bytes:
        raise ValueError(f"{name} is longer than {max_bytes} bytes")
    return value


def check_payload(payload: object) -> None:
    """Check that ``payload`` (parsed JSON) can be stored as ``jsonb``: every key and string
    storable (:func:`unstorable`), nesting at most :data:`MAX_PAYLOAD_DEPTH`. Iterative, so a
    hostile depth cannot exhaust Python's stack either. The common case (nothing wrong) costs
    one walk that only collects the strings, checked together; the path of a problem is
    worked out only when there is one.

    Raises:
        ValueError: names the first problem and where it is (a JSON path such as ``$.event.text``).
    """
    strings: list[str] = []
    stack: list[tuple[object, int]] = [(payload, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, Mapping):
            if depth >= MAX_PAYLOAD_DEPTH:
                _locate(payload)
            strings.extend(str(k) for k in value)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            if depth >= MAX_PAYLOAD_DEPTH:
                _locate(payload)
            stack.extend((item, depth + 1) for item in value)
    if unstorable("".join(strings)):
        _locate(payload)


def payload_text(payload: Mapping[str, object]) -> str:
    """``payload`` as the JSON text the database stores (``jsonb``), checked as
    :func:`check_payload` checks it: the payload is serialised once, here, and that text is what
    the statement sends (the database parses it into ``jsonb``; nothing is re-serialised).

    The common case costs one ``orjson.dumps`` and two byte counts, no walk of the payload:
    orjson refuses a lone surrogate, a NUL character shows as ``\\u0000`` in the text, and the
    nesting depth is at most the number of ``[`` and ``{`` in the text. Only when one of these
    does not clear the payload is the walk of :func:`check_payload` run, which names the
    problem (or finds none: a ``\\u0000`` written inside a string, brackets in text).

    Raises:
        ValueError: as :func:`check_payload`.
        TypeError: a value JSON cannot represent (as ``json.dumps`` raises it).
    """
    if not isinstance(payload, dict):
        payload = dict(payload)
    try:
        text = orjson.dumps(payload)
    except (orjson.JSONEncodeError, TypeError):
        # A lone surrogate, nesting orjson refuses, a key that is not a string, a type orjson
        # does not know: the walk names a storage problem; else ``json.dumps`` decides.
        check_payload(payload)
        return json.dumps(payload)
    if b"\\u0000" in text or text.count(b"{") + text.count(b"[") > MAX_PAYLOAD_DEPTH:
        check_payload(payload)
    return text.decode()


def _locate(payload: object) -> None:
    """Raise the ``ValueError`` that names where ``payload`` is unstorable (the slow walk)."""
    stack: list[tuple[object, str, int]] = [(payload, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_PAYLOAD_DEPTH:
            raise ValueError(f"payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels at {path}")
        if isinstance(value, str):
            problem = unstorable(value)
            if problem:
                raise ValueError(f"payload text at {path} {problem}")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                problem = unstorable(str(key))
                if problem:
                    raise ValueError(f"payload key under {path} {problem}")
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def check_seconds(name: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} seconds, got {value!r}")
    return float(value)


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def check_now(now: datetime | None) -> datetime | None:
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    return now


def validate_event(event: JobEvent, *, payload: bool = True) -> None:
    """Check one event before it is sent (``payload=False``: all but the payload, which
    :func:`payload_text` checks while serialising it; an event carrying ``payload_json`` was
    checked so already).

    Raises:
        ValueError: empty source or page id, empty event id, an id longer than
            :data:`MAX_KEY_BYTES`, text the database cannot store (NUL, lone surrogates) in an
            id or anywhere in the payload, payload not a dict or nested too deep, negative or
            non-finite window, priority not an int, max_attempts < 1.
    """
    check_text("source_type", event.source_type, max_bytes=MAX_KEY_BYTES)
    check_text("source_page_id", event.source_page_id, max_bytes=MAX_KEY_BYTES)
    if event.event_id is not None:
        check_text("event_id", event.event_id, max_bytes=MAX_KEY_BYTES)
    if not isinstance(event.payload, Mapping):
        raise ValueError(f"payload must be a JSON object (dict), got {type(event.payload).__name__}")
    if payload and event.payload_json is None:
        check_payload(event.payload)
    check_seconds("debounce_seconds", event.debounce_seconds)
    check_seconds("max_wait_seconds", event.max_wait_seconds)
    check_int("priority", event.priority)
    check_int("max_attempts", event.max_attempts, minimum=1)
    for kind in event.kinds:
        if not isinstance(kind, str) or not kind or "," in kind or len(kind) > 40:
            raise ValueError(f"a change kind must be 1 to 40 characters without a comma, got {kind!r}")
        check_text("kind", kind, max_bytes=40)
