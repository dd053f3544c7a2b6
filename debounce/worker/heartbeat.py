"""A worker's heartbeat: every :data:`HEARTBEAT_SECONDS` it says in the ``workers`` table
that it is alive and when it last claimed a job (sql/queries/workers.sql), so that an operator can
tell "no worker has claimed for N seconds while due jobs wait" from the queue's statistics
(``debounce stats``, ``/metrics``: ``debounce_workers_alive``,
``debounce_last_claim_age_seconds``; docs/deploying.md, "Alerts"). A worker that cannot
start (``wait_until_prepared``) beats too: alive, but never claiming."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce.infra.db import execute
from debounce.infra.sql import queries
from debounce.queue.operations import HEARTBEAT_SECONDS
from debounce.worker.errors import log_db_error, stop_if_cancelled

__all__ = ["FORGET_AFTER_SECONDS", "beat", "heartbeat", "leave"]

#: A worker not seen for this long (seconds: a day) is forgotten.
FORGET_AFTER_SECONDS = 86400.0

_Q = queries("workers")


async def beat(pool: AsyncConnectionPool[Any], worker_id: str, claimed_ago: float | None) -> None:
    """Say that ``worker_id`` is alive; it last claimed a job ``claimed_ago`` seconds ago
    (``None``: not since it started).

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
    """
    await execute(pool, _Q["beat"], {"worker_id": worker_id, "claimed_ago": claimed_ago})


async def leave(pool: AsyncConnectionPool[Any], worker_id: str) -> None:
    """``worker_id`` stopped cleanly: its row goes (a killed worker's stays until it is
    forgotten, no longer counted alive by ``queue.stats`` after three beats).

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
    """
    await execute(pool, _Q["leave"], {"worker_id": worker_id})


async def heartbeat(
    pool: AsyncConnectionPool[Any],
    worker_id: str,
    last_claim: Callable[[], float | None],
    *,
    interval: float = HEARTBEAT_SECONDS,
) -> None:
    """Run forever: :func:`beat` every ``interval`` seconds. ``last_claim()`` gives the
    ``time.monotonic()`` of this worker's last claim that took a job (``None``: none yet).
    Forgets workers silent for :data:`FORGET_AFTER_SECONDS` once at start."""
    try:
        await execute(pool, _Q["forget_silent"], {"older_than": FORGET_AFTER_SECONDS})
    except Exception as exc:
        log_db_error("forgetting workers long silent", exc)
    while True:
        claimed = last_claim()
        try:
            await beat(pool, worker_id, None if claimed is None else max(0.0, time.monotonic() - claimed))
        except Exception as exc:
            log_db_error("saying the worker is alive", exc)
        stop_if_cancelled()
        await asyncio.sleep(interval)
