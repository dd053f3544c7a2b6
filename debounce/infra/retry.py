"""The retry policy, in one module: the job backoff schedule, the backoff of loops that wait for
the database, and ``Retry-After`` parsing. Used by the queue (a failed job's next attempt),
the worker's loops, and ``Retry-After`` parsing (defined in :mod:`debounce.contract.http`,
where the sources' API clients reach it).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from debounce.contract.http import parse_retry_after

__all__ = ["DEFAULT_BACKOFF_SECONDS", "Backoff", "backoff_delay", "parse_retry_after"]

#: Transient-failure backoff of a job (seconds) for attempts 1, 2, 3, …; the last repeats.
#: ``DEBOUNCE_BACKOFF_SECONDS`` overrides it.
DEFAULT_BACKOFF_SECONDS: tuple[float, ...] = (30.0, 120.0, 480.0, 1800.0, 7200.0)


def backoff_delay(
    attempts: int,
    schedule: Sequence[float] = DEFAULT_BACKOFF_SECONDS,
    *,
    jitter: float = 0.2,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after failed attempt number ``attempts`` (1-based).

    ``schedule[attempts - 1]`` (the last entry repeats) scaled by a uniform factor in
    ``[1 - jitter, 1 + jitter]`` so that many jobs failing together do not retry together.

    Raises:
        ValueError: empty schedule, jitter outside [0, 1).
    """
    if not schedule:
        raise ValueError("backoff schedule must not be empty")
    if not 0 <= jitter < 1:
        raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
    base = schedule[min(max(attempts, 1), len(schedule)) - 1]
    factor = 1.0 + (rng or random).uniform(-jitter, jitter) if jitter else 1.0
    return max(0.0, base * factor)


class Backoff:
    """Exponential backoff with jitter for loops that retry while the database is away.

    :meth:`next` returns the seconds to wait before the next try: ``initial``, doubled each
    call up to ``cap``, each scaled by a uniform factor in ``[1 - jitter, 1 + jitter]`` so that
    many processes do not retry in step; :meth:`reset` after a success.
    """

    def __init__(self, initial: float = 0.5, cap: float = 30.0, *, jitter: float = 0.2) -> None:
        self.initial = initial
        self.cap = cap
        self.jitter = jitter
        self._current = initial

    def next(self) -> float:
        """Seconds to wait now; the following call waits twice as long (up to ``cap``)."""
        delay = self._current
        self._current = min(self._current * 2, self.cap)
        return max(0.0, delay * random.uniform(1 - self.jitter, 1 + self.jitter))

    def reset(self) -> None:
        """Start again from ``initial`` (call after a success)."""
        self._current = self.initial
