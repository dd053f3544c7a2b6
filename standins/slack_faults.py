"""Injected failures of the Slack stand-in (mixed into :class:`standins.slack_api.FakeSlack`).

A queued :class:`Fault` answers the next call of its method, as Slack would on a bad day: an
error as HTTP 200 ``{"ok": false, "error": "<code>"}`` (https://docs.slack.dev/apis/web-api/#responses),
rate limiting as HTTP 429 with ``Retry-After`` in seconds and ``{"ok": false, "error":
"ratelimited"}`` (https://docs.slack.dev/apis/web-api/rate-limits), an outage as a 5xx with an
HTML body from Slack's edge.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from starlette.responses import JSONResponse, Response

__all__ = ["Fault", "SlackFaults"]


@dataclass(frozen=True)
class Fault:
    """One injected failure of the next call of a method.

    ``status`` is the HTTP status (200 for an ``{"ok": false}`` error, 429, 5xx);
    ``error`` the Slack error code of the JSON body (``None``: an HTML body, as a gateway
    error has); ``retry_after`` the ``Retry-After`` header in seconds (429 only).
    """

    status: int
    error: str | None
    retry_after: int | None = None
    #: Calls of the method answered normally before this fault fires.
    after: int = 0


class SlackFaults:
    """Fault injection of :class:`~standins.slack_api.FakeSlack` (which provides the queue
    and the lock)."""

    _faults: dict[str, deque[Fault]]
    _lock: threading.RLock

    def _queue(self, method: str, fault: Fault, times: int) -> None:
        with self._lock:
            q = self._faults.setdefault(method, deque())
            q.append(fault)
            for _ in range(times - 1):
                q.append(Fault(fault.status, fault.error, fault.retry_after))

    def rate_limit(self, method: str, retry_after: int = 20, *, times: int = 1, after: int = 0) -> None:
        """``times`` calls of ``method`` answer 429 ``ratelimited`` with
        ``Retry-After: <retry_after>`` (seconds), after ``after`` normal calls."""
        self._queue(method, Fault(429, "ratelimited", retry_after, after), times)

    def fail(self, method: str, error: str, *, times: int = 1, after: int = 0) -> None:
        """``times`` calls of ``method`` (after ``after`` normal ones) answer HTTP 200
        ``{"ok": false, "error": error}`` (e.g. ``invalid_auth``, ``channel_not_found``)."""
        self._queue(method, Fault(200, error, None, after), times)

    def server_error(self, method: str, status: int = 500, *, times: int = 1, after: int = 0) -> None:
        """``times`` calls of ``method`` (after ``after`` normal ones) answer ``status``
        with an HTML body, as Slack's edge does on an outage."""
        self._queue(method, Fault(status, None, None, after), times)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    def _injected(self, method: str) -> Response | None:
        """The answer of the fault due for this call of ``method`` (counting down the ``after``
        of the one queued first), or ``None``. Called with the lock held."""
        q = self._faults.get(method)
        if not q:
            return None
        if q[0].after > 0:
            head = q[0]
            q[0] = Fault(head.status, head.error, head.retry_after, head.after - 1)
            return None
        fault = q.popleft()
        if fault.status == 429:
            return JSONResponse(
                {"ok": False, "error": fault.error or "ratelimited"},
                status_code=429,
                headers={"Retry-After": str(fault.retry_after or 60)},
            )
        if fault.error is None:
            return Response(
                "<html><body><h1>Server Error</h1></body></html>",
                status_code=fault.status,
                media_type="text/html",
            )
        return JSONResponse({"ok": False, "error": fault.error}, status_code=fault.status)
