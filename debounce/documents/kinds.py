"""A document's kind: what sort of thing a document is (issue 39; docs/consumers.md, "Kinds
of document").

The rule is the SQL function ``document_kind(source_type, document_id, metadata)`` of migration
029, written once and used by every read that filters or shows a kind (the read API's
listing and documents, the change feed, push subscriptions, ``debounce documents``). This module
holds only the names a caller may ask for, to refuse others before a query runs; the function
``document_kinds()`` of the same migration lists the same names (a test keeps them equal).

A kind of document is not a change's kind (the feed's ``op``: ``upsert`` or ``delete``), nor a
job's change kinds (what an event said changed): the parameters are named
``kind``/``document_kind`` and ``kinds``/``op`` apart.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["DOCUMENT_KINDS", "UnknownKind", "check_kind", "check_kinds"]

#: Every kind of document, in the order the docs list them: a Notion ``page`` (a data
#: source's row too), ``database`` and ``table`` (a data source: its rows as one table); a
#: Slack ``conversation`` (one thread) and ``canvas``; a ``file`` document of either source.
#: Another source's documents are ``page``.
DOCUMENT_KINDS = ("page", "database", "table", "conversation", "file", "canvas")


class UnknownKind(ValueError):
    """A kind of document not in :data:`DOCUMENT_KINDS`; ``allowed`` lists them."""

    def __init__(self, given: str) -> None:
        self.given = given
        self.allowed = DOCUMENT_KINDS
        super().__init__(f"unknown kind of document {given[:80]!r} (known: {', '.join(DOCUMENT_KINDS)})")


def check_kind(raw: str | None) -> str | None:
    """``raw`` if it is a kind of document; ``None`` for none (any kind).

    Raises:
        UnknownKind: ``raw`` is not one of :data:`DOCUMENT_KINDS`.
    """
    if raw is None or raw == "":
        return None
    if raw not in DOCUMENT_KINDS:
        raise UnknownKind(raw)
    return raw


def check_kinds(raw: Iterable[str]) -> list[str]:
    """``raw`` sorted without repeats, each a kind of document (empty: every kind).

    Raises:
        UnknownKind: the first that is not one of :data:`DOCUMENT_KINDS`.
    """
    kinds = sorted(set(raw))
    for kind in kinds:
        check_kind(kind)
    return kinds
