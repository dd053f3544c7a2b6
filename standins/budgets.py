"""API budgets of the stand-ins: token buckets per workspace (or per workspace and method) and
the count of what each workspace sent, so tests and benchmarks can prove that the service
never exceeds a budget.

The real APIs limit rates per workspace: Notion per connection and per workspace, answering
429 ``rate_limited`` with ``Retry-After`` in whole seconds
(https://developers.notion.com/reference/request-limits); Slack per method, per workspace, per
app, in tiers of requests per minute (tier 3, ``conversations.history`` and
``conversations.replies``: 50+ per minute), answering HTTP 429 with ``Retry-After`` in seconds
(https://docs.slack.dev/apis/web-api/rate-limits). Neither documents its algorithm; the
stand-ins use a token bucket, the model the service's own budgets follow: ``burst`` tokens at
most, refilled continuously at ``rate`` tokens per second, one token per request; an empty
bucket refuses the request (and a refusal costs nothing).

:class:`BudgetBook` holds the buckets and the counts of one fake
(:class:`standins.notion_budgets.NotionBudgets`, :class:`standins.slack_budgets.SlackBudgets`
expose it). Time is read from an injectable clock (seconds, monotonic): tests pass a
:class:`ManualClock` and move time without sleeping. Everything is guarded by one lock: the
fakes answer from a :class:`standins.server.BackgroundServer` thread while tests read counts.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = [
    "BudgetBook",
    "Clock",
    "ManualClock",
    "TokenBucket",
    "Usage",
    "max_in_window",
    "retry_after_seconds",
]

#: A source of time in seconds that never goes backwards (default :func:`time.monotonic`).
Clock = Callable[[], float]


class ManualClock:
    """A clock for tests: stands still until :meth:`advance` moves it (seconds)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward; returns the new time."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go backwards")
        with self._lock:
            self.now += seconds
            return self.now


class TokenBucket:
    """At most ``burst`` tokens, refilled continuously at ``per_second`` tokens per second;
    full when created at time ``now`` (seconds of the owner's clock). Not thread-safe on its
    own: :class:`BudgetBook` serialises access."""

    def __init__(self, per_second: float, burst: float, now: float) -> None:
        if not per_second > 0 or math.isinf(per_second):
            raise ValueError(f"the refill rate must be a positive number, got {per_second!r}")
        if not burst >= 1 or math.isinf(burst):
            raise ValueError(f"the burst must be at least 1 request, got {burst!r}")
        self.per_second = float(per_second)
        self.burst = float(burst)
        self.tokens = self.burst
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.per_second)
            self.updated = now

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until one token is there (0.0: one is there now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.per_second

    def take(self, now: float) -> None:
        """Take one token (the caller checked :meth:`wait` first)."""
        self._refill(now)
        self.tokens -= 1


def retry_after_seconds(wait: float) -> int:
    """The ``Retry-After`` value (whole seconds, at least 1) of a refusal whose bucket holds a
    token again in ``wait`` seconds: rounded up (float dust included), so a client that waits
    it is always served (both APIs send whole seconds:
    https://developers.notion.com/reference/request-limits,
    https://docs.slack.dev/apis/web-api/rate-limits)."""
    return max(1, math.ceil(wait))


def max_in_window(times: Iterable[float], seconds: float) -> int:
    """The largest number of ``times`` (seconds) inside one closed window ``[t, t + seconds]``.

    A token bucket of ``burst`` tokens refilled at ``r`` per second lets at most
    ``burst + r * seconds`` requests through any such window: the bound a test asserts.
    """
    if seconds < 0:
        raise ValueError("a window lasts zero seconds or more")
    ordered = sorted(times)
    best = start = 0
    for end, t in enumerate(ordered):
        while t - ordered[start] > seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


@dataclass(frozen=True)
class Usage:
    """What one workspace (Notion) or team (Slack) sent, as the stand-in saw it.

    Attributes:
        requests: requests that passed the budget (every authenticated request when the
            workspace has no budget), answered whatever they were answered.
        by_endpoint: those requests by endpoint name (Notion, e.g. ``pages.retrieve``) or
            Web API method (Slack, e.g. ``conversations.history``).
        rate_limited: requests the budget refused with a 429.
        accepted_at: the stand-in's clock (seconds) at each accepted request, in order.
        rate_limited_at: the stand-in's clock (seconds) at each 429, in order.
    """

    requests: int = 0
    by_endpoint: dict[str, int] = field(default_factory=dict)
    rate_limited: int = 0
    accepted_at: list[float] = field(default_factory=list)
    rate_limited_at: list[float] = field(default_factory=list)

    def max_in_window(self, seconds: float) -> int:
        """The most requests accepted within any ``seconds``-long closed window (see
        :func:`max_in_window`); a budget of ``burst`` and ``r`` per second keeps it at most
        ``burst + r * seconds``."""
        return max_in_window(self.accepted_at, seconds)


@dataclass
class _Tally:
    by_endpoint: Counter[str] = field(default_factory=Counter)
    accepted_at: list[float] = field(default_factory=list)
    rate_limited_at: list[float] = field(default_factory=list)


class BudgetBook:
    """Token buckets and counts by scope (a workspace or team id), thread-safe.

    A bucket belongs to ``(scope, method)``: ``method=None`` is the scope's bucket for every
    request, a method name a bucket for that method only. A request takes one token from
    every bucket that applies to it, or from none if one of them is empty.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str | None], TokenBucket] = {}
        self._tallies: dict[str, _Tally] = {}

    def set(self, scope: str, *, per_second: float, burst: float, method: str | None = None) -> None:
        """Give ``(scope, method)`` a full bucket of ``burst`` tokens refilled at
        ``per_second`` tokens per second (replacing any earlier one)."""
        with self._lock:
            self._buckets[(scope, method)] = TokenBucket(per_second, burst, self.clock())

    def clear(self, scope: str, method: str | None = None) -> None:
        """Drop the bucket of ``(scope, method)``: no limit there any more."""
        with self._lock:
            self._buckets.pop((scope, method), None)

    def admit(self, scope: str, endpoint: str) -> float:
        """Charge one request of ``scope`` to ``endpoint``; returns 0.0 if it passes (and
        counts it), else the seconds until every bucket involved holds a token again (and
        counts a 429; no bucket is charged)."""
        with self._lock:
            now = self.clock()
            buckets = [
                b for key in ((scope, None), (scope, endpoint)) if (b := self._buckets.get(key)) is not None
            ]
            wait = max((b.wait(now) for b in buckets), default=0.0)
            tally = self._tallies.setdefault(scope, _Tally())
            if wait > 0:
                tally.rate_limited_at.append(now)
                return wait
            for bucket in buckets:
                bucket.take(now)
            tally.by_endpoint[endpoint] += 1
            tally.accepted_at.append(now)
            return 0.0

    def usage(self, scope: str) -> Usage:
        """A snapshot of what ``scope`` sent since the start or :meth:`reset_usage`."""
        with self._lock:
            tally = self._tallies.get(scope) or _Tally()
            return Usage(
                requests=len(tally.accepted_at),
                by_endpoint=dict(tally.by_endpoint),
                rate_limited=len(tally.rate_limited_at),
                accepted_at=list(tally.accepted_at),
                rate_limited_at=list(tally.rate_limited_at),
            )

    def reset_usage(self) -> None:
        """Forget every count (buckets keep their tokens)."""
        with self._lock:
            self._tallies.clear()
