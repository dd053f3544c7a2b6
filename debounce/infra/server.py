"""The production uvicorn server class of ``debounce serve`` / ``debounce web``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn

__all__ = ["QuietServer"]


class QuietServer(uvicorn.Server):
    """uvicorn that leaves signal handling to the host process: a server in a thread, or
    ``debounce serve``, which stops the web server and the worker together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
