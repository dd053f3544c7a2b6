"""The local queue of one worker process: jobs claimed ahead of a free sync slot, so a slot that
frees starts its next sync at once instead of waiting for a claim's round trip.

What it guarantees:

- **Small, and sized by what it saves.** Its ``target`` is how many syncs the worker starts
  during two claim round trips (the measured start rate × the measured claim latency × 2),
  at most ``concurrency``. Slow syncs (a real API) make it 0: nothing is held, and no job waits
  in one worker while another has a free slot. Fast syncs (a few ms) fill it.
- **Never a sync after its lease.** A held job is ``processing`` with a lease, renewed with the
  running syncs' (``renewed``); its local deadline is when its claim or last renewal was sent
  plus ``lease_seconds``. :meth:`take` never hands out a job with less than a third of its lease
  left (renewals failing: the database is away) or one a renewal found lost: such a job is
  given back (:meth:`expired`) or left to its lease, never synced by this worker. The lease token
  still fences every write.
- **Fairness unchanged.** A held job is ``processing`` in the database: it counts against its
  workspace's concurrency K and its bucket paid for it at the claim, exactly like a running
  sync, so the claim never gives one worker more of a workspace than K or its bucket allows.
- **A crash loses nothing**: held jobs come back through their leases.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.types import ClaimedWorkspace, SyncJob
from debounce.worker.errors import log_db_error

__all__ = ["LocalQueue", "give_back"]

log = logging.getLogger("debounce.worker")

#: Weight of a new measurement in the moving averages of the claim latency and start rate.
SMOOTHING = 0.2


class LocalQueue:
    """Jobs claimed but not started (see the module docstring). Times are
    ``time.monotonic()`` seconds, passed in by the caller.

    ``concurrency``: the worker's sync slots (the most it holds); ``lease_seconds``: the lease
    the claim and the renewals grant.
    """

    def __init__(self, concurrency: int, lease_seconds: float) -> None:
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        #: (job, its workspace as the claim read it, local lease deadline), in claim order.
        self._held: deque[tuple[SyncJob, ClaimedWorkspace | None, float]] = deque()
        #: Jobs dropped because their lease was too close to its end: to give back.
        self._expired: list[SyncJob] = []
        self.claim_latency = 0.0
        self.start_rate = 0.0
        self._started = 0
        self._rate_since: float | None = None

    def __len__(self) -> int:
        return len(self._held)

    @property
    def target(self) -> int:
        """How many jobs to hold ahead: the starts of two claim round trips, at most
        ``concurrency``."""
        return min(self.concurrency, math.floor(self.start_rate * self.claim_latency * 2))

    def per_source(self) -> dict[str, int]:
        """Held jobs by source."""
        counts: dict[str, int] = {}
        for job, _, _ in self._held:
            counts[job.source_type] = counts.get(job.source_type, 0) + 1
        return counts

    def jobs(self) -> list[SyncJob]:
        """The held jobs (their leases are renewed with the running syncs')."""
        return [job for job, _, _ in self._held]

    def add(
        self, claimed: Iterable[tuple[SyncJob, ClaimedWorkspace | None]], sent: float, now: float
    ) -> None:
        """Hold the jobs of a claim sent at ``sent`` and answered at ``now``; measures the
        claim's latency and the start rate since the last claim."""
        self._held.extend((job, ws, sent + self.lease_seconds) for job, ws in claimed)
        self.claim_latency += SMOOTHING * ((now - sent) - self.claim_latency)
        if self._rate_since is not None and now > self._rate_since:
            rate = self._started / (now - self._rate_since)
            self.start_rate += SMOOTHING * (rate - self.start_rate)
        self._started, self._rate_since = 0, now

    def take(
        self, startable: Callable[[SyncJob], bool], now: float
    ) -> tuple[SyncJob, ClaimedWorkspace | None] | None:
        """The first held job ``startable`` accepts (its source has a free slot), removed;
        ``None``: none. Jobs with less than a third of their lease left are dropped on the way
        (:meth:`expired`)."""
        margin = self.lease_seconds / 3.0
        for item in list(self._held):
            job, ws, deadline = item
            if deadline - now < margin:
                self._held.remove(item)
                self._expired.append(job)
            elif startable(job):
                self._held.remove(item)
                self._started += 1
                return job, ws
        return None

    def renewed(self, asked: Iterable[int], kept: Mapping[int, SyncJob], sent: float) -> list[SyncJob]:
        """After a renewal sent at ``sent`` for the jobs ``asked`` (ids): those it renewed
        (``kept``, by id) get a new deadline; the others asked lost their lease and are
        dropped. Returns the ones dropped."""
        asked = set(asked)
        held: deque[tuple[SyncJob, ClaimedWorkspace | None, float]] = deque()
        lost = []
        for job, ws, deadline in self._held:
            if job.id not in asked:
                held.append((job, ws, deadline))
            elif job.id in kept:
                held.append((job, ws, sent + self.lease_seconds))
            else:
                lost.append(job)
        self._held = held
        return lost

    def expired(self) -> list[SyncJob]:
        """The jobs dropped for a lease too close to its end since the last call (give them
        back: ``queue.release`` matches only a lease still held)."""
        out, self._expired = self._expired, []
        return out

    def drain(self) -> list[SyncJob]:
        """Every held job, removed (shutdown: give them back)."""
        out = [job for job, _, _ in self._held] + self.expired()
        self._held.clear()
        return out


async def give_back(pool: AsyncConnectionPool[Any], jobs: list[SyncJob]) -> None:
    """Release held jobs whose lease is about to end (renewals failing): never synced here.
    A failure is logged (their leases expire instead); never raises."""
    for job in jobs:
        log.warning(
            "lease about to end while the job waited in the local queue: given back", extra=job.log_fields()
        )
    try:
        await queue.release(pool, jobs)
    except Exception as exc:
        log_db_error(f"giving back {len(jobs)} jobs (their leases will expire)", exc)
