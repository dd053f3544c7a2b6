"""A real HTTP endpoint on loopback for push delivery's tests: it records every request
(headers and body) and answers what the test scripted (a status with headers, or no answer
for a while), then 200."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from standins.server import BackgroundServer


@dataclass
class Answer:
    """What to answer one request: ``status`` with ``headers``, after ``delay`` seconds."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Receiver:
    """Serves ``POST /hook`` on loopback (a context manager); :attr:`requests` holds
    ``(headers, body)`` of each request received, :attr:`script` the answers to give next."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], str]] = []
        #: ``time.monotonic()`` of each request's arrival.
        self.times: list[float] = []
        self.script: list[Answer] = []
        self.arrived = threading.Event()
        self._lock = threading.Lock()
        self.server = BackgroundServer(Starlette(routes=[Route("/hook", self._hook, methods=["POST"])]))

    async def _hook(self, request: Request) -> Response:
        body = (await request.body()).decode()
        with self._lock:
            self.requests.append(({k.lower(): v for k, v in request.headers.items()}, body))
            self.times.append(time.monotonic())
            answer = self.script.pop(0) if self.script else Answer()
        self.arrived.set()
        if answer.delay:
            await asyncio.sleep(answer.delay)
        return Response(status_code=answer.status, headers=answer.headers)

    @property
    def url(self) -> str:
        return f"{self.server.url}/hook"

    def __enter__(self) -> Receiver:
        self.server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.stop()
