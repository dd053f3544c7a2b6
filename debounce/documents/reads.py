"""Reading documents: the read API's listing and lookup, the dashboard's document screens and
the CLI's ``debounce documents`` (``sql/queries/reads.sql``). Nothing here writes; every
function takes the ``Db`` to read from (a replica where the caller has one).

Rows are returned as the driver gives them (``dict``-like, datetimes timezone-aware UTC);
``content`` is included only where a function says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = [
    "browse_documents",
    "count_documents",
    "document_by_row_id",
    "get_document",
    "latest_documents",
    "list_documents",
    "newest_by_document_id",
    "page_documents",
]

_Q = queries("reads")


async def list_documents(
    db: Db,
    *,
    after_id: int,
    limit: int,
    source_type: str | None = None,
    workspace_id: int | None = None,
    updated_after: datetime | None = None,
    document_kind: str | None = None,
) -> list[Any]:
    """The read API's listing: documents with their content and ``kind`` in id order after
    ``after_id`` (keyset: each row at most once under concurrent writes), at most ``limit``,
    deleted ones included (``deleted_at`` set); each filter ``None`` for any
    (``document_kind``: a kind of document, :mod:`debounce.documents.kinds`)."""
    return await fetch_all(
        db,
        _Q["list_documents"],
        {
            "after_id": after_id,
            "limit": limit,
            "source_type": source_type,
            "workspace_id": workspace_id,
            "updated_after": updated_after,
            "document_kind": document_kind,
        },
    )


async def get_document(db: Db, source_type: str, document_id: str) -> Any | None:
    """One document (with content and ``kind``, deleted ones too) by its source and document
    id, or ``None``."""
    return await fetch_one(db, _Q["document"], {"source_type": source_type, "document_id": document_id})


async def browse_documents(
    db: Db,
    *,
    source_type: str | None,
    title: str | None,
    cursor: int | None,
    limit: int,
    workspace_id: int | None = None,
    state: str | None = None,
) -> list[Any]:
    """The dashboard's listing: documents without content, newest row id first, before
    ``cursor`` (``None``: from the newest), at most ``limit``; ``state`` ``"live"`` or
    ``"deleted"``, ``title`` a case-insensitive substring; each filter ``None`` for any."""
    return await fetch_all(
        db,
        _Q["browse_documents"],
        {
            "source_type": source_type,
            "title": title,
            "cursor": cursor,
            "limit": limit,
            "workspace_id": workspace_id,
            "state": state,
        },
    )


async def document_by_row_id(db: Db, row_id: int) -> Any | None:
    """The ``documents`` row with id ``row_id`` (every column), or ``None``."""
    return await fetch_one(db, _Q["document_by_row_id"], {"id": row_id})


async def page_documents(db: Db, source_type: str, source_page_id: str, *, limit: int) -> list[Any]:
    """The documents one job key produced (``id``, ``document_id``, ``title``, ``synced_at``,
    ``deleted_at``) by document id, at most ``limit``."""
    return await fetch_all(
        db,
        _Q["page_documents"],
        {"source_type": source_type, "source_page_id": source_page_id, "limit": limit},
    )


async def latest_documents(
    db: Db, *, source_type: str | None, limit: int, document_kind: str | None = None
) -> list[Any]:
    """``debounce documents``: documents newest row first, without content but with its length
    (``chars``) and their ``kind``, at most ``limit``; ``document_kind`` one kind of document
    (``None``: any)."""
    return await fetch_all(
        db,
        _Q["latest_documents"],
        {"source_type": source_type, "limit": limit, "document_kind": document_kind},
    )


async def newest_by_document_id(db: Db, document_id: str) -> Any | None:
    """The most recently synced document whose document id is ``document_id``, of any source
    (every column), or ``None``."""
    return await fetch_one(db, _Q["newest_by_document_id"], {"document_id": document_id})


async def count_documents(db: Db) -> int:
    """How many rows ``documents`` holds (live and marked deleted)."""
    row = await fetch_one(db, _Q["count_documents"], {})
    return int(row["n"]) if row is not None else 0
