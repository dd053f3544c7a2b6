"""When a failed batch is tried again, and what an endpoint's answer means (Standard Webhooks
1.0, "Retry schedule" and "Endpoint status": retries over about three days — immediately,
5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h — with jitter; 2xx is success, every other
answer a failure (3xx included: redirects are not followed); 410 Gone disables the endpoint;
429, 502 and 504 throttle and their ``Retry-After`` is honoured)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["LONGEST_WAIT", "SCHEDULE", "THROTTLES", "Verdict", "retry_after", "retry_delay", "verdict"]

#: Seconds from a batch's first attempt to each retry (Standard Webhooks): the last repeats
#: until the endpoint has failed for the disable period.
SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0)
#: Answers that throttle: their ``Retry-After`` (seconds or an HTTP date) sets the next attempt.
THROTTLES = frozenset({429, 502, 504})
#: The longest wait a ``Retry-After`` may ask for, seconds (the schedule's longest step).
LONGEST_WAIT = SCHEDULE[-1]
#: The jitter: each delay is multiplied by a random factor in ``1 ± JITTER``.
JITTER = 0.1


def retry_delay(attempts: int, rng: random.Random | None = None) -> float:
    """Seconds until the next attempt of a batch that has failed ``attempts`` times (≥ 1): the
    schedule's step, with jitter (:data:`JITTER`)."""
    step = SCHEDULE[min(max(attempts, 1), len(SCHEDULE) - 1)]
    return step * (rng or random).uniform(1 - JITTER, 1 + JITTER)


def retry_after(value: str | None, now: datetime) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait (RFC 9110 section 10.2.3: seconds or
    an HTTP date), between 0 and :data:`LONGEST_WAIT`; ``None`` when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = (
            float(text)
            if text.isdigit()
            else (parsedate_to_datetime(text).astimezone(UTC) - now.astimezone(UTC)).total_seconds()
        )
    except (TypeError, ValueError, OverflowError):
        return None
    return min(max(seconds, 0.0), LONGEST_WAIT)


@dataclass(frozen=True)
class Verdict:
    """What one attempt's answer means: ``delivered`` (a 2xx), else ``gone`` (410: disable
    the endpoint now) or a retry after ``retry_seconds``."""

    delivered: bool
    gone: bool = False
    retry_seconds: float = 0.0


def verdict(
    status: int | None, attempts: int, retry_after_seconds: float | None, rng: random.Random | None = None
) -> Verdict:
    """The meaning of answer ``status`` (``None``: no answer — refused, reset, timed out) to a
    batch's attempt number ``attempts`` (≥ 1, this one included)."""
    if status is not None and 200 <= status < 300:
        return Verdict(True)
    if status == 410:
        return Verdict(False, gone=True)
    if status in THROTTLES and retry_after_seconds is not None:
        return Verdict(False, retry_seconds=retry_after_seconds)
    return Verdict(False, retry_seconds=retry_delay(attempts, rng))
