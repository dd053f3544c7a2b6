"""Who may read each document: the service's side of :mod:`debounce.contract.audience`.

- :class:`AudienceStore`: the :class:`~debounce.contract.AudienceCache` a sync (fenced by its
  claim) or a listing reaches: ``conversation_audiences`` per (source, workspace,
  conversation), and the audience columns of that conversation's documents (migration 012,
  ``sql/queries/audiences.sql``);
- :func:`list_visible`: the read API's ``visible_to=<user id>`` listing for a source whose
  documents carry audiences (``Source.audiences``: Slack) — the public channel documents plus
  the documents of the conversations the user is a member of.

The audience a consumer sees is :meth:`Audience.to_json` of :func:`audience_of` a row:
``{"kind", "members", "member_count", "accessible_by"}`` or ``null`` (unknown: synced before
migration 012).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from debounce import registry
from debounce.contract.audience import CONVERSATION_KINDS, Audience, CachedAudience
from debounce.contract.errors import LeaseLost
from debounce.contract.jobs import SyncJob
from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = ["MAX_PAGE", "AudienceStore", "audience_json", "audience_of", "describe", "list_visible", "short"]

_Q = queries("audiences")

#: The largest page :func:`list_visible` returns.
MAX_PAGE = 1000


def audience_of(row: Mapping[str, Any]) -> Audience | None:
    """The audience of a ``documents`` row, ``None`` when unknown."""
    return Audience.from_row(row)


def audience_json(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The audience of a ``documents`` row as the read API answers it (``None``: unknown)."""
    audience = audience_of(row)
    return audience.to_json() if audience is not None else None


#: Ids shown before "…" in :func:`describe`.
_SHOWN = 12


def _ids(ids: Sequence[str]) -> str:
    more = f", … ({len(ids) - _SHOWN} more)" if len(ids) > _SHOWN else ""
    return ", ".join(ids[:_SHOWN]) + more


def describe(row: Mapping[str, Any]) -> str:
    """One line saying who may read a ``documents`` row, for the dashboard and the CLI, e.g.
    ``Slack private channel: 3 members (U1, U2, U3)``, ``Slack public channel: the whole
    team``, ``Notion workspace: accessible by 2 (…)``, or ``unknown`` for a document synced
    before audiences were recorded. The kind's words are its source's
    (``Source.audience_labels``, by the row's ``source_type``)."""
    audience = audience_of(row)
    if audience is None:
        return "unknown (synced before audiences were recorded; its next sync records it)"
    source = registry.sources().get(str(row.get("source_type")))
    text = source.audience_labels.get(audience.kind, audience.kind) if source else audience.kind
    if audience.kind == "public_channel":
        return f"{text}: the whole team"
    if audience.members is not None:
        n = len(audience.members)
        return f"{text}: {n} member{'s' if n != 1 else ''} ({_ids(audience.members)})"
    if audience.accessible_by:
        return (
            f"{text}: accessible by {len(audience.accessible_by)} "
            f"({_ids(audience.accessible_by)}), as its latest event said"
        )
    return f"{text}: whoever the page is shared with there (the source does not say)"


def short(row: Mapping[str, Any]) -> str:
    """A few characters of the audience for a listing, a count in parentheses (members, or the
    accessible_by list of a Notion page): ``public``, ``private(3)``, ``mpim(4)``, ``im(2)``,
    ``workspace`` (``workspace(2)`` with an accessible_by list), ``-`` unknown. (``private:3``
    before: ``workspace:2`` read like workspace number 2.)"""
    audience = audience_of(row)
    if audience is None:
        return "-"
    name = {"public_channel": "public", "private_channel": "private"}.get(audience.kind, audience.kind)
    listed = audience.members if audience.members is not None else audience.accessible_by
    return f"{name}({len(listed)})" if listed else name


class AudienceStore:
    """``conversation_audiences`` of one source and workspace over a connection or pool (see
    the module): the service's :class:`~debounce.contract.AudienceCache`. ``fence``: ``(job
    id, lease token)`` every write is checked against (:meth:`fenced`); ``None``: unfenced (a
    listing, tests)."""

    def __init__(
        self, db: Db, source_type: str, workspace_id: int | None, fence: tuple[int, str] | None = None
    ) -> None:
        self.db = db
        self.source_type = source_type
        self.workspace_id = workspace_id
        self.fence = fence

    @classmethod
    def fenced(cls, db: Db, job: SyncJob) -> AudienceStore:
        """The store of ``job``'s source and workspace, its writes fenced by ``job``'s claim.

        Raises:
            ValueError: ``job`` carries no lease token (it was not returned by a claim).
        """
        if job.lease_token is None:
            raise ValueError(f"job {job.id} carries no lease token: fence with a claimed job")
        return cls(db, job.source_type, job.workspace_id, (job.id, str(job.lease_token)))

    async def get(self, conversation_ids: Sequence[str]) -> dict[str, CachedAudience]:
        """The cached audiences of these conversations (missing ids: never learned)."""
        if not conversation_ids:
            return {}
        rows = await fetch_all(
            self.db,
            _Q["get_audiences"],
            {
                "source_type": self.source_type,
                "workspace_id": self.workspace_id,
                "conversation_ids": list(conversation_ids),
            },
        )
        return {
            r["conversation_id"]: CachedAudience(
                Audience(r["kind"], tuple(r["members"]) if r["members"] is not None else None),
                r["refreshed_at"].astimezone(UTC),
            )
            for r in rows
        }

    async def put(self, conversation_id: str, audience: Audience) -> int:
        """Record the conversation's audience, refreshed now, and set it on the documents of
        job key ``conversation_id`` whose audience differs; returns how many changed.

        Raises:
            ValueError: ``audience.kind`` is not one of the conversation kinds.
            LeaseLost: fenced, and the claim no longer holds the job (nothing written).
        """
        if audience.kind not in CONVERSATION_KINDS:
            raise ValueError(
                f"a conversation's audience kind is one of {CONVERSATION_KINDS}, got {audience.kind!r}"
            )
        row = await fetch_one(
            self.db,
            _Q["put_audience"],
            {
                "source_type": self.source_type,
                "workspace_id": self.workspace_id,
                "conversation_id": conversation_id,
                "kind": audience.kind,
                "members": list(audience.members) if audience.members is not None else None,
                "fence_job_id": self.fence[0] if self.fence else None,
                "fence_lease_token": self.fence[1] if self.fence else None,
            },
        )
        if row is None or not row["ok"]:
            job = self.fence[0] if self.fence else "?"
            raise LeaseLost(
                f"job {job} lost its claim before recording the audience of "
                f"{conversation_id}: nothing written"
            )
        return int(row["changed"])


async def list_visible(
    db: Db,
    *,
    source_type: str,
    workspace_id: int,
    user_id: str,
    after_id: int = 0,
    limit: int = 100,
    include_deleted: bool = False,
    updated_after: datetime | None = None,
    document_kind: str | None = None,
) -> list[dict[str, Any]]:
    """One page of the documents of ``source_type`` (a source whose documents carry
    audiences: Slack) in workspace ``workspace_id`` (``workspaces.id``) that its user
    ``user_id`` may read: the public channel documents plus those whose
    conversation members include the user (``sql/queries/audiences.sql``, ``list_visible``), as
    ``documents`` rows (dicts) in ``id`` order after ``after_id``; the next page starts after
    the last row's ``id``. Deleted documents only with ``include_deleted``; ``updated_after``
    (aware): only documents updated after it; ``document_kind``: only that kind of document
    (each row carries its ``kind``, migration 029). Documents of other sources and of unknown
    audience are never returned.

    Raises:
        ValueError: ``limit`` outside 1..:data:`MAX_PAGE`, ``after_id`` negative or an empty
            ``user_id``.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    if after_id < 0:
        raise ValueError(f"after_id must be 0 or more, got {after_id}")
    if not user_id:
        raise ValueError("user_id must be a user id of the source, such as U0123ABCD")
    rows = await fetch_all(
        db,
        _Q["list_visible"],
        {
            "source_type": source_type,
            "workspace_id": workspace_id,
            "visible_to": user_id,
            "after_id": after_id,
            "limit": limit,
            "include_deleted": include_deleted,
            "updated_after": updated_after,
            "document_kind": document_kind,
        },
    )
    return [dict(r) for r in rows]
