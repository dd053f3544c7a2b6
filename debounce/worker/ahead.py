"""Claiming ahead: jobs a worker claims before a sync slot is free for them, while its syncs
are short.

A worker claims when sync slots free up, then starts the jobs it got. When syncs take about
as long as a claim's round trip (a page that did not change, a no-op), the slots stand empty
while the claim travels: one process could not drain more than a claim's worth of jobs per
round trip plus the syncs' own time (docs/benchmarks.md, section 12). Claiming the next jobs
while the current syncs run keeps the slots busy; the jobs claimed ahead wait in the process,
leased and counted in their workspace's syncs in flight, and start in claim order as slots
free up.

A job claimed ahead is a job no other worker can take, so this happens only while the recent
syncs of this process are short: the mean of the last syncs' durations (exponentially
weighted) at most ``max_sync_seconds``. A job then waits about a sync's duration for its slot.
When syncs are long (a real page fetched through its API) nothing is claimed ahead, and the
worker claims as before.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from debounce.types import SyncJob

__all__ = ["CLAIM_AHEAD_MAX_SYNC_SECONDS", "ClaimAhead"]

#: Claim ahead only while the mean sync of this process takes at most this long, seconds.
CLAIM_AHEAD_MAX_SYNC_SECONDS = 0.05

#: Weight of the latest sync in the running mean of sync durations.
_WEIGHT = 0.2

Claimed = tuple[SyncJob, Mapping[str, Any] | None]


class ClaimAhead:
    """The jobs one worker claimed ahead of its free slots, and whether it may claim more.

    ``extra``: how many jobs may wait at most (0: never claim ahead); ``max_sync_seconds``:
    the mean sync duration (seconds) above which nothing is claimed ahead.
    """

    def __init__(self, extra: int, max_sync_seconds: float = CLAIM_AHEAD_MAX_SYNC_SECONDS
                 ) -> None:
        self.extra = max(0, extra)
        self.max_sync_seconds = max_sync_seconds
        #: Claimed jobs (with their workspace row) waiting for a slot, in claim order.
        self.waiting: deque[Claimed] = deque()
        #: Running mean of this process's sync durations, seconds (``None``: none yet).
        self.mean_sync_seconds: float | None = None

    def observe(self, seconds: float) -> None:
        """A sync of this process took ``seconds`` (any outcome)."""
        if self.mean_sync_seconds is None:
            self.mean_sync_seconds = seconds
        else:
            self.mean_sync_seconds += _WEIGHT * (seconds - self.mean_sync_seconds)

    @property
    def allowance(self) -> int:
        """How many jobs beyond the free slots a claim may take now: ``extra`` while syncs are
        short, else 0 (also before the first sync: nothing is known of them)."""
        mean = self.mean_sync_seconds
        if mean is None or mean > self.max_sync_seconds:
            return 0
        return self.extra

    def __len__(self) -> int:
        return len(self.waiting)

    def ids(self) -> set[int]:
        """The ids of the waiting jobs."""
        return {job.id for job, _ in self.waiting}

    def per_source(self) -> Counter[str]:
        """How many jobs wait, by source type."""
        return Counter(job.source_type for job, _ in self.waiting)

    def add(self, job: SyncJob, workspace: Mapping[str, Any] | None) -> None:
        """Keep ``job`` (claimed, no slot yet) until :meth:`take` hands it out."""
        self.waiting.append((job, workspace))

    def take(self, free: int, source_room: Mapping[str, int]) -> list[Claimed]:
        """Hand out, in claim order, the waiting jobs that ``free`` slots can start, at most
        ``source_room[s]`` of source type ``s`` (0 where absent); the others keep waiting in
        order."""
        out: list[Claimed] = []
        room = Counter(source_room)
        kept: deque[Claimed] = deque()
        for item in self.waiting:
            source = item[0].source_type
            if len(out) < free and room[source] > 0:
                room[source] -= 1
                out.append(item)
            else:
                kept.append(item)
        self.waiting = kept
        return out

    def drop_all(self) -> list[SyncJob]:
        """Empty the waiting list (shutdown); returns the jobs, to release."""
        jobs = [job for job, _ in self.waiting]
        self.waiting.clear()
        return jobs
