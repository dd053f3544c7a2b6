"""Who may read a Slack conversation's documents: its kind and, for all but public channels,
its members (:class:`debounce.contract.Audience`).

- The kind comes from the conversation object (``conversations.info``,
  https://docs.slack.dev/reference/methods/conversations.info, or a listing's objects):
  ``is_im`` → ``im``, ``is_mpim`` → ``mpim``, ``is_private`` (or ``is_group``) →
  ``private_channel``, else ``public_channel``
  (https://docs.slack.dev/reference/objects/conversation-object).
- The members come from ``conversations.members``
  (https://docs.slack.dev/reference/methods/conversations.members, Tier 4, "100+ per
  minute"), cursor-paginated (``limit`` up to 999, Slack recommends no more than 200;
  https://docs.slack.dev/apis/web-api/pagination). The pages are followed here, by
  ``response_metadata.next_cursor``, rather than with the SDK's paginator (``async for page
  in response``), for the reason :mod:`debounce.contract.backfill` gives: each page goes
  through :func:`~integrations.slack.client.call_api`, is charged to the workspace's budget
  and kept in the sync's checkpoint, so a sync that runs out of budget between two pages
  resumes at the page it missed without paying again for what it read (with the paginator,
  a large channel on a small budget would read its first pages again on every attempt and
  never finish). A public channel's audience is the whole team: its members are not listed.

What was learned is kept in the service's cache (``SyncContext.audiences``,
:class:`debounce.contract.AudienceCache`), which also sets it on the conversation's stored
documents. A sync uses the cached audience while it is younger than
``SLACK_AUDIENCE_MAX_AGE_SECONDS`` (a busy channel does not list its members on every sync);
``member_joined_channel`` / ``member_left_channel`` events refresh it at once (a job keyed
:func:`members_key`), and a reconciliation refreshes what its listing shows changed or
aged (:meth:`AudienceKeeper.refresh_listed`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from debounce.contract import Audience, AudienceCache, BudgetExhausted, CachedAudience
from integrations.slack.client import SlackCall, SlackClient, _ChannelGone

__all__ = ["MEMBERS_KEY_PREFIX", "MEMBERS_PAGE_LIMIT", "AudienceKeeper", "kind_of", "members_key"]

#: Members asked per ``conversations.members`` page (Slack recommends no more than 200).
MEMBERS_PAGE_LIMIT = 200
#: The job key prefix of a member-list refresh (``members:<conversation id>``).
MEMBERS_KEY_PREFIX = "members:"


def members_key(channel: str) -> str:
    """The job key of the refresh of ``channel``'s members (kept apart from the
    conversation's own job, whose latest event would otherwise replace a member event)."""
    return f"{MEMBERS_KEY_PREFIX}{channel}"


def kind_of(conversation: Mapping[str, Any]) -> str:
    """The audience kind of a conversation object (module docstring)."""
    if conversation.get("is_im"):
        return "im"
    if conversation.get("is_mpim"):
        return "mpim"
    if conversation.get("is_private") or conversation.get("is_group"):
        return "private_channel"
    return "public_channel"


class AudienceKeeper:
    """Learns and caches conversation audiences through the source's
    :class:`~integrations.slack.client.SlackClient` (see the module). ``max_age_seconds``:
    how long a cached audience is used before a sync lists it again."""

    def __init__(
        self, client: SlackClient, max_age_seconds: float, page_limit: int = MEMBERS_PAGE_LIMIT
    ) -> None:
        self.client = client
        self.max_age = timedelta(seconds=max(0.0, max_age_seconds))
        self.page_limit = max(1, min(page_limit, 999))

    def _fresh(self, cached: CachedAudience | None, now: datetime) -> bool:
        return cached is not None and now - cached.refreshed_at < self.max_age

    async def for_sync(
        self, call: SlackCall, channel: str, *, force: bool = False, now: datetime | None = None
    ) -> Audience:
        """``channel``'s audience for the documents a sync writes: the cached one while fresh
        (``force``: never), else learned from Slack and cached (which also updates the
        conversation's stored documents).

        Raises:
            the errors of :func:`~integrations.slack.client.call_api` (``_ChannelGone``:
            the conversation is gone or hidden from the app).
        """
        cache = call.context.audiences
        now = now or datetime.now(UTC)
        if cache is not None and not force:
            cached = (await cache.get([channel])).get(channel)
            if cached is not None and self._fresh(cached, now):
                return cached.audience
        return await self.learn(call, channel, cache)

    async def learn(
        self, call: SlackCall, channel: str, cache: AudienceCache | None, *, kind: str | None = None
    ) -> Audience:
        """Ask Slack for ``channel``'s kind (``conversations.info``, unless ``kind`` is
        given) and members (``conversations.members``, all pages; not for a public channel),
        and record them in ``cache`` (if any)."""
        if kind is None:
            info = await call.call("conversations.info", channel=channel)
            conversation = (info or {}).get("channel")
            kind = kind_of(conversation if isinstance(conversation, Mapping) else {})
        members: tuple[str, ...] | None = None
        if kind != "public_channel":
            members = await self._members(call, channel)
        audience = Audience(kind, members)
        if cache is not None:
            await cache.put(channel, audience)
        return audience

    async def _members(self, call: SlackCall, channel: str) -> tuple[str, ...]:
        """Every page of ``conversations.members``, following ``response_metadata.next_cursor``
        (module docstring)."""
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = await call.call(
                "conversations.members", channel=channel, limit=self.page_limit, cursor=cursor
            )
            page = page or {}
            found.extend(m for m in page.get("members") or [] if isinstance(m, str))
            meta = page.get("response_metadata")
            cursor = meta.get("next_cursor") if isinstance(meta, Mapping) else None
            if not (isinstance(cursor, str) and cursor):
                return tuple(found)

    async def refresh_listed(
        self, call: SlackCall, conversations: Sequence[Mapping[str, Any]], *, now: datetime | None = None
    ) -> int:
        """The reconciliation's part: of one backfill page's conversation objects,
        refresh those whose cached kind differs from the listing's or whose cache is older
        than the maximum age (or missing); returns how many were refreshed. No-op without a
        cache in ``call.context``. A dry budget ends the refresh (the page's listing is what
        must get through; the rest are refreshed by their next syncs or the next reconciliation).

        Raises:
            the errors of :func:`~integrations.slack.client.call_api` but ``_ChannelGone`` (a
            conversation gone since the listing is skipped) and ``BudgetExhausted``.
        """
        cache = call.context.audiences
        if cache is None:
            return 0
        now = now or datetime.now(UTC)
        kinds = {str(c["id"]): kind_of(c) for c in conversations if isinstance(c.get("id"), str) and c["id"]}
        cached = await cache.get(list(kinds))
        refreshed = 0
        for channel, kind in kinds.items():
            known = cached.get(channel)
            if known is not None and known.audience.kind == kind and self._fresh(known, now):
                continue
            try:
                await self.learn(call, channel, cache, kind=kind)
            except _ChannelGone:
                continue  # gone since the listing: its next sync says so
            except BudgetExhausted:
                # The refresh is the reconciliation's extra: a dry budget ends it, never the listing
                # page (which would be retried as soon as one request is available, spend it
                # on the listing again and never get further). The rest are refreshed by
                # their conversations' next syncs or the next reconciliation.
                break
            refreshed += 1
        return refreshed
