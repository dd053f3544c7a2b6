"""The event loop every process of debounce runs on.

uvloop (a libuv-based drop-in for asyncio's loop, https://uvloop.readthedocs.io/) is what
uvicorn picks for the web when it is installed (``uvicorn[standard]``, a dependency of
debounce on Linux and macOS); the worker and the CLI run on it too. Measured on one worker
draining no-op jobs (bench/HISTORY.md, section 11): 921 -> 1 088 jobs/s, 0.61 -> 0.49 ms of
CPU per job against asyncio's selector loop. Where uvloop is not installed (Windows), asyncio's
default loop runs everything unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when uvloop is importable, else ``None`` (asyncio's)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard] on Linux
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop of :func:`loop_factory`; the same semantics
    (a new loop, closed afterwards, async generators and executors shut down)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
