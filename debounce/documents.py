"""Writing synced documents, the service's output, to the ``documents`` table.

The integrations' sync half calls :class:`DocumentStore`; nothing else writes ``documents``.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from debounce.db import Db, fetch_all, fetch_one
from debounce.sql import queries

__all__ = ["Document", "DocumentStore", "WriteOutcome", "content_sha256"]

_Q = queries("documents")


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

    ``document_id`` is unique within ``source_type`` (Notion: the page or database id; Slack:
    ``"<channel>/<thread_ts>"``). ``content`` is Markdown. ``source_updated_at`` is the
    source's own last-edit time, timezone-aware UTC, or ``None`` if unknown.
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
        :class:`WriteOutcome`). Un-deletes a document that was marked deleted."""
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
            },
        )
        assert row is not None
        return WriteOutcome(row["outcome"])

    async def mark_deleted(self, source_type: str, document_ids: Sequence[str]) -> list[str]:
        """Mark these documents deleted; returns the ids that were not deleted before."""
        if not document_ids:
            return []
        rows = await fetch_all(
            self.db,
            _Q["mark_deleted"],
            {"source_type": source_type, "document_ids": list(document_ids)},
        )
        return [r["document_id"] for r in rows]

    async def mark_page_deleted(self, source_type: str, source_page_id: str) -> list[str]:
        """Mark every document of job key ``source_page_id`` deleted; returns the ids marked."""
        rows = await fetch_all(
            self.db,
            _Q["mark_page_deleted"],
            {"source_type": source_type, "source_page_id": source_page_id},
        )
        return [r["document_id"] for r in rows]

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
        """Replace the integration's saved state for one job key."""
        await fetch_all(
            self.db,
            _Q["set_state"],
            {"source_type": source_type, "source_page_id": source_page_id, "state": Jsonb(state)},
        )
