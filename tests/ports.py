"""A free TCP port on loopback, for a server a test starts (the OS picks it; closed again at
once, so the server can bind it)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
