"""The worker's maintenance loops: keeping the leases of running syncs, and returning the jobs
of dead workers whose leases expired."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.types import SyncJob
from debounce.worker.errors import log_db_error

__all__ = ["lease_keeper", "reaper", "renew_leases"]

log = logging.getLogger("debounce.worker")


async def renew_leases(
    pool: AsyncConnectionPool[Any], running: Mapping[int, SyncJob], finishing: Collection[int],
    lease_seconds: float,
) -> list[SyncJob]:
    """Extend the lease of every sync in ``running`` that is not ``finishing`` (its outcome
    being recorded: recording clears the lease, which a snapshot taken before may not show);
    returns (and logs) the ones whose claim was lost meanwhile.

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: the database is unavailable.
    """
    jobs = [j for j in running.values() if j.id not in finishing]
    if not jobs:
        return []
    kept = await queue.extend_leases(pool, jobs, lease_seconds)
    lost = [j for j in jobs if j.id not in kept and j.id in running and j.id not in finishing]
    for job in lost:
        log.warning("lease lost while syncing: the job was requeued or re-claimed; this sync's "
                    "writes will be refused", extra=job.log_fields())
    return lost


async def lease_keeper(
    pool: AsyncConnectionPool[Any], running: Mapping[int, SyncJob], finishing: Collection[int],
    lease_seconds: float,
) -> None:
    """Run forever: :func:`renew_leases` every ``lease_seconds / 3``."""
    interval = max(lease_seconds / 3.0, 0.05)
    while True:
        await asyncio.sleep(interval)
        try:
            await renew_leases(pool, running, finishing, lease_seconds)
        except Exception as exc:
            log_db_error("extending leases", exc)


async def reaper(pool: AsyncConnectionPool[Any], lease_seconds: float, wake: Callable[[], None]) -> None:
    """Run forever: every ``min(lease / 2, 30)`` seconds return expired leases to the queue
    (``queue.requeue_expired``), waking the claim loop when some came back."""
    interval = max(min(lease_seconds / 2.0, 30.0), 0.05)
    while True:
        try:
            for job in await queue.requeue_expired(pool):
                log.warning("expired lease returned: now %s", job.status.value,
                            extra=job.log_fields())
                wake()
        except Exception as exc:
            log_db_error("requeueing expired leases", exc)
        await asyncio.sleep(interval)
