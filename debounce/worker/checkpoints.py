"""A yielded sync's checkpoint across claims: what a job keeps when it yields (its answered
requests, tagged with the revision they belong to) and what the next claim of the same
revision resumes from (an edit since makes it start afresh)."""

from __future__ import annotations

from typing import Any

from debounce.contract import Checkpoint
from debounce.types import SyncJob

__all__ = ["resumed", "to_keep"]


def resumed(job: SyncJob) -> Checkpoint:
    """The checkpoint an earlier claim of the same revision left (else an empty one)."""
    saved = job.checkpoint
    if saved and saved.get("revision") == job.claimed_revision:
        return Checkpoint.from_json(saved)
    return Checkpoint()


def to_keep(job: SyncJob, checkpoint: Checkpoint) -> dict[str, Any] | None:
    """What to keep with a job that yields: its responses, tagged with the revision they
    belong to (``None`` when there are none)."""
    if not checkpoint.responses:
        return None
    return {"revision": job.claimed_revision, **checkpoint.to_json()}
