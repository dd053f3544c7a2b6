"""Helpers every source's API client needs: ``Retry-After`` parsing and counting each request
sent (for the service's metrics). Part of the contract (:mod:`debounce.contract`).

:func:`count_api_request` calls whatever counters the service registered with
:func:`on_api_request` (``debounce.infra.metrics`` registers the Prometheus counters when it is
imported); with none registered it does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

__all__ = ["count_api_request", "on_api_request", "parse_retry_after"]

_COUNTERS: list[Callable[[str, int | str], None]] = []


def on_api_request(counter: Callable[[str, int | str], None]) -> None:
    """Register ``counter(source, status)``, called for every API request a source sends."""
    if counter not in _COUNTERS:
        _COUNTERS.append(counter)


def count_api_request(source: str, status: int | str) -> None:
    """Count one request sent to ``source``'s API and its HTTP ``status`` (``"error"`` when
    none came back). The sources call this at the one place each sends requests."""
    for counter in _COUNTERS:
        counter(source, status)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` of a response as seconds from ``now`` (Unix seconds, default the
    current time): delta-seconds or an HTTP date (RFC 9110 §10.2.3); ``None`` when absent or
    unreadable. Never negative. Header lookup is case-insensitive.
    """
    if headers is None:
        return None
    raw = headers.get("retry-after") or headers.get("Retry-After")
    if raw is None:
        raw = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, moment - (time.time() if now is None else now))
