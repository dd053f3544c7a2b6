"""Who may read a document (its *audience*) and the cache a source keeps of it: part of the
contract (:mod:`debounce.contract`). The service's implementation of :class:`AudienceCache`
is :class:`debounce.documents.audiences.AudienceStore` (Postgres, ``conversation_audiences``).

A Slack document's audience is its conversation's: the kind (``conversations.info``:
``is_channel``/``is_private``/``is_mpim``/``is_im``) and, for every kind but a public channel,
the member user ids (``conversations.members``). A Notion document's is its workspace (kind
``workspace``; the workspace is the document's own) plus, when a webhook event of a public
integration said so, the ids of its ``accessible_by`` list. See docs/slack.md and
docs/notion.md, "Audience".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = ["AUDIENCE_KINDS", "CONVERSATION_KINDS", "Audience", "AudienceCache", "CachedAudience"]

#: The kinds of a Slack conversation, as ``users.conversations``' ``types`` names them.
CONVERSATION_KINDS = ("public_channel", "private_channel", "mpim", "im")
#: Every audience kind a document can carry (``workspace``: a Notion document).
AUDIENCE_KINDS = (*CONVERSATION_KINDS, "workspace")


@dataclass(frozen=True)
class Audience:
    """Who may read a document.

    ``kind``: one of :data:`AUDIENCE_KINDS`. ``members``: the conversation's member user ids
    (sorted, distinct) for ``private_channel``/``mpim``/``im``; ``None`` for a public channel
    (the whole team) and a Notion workspace. ``accessible_by``: Notion only, the user and bot
    ids of a webhook event's ``accessible_by`` (public integrations), ``None`` when unknown.

    Raises:
        ValueError: ``kind`` is not one of :data:`AUDIENCE_KINDS`.
    """

    kind: str
    members: tuple[str, ...] | None = None
    accessible_by: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in AUDIENCE_KINDS:
            raise ValueError(f"audience kind must be one of {AUDIENCE_KINDS}, got {self.kind!r}")
        if self.members is not None:
            object.__setattr__(self, "members", tuple(sorted(set(self.members))))
        if self.accessible_by is not None:
            object.__setattr__(self, "accessible_by", tuple(sorted(set(self.accessible_by))))

    def to_json(self) -> dict[str, Any]:
        """The audience as the read API and the CLI show it: ``{"kind": …, "members": [...] |
        null, "member_count": n | null, "accessible_by": [...] | null}``."""
        return {
            "kind": self.kind,
            "members": list(self.members) if self.members is not None else None,
            "member_count": len(self.members) if self.members is not None else None,
            "accessible_by": list(self.accessible_by) if self.accessible_by is not None else None,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Audience | None:
        """The audience of a ``documents`` row (``audience_kind``, ``audience_members``,
        ``audience_accessible_by``); ``None`` when the row's is unknown (NULL kind)."""
        kind = row.get("audience_kind")
        if not kind:
            return None
        members = row.get("audience_members")
        accessible = row.get("audience_accessible_by")
        return cls(
            str(kind),
            tuple(members) if members is not None else None,
            tuple(accessible) if accessible is not None else None,
        )


@dataclass(frozen=True)
class CachedAudience:
    """A conversation's audience as last learned, and when (``refreshed_at``, UTC, the
    database's clock)."""

    audience: Audience
    refreshed_at: datetime


class AudienceCache(Protocol):
    """What a source learned of its conversations' audiences (per workspace: the job's, or
    the listing's), kept by the service between syncs (:class:`debounce.documents.audiences.AudienceStore`).
    In a sync, writes are fenced by the job's claim like the documents' (a write after the
    claim was lost raises :class:`~debounce.contract.errors.LeaseLost`)."""

    async def get(self, conversation_ids: Sequence[str]) -> dict[str, CachedAudience]:
        """The cached audiences of these conversations (missing ids: never learned)."""
        ...

    async def put(self, conversation_id: str, audience: Audience) -> int:
        """Record ``audience`` (``kind`` one of :data:`CONVERSATION_KINDS`) as the
        conversation's, refreshed now, and set it on every document of job key
        ``conversation_id`` whose audience differs; returns how many documents changed.

        Raises:
            ValueError: ``audience.kind`` is not a conversation kind.
            LeaseLost: in a sync whose claim no longer holds the job (nothing written).
        """
        ...
