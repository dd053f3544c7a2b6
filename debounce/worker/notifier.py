"""LISTEN for jobs that become due now (``queue.NOTIFY_CHANNEL``) and wake the claim loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from debounce import queue
from debounce.infra.retry import Backoff
from debounce.worker.errors import log_db_error

__all__ = ["listen"]

log = logging.getLogger("debounce.worker")


async def listen(conninfo: str, wake: Callable[[], None]) -> None:
    """Run forever: hold a ``LISTEN`` connection on ``conninfo`` and call ``wake`` for every
    notification, and once after each (re)connection (notifications sent while disconnected
    are lost: the claim loop's timer on the earliest ``scheduled_at`` is the backstop).
    Reconnects with backoff; returns only by cancellation."""
    backoff = Backoff()
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(f"listen {queue.NOTIFY_CHANNEL}")  # a constant name
                backoff.reset()
                wake()
                async for _ in conn.notifies():
                    wake()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            delay = backoff.next()
            log_db_error("LISTEN connection lost", exc, delay)
            await asyncio.sleep(delay)
