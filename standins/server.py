"""Run an ASGI app with uvicorn on loopback in a background thread."""

from __future__ import annotations

import asyncio
import base64
import binascii
import socket
import threading
import time
from types import TracebackType
from typing import Any, Literal

import uvicorn

from debounce.infra.server import QuietServer

__all__ = ["BackgroundServer", "basic_credentials"]


class BackgroundServer:
    """An ASGI app served by uvicorn on ``host`` (default 127.0.0.1) in a daemon thread.

    ``port=0`` picks a free port; ``lifespan="on"`` runs the app's startup and shutdown. Use
    as a context manager or call :meth:`start` / :meth:`stop`; :attr:`url` is
    ``http://127.0.0.1:<port>`` once started.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        lifespan: Literal["auto", "on", "off"] = "off",
    ) -> None:
        self.app = app
        self.lifespan = lifespan
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, ``http://host:port`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> str:
        """Start serving; returns :attr:`url`.

        Raises:
            RuntimeError: the server did not come up within ``timeout`` seconds.
        """
        # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on accepted sockets
        # whose ``proto`` says TCP (``asyncio.base_events._set_nodelay``), and without it each
        # keep-alive response (headers, then body) waits ~40 ms for the client's delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan=self.lifespan, access_log=False, loop="asyncio"
        )
        server = QuietServer(config)
        self._server = server

        def run() -> None:
            asyncio.run(server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=run, name=f"fake-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``(client_id, client_secret)`` of an ``Authorization: Basic …`` header (RFC 7617), or
    ``None`` when it is absent or malformed. The stand-ins' OAuth token endpoints read it."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, sep, secret = decoded.partition(":")
    return (client_id, secret) if sep else None
