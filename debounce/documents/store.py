"""Writing synced documents, the service's output, to the ``documents`` table.

The syncers call :class:`DocumentStore` (the service's
:class:`~debounce.contract.documents.DocumentWriter`); nothing else writes ``documents``.
:class:`~debounce.contract.documents.Document`, :class:`~debounce.contract.documents.WriteOutcome`
and :class:`~debounce.contract.errors.LeaseLost` belong to the contract and are re-exported.

**The claim fence.** A sync writes only while its claim holds: the worker hands each sync the
store fenced by its claim (:meth:`DocumentStore.fenced`: the job's id and lease token, in the
sync's :class:`~debounce.contract.SyncContext`), and every write of a fenced store checks, in
the statement that writes and with the job row locked, that the lease token is still the job's.
A worker that stalled past its lease (GC pause, frozen VM, partition) and whose job another
worker re-claimed gets :class:`LeaseLost` instead of overwriting the newer document (issue 16,
case 2). An unfenced store (tests, tools) writes unconditionally.

**Sections and held deletions** (issue 40). :meth:`DocumentStore.upsert` cuts the content into
sections (:mod:`debounce.documents.sections`) and stores them with it; the feed's triggers say
which sections each change added, changed or removed. Every deletion goes through one guard
(:mod:`debounce.documents.deletions`): deletions that look like a mistake are held, not done.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from debounce.contract.audience import Audience
from debounce.contract.documents import Document, WriteOutcome
from debounce.contract.errors import LeaseLost
from debounce.contract.files import FILE_KEY_PREFIX, FILES_STATE_PREFIX
from debounce.contract.jobs import SyncJob
from debounce.documents.deletions import DEFAULT_GUARD, DeletionGuard
from debounce.documents.sections import split_sections
from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = [
    "Document",
    "DocumentStore",
    "LeaseLost",
    "WriteOutcome",
    "audience_params",
    "content_sha256",
    "purge_removed",
]

_Q = queries("documents")
log = logging.getLogger("debounce.documents")
#: Characters of content above which its sections are cut in a thread (about 5 ms of parsing
#: on a laptop: the worker's event loop keeps extending leases meanwhile).
_PARSE_INLINE_LIMIT = 20_000


def content_sha256(content: str) -> str:
    """Hex SHA-256 of the UTF-8 Markdown ``content``."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def audience_params(audience: Audience | None) -> dict[str, Any]:
    """The ``audience_kind``/``audience_members``/``audience_accessible_by`` parameters of a
    write (all ``None``: unknown, the stored audience is kept)."""
    if audience is None:
        return {"audience_kind": None, "audience_members": None, "audience_accessible_by": None}
    return {
        "audience_kind": audience.kind,
        "audience_members": list(audience.members) if audience.members is not None else None,
        "audience_accessible_by": (
            list(audience.accessible_by) if audience.accessible_by is not None else None
        ),
    }


class DocumentStore:
    """The ``documents`` and ``sync_state`` tables over a connection or pool (one statement
    per call, each committed on its own when ``db`` is a pool): the service's
    :class:`~debounce.contract.DocumentWriter`. ``fence``: ``(job id, lease token)`` of the
    claim every write is checked against (:meth:`fenced`), ``None``: unfenced. ``guard``: the
    limits above which deletions are held (:class:`~debounce.documents.deletions.DeletionGuard`,
    from the settings)."""

    def __init__(
        self, db: Db, fence: tuple[int, str] | None = None, guard: DeletionGuard = DEFAULT_GUARD
    ) -> None:
        self.db = db
        self.fence = fence
        #: ``(source type, document id, title)`` of each document this store inserted or
        #: updated, in order (the worker's log names what a sync wrote).
        self.wrote: list[tuple[str, str, str]] = []
        self.guard = guard

    def fenced(self, job: SyncJob) -> DocumentStore:
        """This store with every write fenced by ``job``'s claim (``job.id`` and
        ``job.lease_token``): a write after the claim was lost raises :class:`LeaseLost`.

        Raises:
            ValueError: ``job`` carries no lease token (it was not returned by a claim).
        """
        if job.lease_token is None:
            raise ValueError(f"job {job.id} carries no lease token: fence with a claimed job")
        return DocumentStore(self.db, (job.id, str(job.lease_token)), self.guard)

    def _fence_params(self) -> dict[str, Any]:
        return {
            "fence_job_id": self.fence[0] if self.fence else None,
            "fence_lease_token": self.fence[1] if self.fence else None,
        }

    def _refused(self, what: str) -> LeaseLost:
        job = self.fence[0] if self.fence else "?"
        return LeaseLost(f"job {job} lost its claim before {what}: nothing written")

    async def upsert(self, doc: Document) -> WriteOutcome:
        """Insert or update ``doc``; an unchanged document is not rewritten (see
        :class:`WriteOutcome`). Un-deletes a document that was marked deleted, releases a held
        deletion, and stores the content's sections (:func:`~debounce.documents.sections.
        split_sections`, cut at ``doc.anchors`` when the syncer gave them).

        Raises:
            LeaseLost: in a fenced store whose claim no longer holds the job.
            ValueError: ``doc.anchors`` out of order, out of range or with a repeated id.
        """
        if len(doc.content) > _PARSE_INLINE_LIMIT:  # a long parse: let the event loop run
            cut = await asyncio.to_thread(split_sections, doc.content, doc.anchors)
        else:
            cut = split_sections(doc.content, doc.anchors)
        sections = [s.to_json() for s in cut]
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
                **audience_params(doc.audience),
                "sections": Jsonb(sections),
                **self._fence_params(),
            },
        )
        assert row is not None
        if row["outcome"] == "lease_lost":
            raise self._refused(f"writing document {doc.document_id}")
        outcome = WriteOutcome(row["outcome"])
        if outcome is not WriteOutcome.UNCHANGED:
            self.wrote.append((doc.source_type, doc.document_id, doc.title))
        return outcome

    async def mark_deleted(
        self, source_type: str, document_ids: Sequence[str], *, why: str = "were found gone"
    ) -> list[str]:
        """Mark these documents deleted through the deletion guard; returns the ids marked
        now. Deletions the guard holds (:mod:`~debounce.documents.deletions`) leave their
        documents live and are not returned; ``why`` (what the source answered) goes into the
        hold's reason.

        Raises:
            LeaseLost: in a fenced store whose claim no longer holds the job.
        """
        if not document_ids:
            return []
        rows = await fetch_all(
            self.db,
            _Q["mark_deleted"],
            {
                "source_type": source_type,
                "document_ids": list(document_ids),
                **self._guard_params(why),
                **self._fence_params(),
            },
        )
        return self._marked(rows, "marking documents deleted")

    def _guard_params(self, why: str) -> dict[str, Any]:
        return {
            "why": why,
            "max_count": self.guard.max_count,
            "max_share": self.guard.max_share,
            "window": self.guard.window_seconds,
        }

    def _marked(self, rows: Sequence[Any], what: str) -> list[str]:
        if any(r["document_id"] is None for r in rows):
            raise self._refused(what)
        held = [r["document_id"] for r in rows if r["held"]]
        if held:
            log.warning(
                "deletion of %d document(s) held (debounce deletions list): %s",
                len(held),
                ", ".join(held[:5]) + (" ..." if len(held) > 5 else ""),
            )
        return [r["document_id"] for r in rows if not r["held"]]

    async def mark_page_deleted(
        self, source_type: str, source_page_id: str, *, why: str = "were found gone"
    ) -> list[str]:
        """Mark every document of job key ``source_page_id`` deleted through the deletion
        guard, with the file documents they were the only ones to show (the files the job's
        last sync showed that no other job shows: :mod:`debounce.worker.files`); returns the
        ids marked now (held ones, as :meth:`mark_deleted`, are not).

        Raises:
            LeaseLost: in a fenced store whose claim no longer holds the job.
        """
        rows = await fetch_all(
            self.db,
            _Q["mark_page_deleted"],
            {
                "source_type": source_type,
                "source_page_id": source_page_id,
                "file_prefix": FILE_KEY_PREFIX,
                "state_prefix": FILES_STATE_PREFIX,
                "state_key": FILES_STATE_PREFIX + source_page_id,
                **self._guard_params(why),
                **self._fence_params(),
            },
        )
        return self._marked(rows, f"marking page {source_page_id} deleted")

    async def get(self, source_type: str, document_id: str) -> dict[str, Any] | None:
        """The ``documents`` row as a dict, or ``None``."""
        row = await fetch_one(
            self.db, _Q["get_document"], {"source_type": source_type, "document_id": document_id}
        )
        return dict(row) if row else None

    async def current(self, source_type: str, document_id: str) -> Document | None:
        """The live stored document (``None``: none, or marked deleted), audience left out."""
        row = await fetch_one(
            self.db, _Q["current_document"], {"source_type": source_type, "document_id": document_id}
        )
        if row is None:
            return None
        return Document(
            source_type=source_type,
            document_id=document_id,
            source_page_id=row["source_page_id"],
            title=row["title"],
            content=row["content"],
            url=row["url"],
            metadata=dict(row["metadata"]),
            source_updated_at=row["source_updated_at"],
        )

    async def current_matching(self, source_type: str, metadata: Mapping[str, Any]) -> list[Document]:
        """The live stored documents of ``source_type`` whose metadata contains ``metadata``
        (JSON containment, ``@>``), by document id, each with ``content`` ``""`` (left out)
        and audience ``None``."""
        rows = await fetch_all(
            self.db,
            _Q["current_documents_matching"],
            {"source_type": source_type, "metadata": Jsonb(dict(metadata))},
        )
        return [
            Document(
                source_type=source_type,
                document_id=row["document_id"],
                source_page_id=row["source_page_id"],
                title=row["title"],
                content="",
                url=row["url"],
                metadata=dict(row["metadata"]),
                source_updated_at=row["source_updated_at"],
            )
            for row in rows
        ]

    async def get_state(self, source_type: str, source_page_id: str) -> dict[str, Any]:
        """The syncer's saved state for one job key (``{}`` if none)."""
        row = await fetch_one(
            self.db,
            _Q["get_state"],
            {"source_type": source_type, "source_page_id": source_page_id},
        )
        return dict(row["state"]) if row else {}

    async def set_state(self, source_type: str, source_page_id: str, state: dict[str, Any]) -> None:
        """Replace the syncer's saved state for one job key.

        Raises:
            LeaseLost: in a fenced store whose claim no longer holds the job.
        """
        row = await fetch_one(
            self.db,
            _Q["set_state"],
            {
                "source_type": source_type,
                "source_page_id": source_page_id,
                "state": Jsonb(state),
                **self._fence_params(),
            },
        )
        if row is None or not row["ok"]:
            raise self._refused(f"saving the sync state of {source_page_id}")


async def purge_removed(db: Db, *, workspace_id: int | None = None, batch: int = 500) -> int:
    """Mark deleted the live documents of removed workspaces whose removal asked for it
    (``workspaces.remove(..., purge_documents=True)``; ``workspace_id``'s only, or every such
    one), in statements of at most ``batch`` documents, each its own transaction when ``db``
    is a pool: every consumer sees one deletion per document in the change feed. A document a
    sync holds is left to a later call (the pruner's). Returns how many were marked."""
    marked = 0
    while True:
        rows = await fetch_all(db, _Q["purge_removed"], {"workspace_id": workspace_id, "limit": batch})
        marked += len(rows)
        if len(rows) < batch:
            return marked
