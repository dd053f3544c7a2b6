"""The document a sync writes and the writer it writes through: part of the contract
(:mod:`debounce.contract`). The service's implementation is
:class:`debounce.documents.store.DocumentStore`, which fences every write by the job's claim."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from debounce.contract.audience import Audience

__all__ = ["Document", "DocumentWriter", "WriteOutcome"]


class WriteOutcome(enum.StrEnum):
    """What :meth:`DocumentStore.upsert` did."""

    INSERTED = "inserted"
    UPDATED = "updated"
    #: Same content, title, url and metadata: only ``synced_at`` moved.
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Document:
    """One document as a syncer renders it.

    ``document_id`` is unique within ``source_type`` (the page's id, or the id of a part of
    the page such as a thread, ``"<channel>/<thread_ts>"``). ``content`` is Markdown in the
    one dialect of :mod:`debounce.contract.markdown` (CommonMark + GFM; no raw HTML of a
    source's own dialect).
    ``source_updated_at`` is the source's own last-edit time, timezone-aware UTC, or ``None``
    if unknown. ``audience``: who may read it (:class:`~debounce.contract.audience.Audience`),
    ``None``: unknown (the stored audience is left as it is). ``anchors``: where the source's
    own parts of the content start, ``(character offset, the part's id in the source)`` in
    ascending offsets with unique ids (Slack: each message and its ``ts``); the service cuts
    the document's sections there instead of at its headings (docs/consumers.md, "Sections").
    """

    source_type: str
    document_id: str
    source_page_id: str
    title: str
    content: str
    url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source_updated_at: datetime | None = None
    audience: Audience | None = None
    anchors: tuple[tuple[int, str], ...] = ()


class DocumentWriter(Protocol):
    """Where a sync writes its documents and keeps its per-page state (``documents`` and
    ``sync_state``). Inside a claim every write raises
    :class:`~debounce.contract.errors.LeaseLost` once the claim no longer holds the job."""

    async def upsert(self, doc: Document) -> WriteOutcome:
        """Insert or update ``doc`` (an unchanged document is not rewritten)."""
        ...

    async def current(self, source_type: str, document_id: str) -> Document | None:
        """The live stored document (``None``: none, or marked deleted): what a sync that
        fetches only part of a page keeps of the rest. Its ``audience`` is ``None``."""
        ...

    async def current_matching(self, source_type: str, metadata: Mapping[str, Any]) -> list[Document]:
        """The live stored documents of ``source_type`` whose ``metadata`` contains
        ``metadata`` (JSON containment: every key given, recursively, with its value; e.g.
        ``{"parent": {"id": "…"}}``), in document id order, each **without its content**
        (``content`` is ``""``; read one with :meth:`current`) and with audience ``None``:
        what a sync that summarises other documents of its source reads instead of asking
        the source again."""
        ...

    async def mark_deleted(
        self, source_type: str, document_ids: Sequence[str], *, why: str = "were found gone"
    ) -> list[str]:
        """Mark these documents deleted; returns the ids marked now. The service may hold
        deletions that look like a mistake (too many of a workspace at once): held ones stay
        live and are not returned. ``why``: what the source answered, for the hold's reason
        (``"answered object_not_found"``)."""
        ...

    async def mark_page_deleted(
        self, source_type: str, source_page_id: str, *, why: str = "were found gone"
    ) -> list[str]:
        """Mark every document of job key ``source_page_id`` deleted; returns the ids marked
        now (held ones, as :meth:`mark_deleted`, are not)."""
        ...

    async def get_state(self, source_type: str, source_page_id: str) -> dict[str, Any]:
        """The source's saved state for one job key (``{}`` if none)."""
        ...

    async def set_state(self, source_type: str, source_page_id: str, state: dict[str, Any]) -> None:
        """Replace the source's saved state for one job key."""
        ...
