"""Typed values shared by the queue, the web layer and the worker. The job a sync receives
(:class:`SyncJob`, :class:`JobStatus`) and a source's window and budget belong to the sources'
contract and are defined in :mod:`debounce.contract.jobs`; they are re-exported here."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from debounce.contract.jobs import ApiBudget, JobStatus, SourceWindow, SyncJob

__all__ = [
    "ApiBudget",
    "Claimed",
    "ClaimedWorkspace",
    "EnqueueBrief",
    "EnqueueOutcome",
    "JobEvent",
    "JobStatus",
    "SourceWindow",
    "SyncJob",
]


class EnqueueOutcome(enum.StrEnum):
    """What one accepted webhook event did to its page's job."""

    #: No active job existed: a new ``pending`` job was created.
    CREATED = "created"
    #: A ``pending`` job absorbed the event (payload replaced, ``scheduled_at`` pushed back).
    DEBOUNCED = "debounced"
    #: The event id was seen before (a redelivery): nothing changed.
    DUPLICATE = "duplicate"
    #: The page's job is ``processing``: the event bumped its revision, so the running sync
    #: is followed by another one with the new payload.
    REQUEUED_AFTER_RUNNING = "requeued_after_running"
    #: The event's workspace is removed (the web's routes are up to a few
    #: seconds old): nothing was enqueued.
    WORKSPACE_REMOVED = "workspace_removed"


@dataclass(frozen=True)
class JobEvent:
    """One accepted webhook event, as handed to ``queue.enqueue``.

    ``debounce_seconds`` and ``max_wait_seconds`` are seconds (>= 0). ``event_id`` is the
    source's idempotency key (``None``: no deduplication). ``payload_json``: ``payload``'s JSON
    text when the caller already serialised and checked it (``queue.payload_text``: the web
    does, once per event); ``None``: ``enqueue`` does.
    """

    source_type: str
    source_page_id: str
    payload: dict[str, Any]
    event_id: str | None
    debounce_seconds: float
    max_wait_seconds: float
    priority: int = 0
    max_attempts: int = 5
    #: The workspace the event came from (``workspaces.id``; ``None``: none).
    workspace_id: int | None = None
    payload_json: str | None = None
    #: What the event says changed (``PageEvent.kinds``); ``()``: it does not say.
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimedWorkspace:
    """What a sync needs of its job's workspace, read by the claim in the same statement as
    the job (``sql/queries/claim.sql``, ``claim``: the ``ws_*`` columns) or by
    ``workspaces.sync_state`` (the backfills): the workspace's ``id``, its ``status``
    (``active``, ``paused``, ``revoked``, ``removed``), ``origin`` (``env``, ``oauth``, ``cli``), the
    source's ``external_id`` of it (``None``: the environment's workspace before its id is
    learned), ``bot_user_id`` (Slack) and ``credentials``: the stored token, still encrypted
    (a Fernet token, bytes; ``None`` for the environment's workspace, whose token stays in
    the environment). Kept out of ``repr``."""

    id: int
    status: str
    origin: str
    external_id: str | None
    bot_user_id: str | None
    credentials: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ClaimedWorkspace | None:
        """The workspace of a row with ``workspace_id`` and the ``ws_*`` columns (the claim's
        and ``workspace_credentials``'s shape); ``None`` when the row has no workspace."""
        if row["workspace_id"] is None or row["ws_origin"] is None:
            return None
        stored = row["ws_credentials"]
        return cls(
            id=int(row["workspace_id"]),
            status=row["ws_status"],
            origin=row["ws_origin"],
            external_id=row["ws_external_id"],
            bot_user_id=row["ws_bot_user_id"],
            credentials=None if stored is None else bytes(stored),
        )

    @property
    def unlearned(self) -> bool:
        """The environment's workspace whose id the source has not told yet (the worker asks
        it after a sync: ``Source.identify``)."""
        return self.origin == "env" and not self.external_id


class Claimed(NamedTuple):
    """A job the worker's claim took (``queue.claim``) and what its sync needs
    of its workspace as the claim read it (:class:`ClaimedWorkspace`; ``None`` for a job of
    no workspace)."""

    job: SyncJob
    workspace: ClaimedWorkspace | None


class EnqueueBrief(NamedTuple):
    """What ``queue.enqueue`` did with one event: the outcome, the page's active job's
    id and due time (UTC; both ``None`` only for a duplicate whose page has no active job)."""

    outcome: EnqueueOutcome
    job_id: int | None
    scheduled_at: datetime | None
