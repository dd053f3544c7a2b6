"""Writing synced documents, the service's output, to the ``documents`` table.

The integrations' sync half calls :class:`DocumentStore`; nothing else writes ``documents``.

**The claim fence.** A sync writes only while its claim holds: the worker runs each sync inside
:func:`claim_fence` (the job's id and lease token), and every write of the store checks, in the
statement that writes and with the job row locked, that the lease token is still the job's. A
worker that stalled past its lease (GC pause, frozen VM, partition) and whose job another worker
re-claimed gets :class:`LeaseLost` instead of overwriting the newer document (issue 16, case 2).
Outside a fence (tests, tools) writes are unfenced.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from debounce.db import Db, fetch_all, fetch_one
from debounce.sql import queries

if TYPE_CHECKING:
    from debounce.types import SyncJob

__all__ = [
    "Document",
    "DocumentStore",
    "LeaseLost",
    "WriteOutcome",
    "claim_fence",
    "content_sha256",
]

_Q = queries("documents")

#: ``(job id, lease token)`` of the claim the current task syncs under, or ``None``.
_FENCE: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "debounce_claim_fence", default=None
)


class LeaseLost(RuntimeError):
    """The claim this sync runs under no longer holds its job (the lease expired and the job
    was requeued or re-claimed): nothing was written. The sync must stop; the job's current
    holder writes the page."""


@contextlib.contextmanager
def claim_fence(job: SyncJob) -> Iterator[None]:
    """Fence every :class:`DocumentStore` write made in this context (and in tasks created
    inside it) by ``job``'s claim: ``job.id`` and ``job.lease_token``.

    Raises:
        ValueError: ``job`` carries no lease token (it was not returned by a claim).
    """
    if job.lease_token is None:
        raise ValueError(f"job {job.id} carries no lease token: fence with a claimed job")
    token = _FENCE.set((job.id, str(job.lease_token)))
    try:
        yield
    finally:
        _FENCE.reset(token)


def _fence_params() -> dict[str, Any]:
    fence = _FENCE.get()
    return {
        "fence_job_id": fence[0] if fence else None,
        "fence_lease_token": fence[1] if fence else None,
    }


def _refused(what: str) -> LeaseLost:
    fence = _FENCE.get()
    job = fence[0] if fence else "?"
    return LeaseLost(f"job {job} lost its claim before {what}: nothing written")


def content_sha256(content: str) -> str:
    """Hex SHA-256 of the UTF-8 Markdown ``content``."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class WriteOutcome(enum.StrEnum):
    """What :meth:`DocumentStore.upsert` did."""

    INSERTED = "inserted"
    UPDATED = "updated"
    #: Same content, title, url and metadata: only ``synced_at`` moved.
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Document:
    """One document as an integration renders it.

    ``document_id`` is unique within ``source_type`` (the page's id, or the id of a part of
    the page such as a thread, ``"<channel>/<thread_ts>"``). ``content`` is Markdown.
    ``source_updated_at`` is the source's own last-edit time, timezone-aware UTC, or ``None``
    if unknown.
    """

    source_type: str
    document_id: str
    source_page_id: str
    title: str
    content: str
    url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source_updated_at: datetime | None = None


class DocumentStore:
    """The ``documents`` and ``sync_state`` tables over a connection or pool (one statement
    per call, each committed on its own when ``db`` is a pool)."""

    def __init__(self, db: Db) -> None:
        self.db = db

    async def upsert(self, doc: Document) -> WriteOutcome:
        """Insert or update ``doc``; an unchanged document is not rewritten (see
        :class:`WriteOutcome`). Un-deletes a document that was marked deleted.

        Raises:
            LeaseLost: inside a :func:`claim_fence` whose claim no longer holds the job.
        """
        row = await fetch_one(
            self.db,
            _Q["upsert_document"],
            {
                "source_type": doc.source_type,
                "document_id": doc.document_id,
                "source_page_id": doc.source_page_id,
                "title": doc.title,
                "url": doc.url,
                "content": doc.content,
                "content_sha256": content_sha256(doc.content),
                "metadata": Jsonb(doc.metadata),
                "source_updated_at": doc.source_updated_at,
                **_fence_params(),
            },
        )
        assert row is not None
        if row["outcome"] == "lease_lost":
            raise _refused(f"writing document {doc.document_id}")
        return WriteOutcome(row["outcome"])

    async def mark_deleted(self, source_type: str, document_ids: Sequence[str]) -> list[str]:
        """Mark these documents deleted; returns the ids that were not deleted before.

        Raises:
            LeaseLost: inside a :func:`claim_fence` whose claim no longer holds the job.
        """
        if not document_ids:
            return []
        rows = await fetch_all(
            self.db,
            _Q["mark_deleted"],
            {"source_type": source_type, "document_ids": list(document_ids), **_fence_params()},
        )
        return self._marked(rows, "marking documents deleted")

    @staticmethod
    def _marked(rows: Sequence[Any], what: str) -> list[str]:
        if any(r["document_id"] is None for r in rows):
            raise _refused(what)
        return [r["document_id"] for r in rows]

    async def mark_page_deleted(self, source_type: str, source_page_id: str) -> list[str]:
        """Mark every document of job key ``source_page_id`` deleted; returns the ids marked.

        Raises:
            LeaseLost: inside a :func:`claim_fence` whose claim no longer holds the job.
        """
        rows = await fetch_all(
            self.db,
            _Q["mark_page_deleted"],
            {"source_type": source_type, "source_page_id": source_page_id, **_fence_params()},
        )
        return self._marked(rows, f"marking page {source_page_id} deleted")

    async def get(self, source_type: str, document_id: str) -> dict[str, Any] | None:
        """The ``documents`` row as a dict, or ``None``."""
        row = await fetch_one(
            self.db, _Q["get_document"], {"source_type": source_type, "document_id": document_id}
        )
        return dict(row) if row else None

    async def list_for_page(self, source_type: str, source_page_id: str) -> list[dict[str, Any]]:
        """All documents that came from one job key, ordered by ``document_id``."""
        rows = await fetch_all(
            self.db,
            _Q["list_documents"],
            {"source_type": source_type, "source_page_id": source_page_id},
        )
        return [dict(r) for r in rows]

    async def get_state(self, source_type: str, source_page_id: str) -> dict[str, Any]:
        """The integration's saved state for one job key (``{}`` if none)."""
        row = await fetch_one(
            self.db,
            _Q["get_state"],
            {"source_type": source_type, "source_page_id": source_page_id},
        )
        return dict(row["state"]) if row else {}

    async def set_state(self, source_type: str, source_page_id: str, state: dict[str, Any]) -> None:
        """Replace the integration's saved state for one job key.

        Raises:
            LeaseLost: inside a :func:`claim_fence` whose claim no longer holds the job.
        """
        row = await fetch_one(
            self.db,
            _Q["set_state"],
            {"source_type": source_type, "source_page_id": source_page_id, "state": Jsonb(state),
             **_fence_params()},
        )
        if row is None or not row["ok"]:
            raise _refused(f"saving the sync state of {source_page_id}")
