"""The job a sync receives and the values a source declares (window, API budget): part of
the contract between the service and its sources (:mod:`debounce.contract`)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["ApiBudget", "JobStatus", "SourceWindow", "SyncJob"]


@dataclass(frozen=True)
class SourceWindow:
    """Debounce window and max wait of one source, both in seconds (>= 0)."""

    debounce_seconds: float
    max_wait_seconds: float


@dataclass(frozen=True)
class ApiBudget:
    """A source's default API budget per workspace: a token bucket refilled at ``per_minute``
    requests per minute holding at most ``burst`` requests (0 per minute: no budget)."""

    per_minute: float
    burst: float


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


class JobStatus(enum.StrEnum):
    """State of a row in ``sync_jobs`` (see docs/design.md, "Job states")."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"

    @classmethod
    def parse(cls, value: str) -> JobStatus:
        """``JobStatus`` of ``value``.

        Raises:
            ValueError: ``value`` is not one of pending, processing, completed, failed.
        """
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown job status {value!r} (expected one of: {allowed})") from None


@dataclass(frozen=True)
class SyncJob:
    """One row of ``sync_jobs``.

    All datetimes are timezone-aware UTC. ``revision`` counts accepted events; a job returned
    by ``queue.claim`` carries ``claimed_revision`` (the revision its sync covers) and its
    ``lease_token``, which ``settle``/``release`` must present.
    """

    id: int
    source_type: str
    source_page_id: str
    status: JobStatus
    payload: dict[str, Any]
    event_id: str | None
    event_count: int
    priority: int
    attempts: int
    max_attempts: int
    scheduled_at: datetime
    first_event_at: datetime
    max_wait_until: datetime
    retry_at: datetime | None
    lease_expires_at: datetime | None
    locked_by: str | None
    lease_token: str | None
    revision: int
    claimed_revision: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    #: The workspace the job syncs for (``None``: no workspace, the source's settings).
    workspace_id: int | None = None
    #: What an earlier claim of this job had fetched when it yielded its slot
    #: (``{"revision": n, "responses": {...}}``, see :mod:`debounce.contract.metering`), else ``None``.
    checkpoint: dict[str, Any] | None = None
    #: What the events the job absorbed said changed (``PageEvent.kinds``, merged by the
    #: enqueue: the union, sorted); empty: unknown or everything (a bulk job, a re-sync, an
    #: event that does not say) — the sync fetches everything it would without a hint.
    change_kinds: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SyncJob:
        """Build from a ``dict_row`` of ``sync_jobs`` (extra keys are ignored)."""
        payload = row["payload"]
        lease_token = row["lease_token"]
        return cls(
            id=row["id"],
            source_type=row["source_type"],
            source_page_id=row["source_page_id"],
            status=JobStatus(row["status"]),
            payload=payload if payload is not None else {},
            event_id=row["event_id"],
            event_count=row["event_count"],
            priority=row["priority"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            scheduled_at=_utc(row["scheduled_at"]),
            first_event_at=_utc(row["first_event_at"]),
            max_wait_until=_utc(row["max_wait_until"]),
            retry_at=_utc_or_none(row["retry_at"]),
            lease_expires_at=_utc_or_none(row["lease_expires_at"]),
            locked_by=row["locked_by"],
            lease_token=str(lease_token) if lease_token is not None else None,
            revision=row["revision"],
            claimed_revision=row["claimed_revision"],
            last_error=row["last_error"],
            created_at=_utc(row["created_at"]),
            updated_at=_utc(row["updated_at"]),
            finished_at=_utc_or_none(row["finished_at"]),
            workspace_id=row.get("workspace_id"),
            checkpoint=row.get("checkpoint"),
            change_kinds=tuple(row.get("change_kinds") or ()),
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (ISO 8601 UTC times); the lease token is left out and the checkpoint
        is summarised as ``checkpoint_responses`` (how many responses it keeps)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "lease_token":
                continue
            if name == "checkpoint":
                kept = (self.checkpoint or {}).get("responses")
                out["checkpoint_responses"] = len(kept) if isinstance(kept, dict) else 0
                continue
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    def log_fields(self) -> dict[str, Any]:
        """The fields every log line about this job carries."""
        return {"job_id": self.id, "source": self.source_type, "page": self.source_page_id}
