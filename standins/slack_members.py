"""Conversation members and details of the Slack stand-in (mixed into
:class:`standins.slack_api.FakeSlack`).

Methods (parameters in the query string or a form body, as every method of the fake):

- ``conversations.members`` (https://docs.slack.dev/reference/methods/conversations.members,
  Tier 4, "100+ per minute"): the member user ids of a conversation, cursor-paginated:
  ``{"ok": true, "members": ["U…", …], "response_metadata": {"next_cursor": "…"}}``, ``""``
  on the last page; ``limit`` default 100, capped at 999, below 1 or not a number:
  ``invalid_limit``; a cursor the fake did not give: ``invalid_cursor``; a conversation the
  team cannot see, or a private one its bot is not in: ``channel_not_found``;
- ``conversations.info`` (https://docs.slack.dev/reference/methods/conversations.info):
  ``{"ok": true, "channel": {…}}``, the conversation object the listings give (with
  ``is_member``; ``is_channel``/``is_private``/``is_im``/``is_mpim`` say its kind), same
  ``channel_not_found`` rule.

Rate limits are the fake's per-team, per-method budgets (:mod:`standins.slack_budgets`,
``set_budget(method="conversations.members", per_minute=100)`` for Tier 4): the members list
of a large channel costs one call per page, each charged and each able to answer 429.

Members come from :meth:`SlackMembers.set_members` (fixtures: ``add_member``,
``remove_member``), else a default: a DM's are the team's bot and the DM's ``user``; any other
conversation's, the team's bot alone.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from standins.slack_conversations import MAX_LIMIT, decode_cursor, encode_cursor

if TYPE_CHECKING:
    from standins.slack_teams import SlackTeam

__all__ = ["MEMBER_METHODS", "SlackMembers"]

#: The methods this module answers.
MEMBER_METHODS = ("conversations.members", "conversations.info")


class SlackMembers:
    """Members and details of the conversations of :class:`~standins.slack_api.FakeSlack`
    (which provides the conversations, teams, kinds and the lock)."""

    _lock: threading.RLock
    _channels: dict[str, dict[str, dict[str, Any]]]
    _channel_teams: dict[str, set[str]]
    _info: dict[str, dict[str, Any]]
    teams: dict[str, SlackTeam]
    team_id: str

    if TYPE_CHECKING:

        def _kind(self, channel: str) -> str: ...

        def _is_member(self, team_id: str, channel: str) -> bool: ...

        def _conversation(self, channel: str, team_id: str, *, with_member: bool) -> dict[str, Any]: ...

        def _channel_properties(self, channel: str) -> dict[str, Any] | None: ...

    def _init_members(self) -> None:
        #: Per conversation: its member user ids, in the order added.
        self._members: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ fixtures

    def set_members(self, channel: str, members: list[str]) -> None:
        """Make ``members`` (user ids) the members of ``channel``, replacing what it had.

        Raises:
            KeyError: no such conversation.
        """
        with self._lock:
            if channel not in self._channels:
                raise KeyError(channel)
            self._members[channel] = list(dict.fromkeys(members))

    def add_member(self, channel: str, user: str) -> None:
        """Add ``user`` to ``channel``'s members (as ``member_joined_channel`` reports).

        Raises:
            KeyError: no such conversation.
        """
        with self._lock:
            members = self.members_of(channel)
            if user not in members:
                self._members[channel] = [*members, user]

    def remove_member(self, channel: str, user: str) -> None:
        """Remove ``user`` from ``channel``'s members (as ``member_left_channel`` reports).

        Raises:
            KeyError: no such conversation.
        """
        with self._lock:
            self._members[channel] = [m for m in self.members_of(channel) if m != user]

    def members_of(self, channel: str) -> list[str]:
        """The member user ids of ``channel`` (set, or the default of the module docstring).

        Raises:
            KeyError: no such conversation.
        """
        with self._lock:
            if channel not in self._channels:
                raise KeyError(channel)
            if channel in self._members:
                return list(self._members[channel])
            teams = sorted(self._channel_teams.get(channel, {self.team_id}))
            bots = [self.teams[t].bot_user_id for t in teams if t in self.teams]
            if self._kind(channel) == "im":
                user = self._info.get(channel, {}).get("user") or "U0PEER00000"
                return [*bots[:1], str(user)]
            return bots[:1]

    # ------------------------------------------------------------------ API logic

    def _hidden(self, team_id: str, channel: str) -> bool:
        """A conversation these methods answer ``channel_not_found`` for: unknown, or one
        that is not public and that the team's bot is not in."""
        if channel not in self._channels:
            return True
        return self._kind(channel) != "public_channel" and not self._is_member(team_id, channel)

    def _member_method(self, method: str, team_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``conversations.members`` or ``conversations.info`` (module docstring). Called
        with the lock held."""
        channel = params.get("channel", "")
        if self._hidden(team_id, channel):
            return {"ok": False, "error": "channel_not_found"}
        if method == "conversations.info":
            conversation = self._conversation(channel, team_id, with_member=True)
            properties = self._channel_properties(channel)
            if properties is not None:
                conversation["properties"] = properties
            return {"ok": True, "channel": conversation}
        try:
            limit = int(params.get("limit") or 100)
        except ValueError:
            return {"ok": False, "error": "invalid_limit"}
        if limit < 1:
            return {"ok": False, "error": "invalid_limit"}
        limit = min(limit, MAX_LIMIT)
        members = self.members_of(channel)
        start = 0
        if params.get("cursor"):
            raw = decode_cursor(params["cursor"], "user_index")
            if raw is None or not raw.isdigit() or int(raw) > len(members):
                return {"ok": False, "error": "invalid_cursor"}
            start = int(raw)
        page = members[start : start + limit]
        rest = start + limit < len(members)
        return {
            "ok": True,
            "members": page,
            "response_metadata": {
                "next_cursor": encode_cursor("user_index", str(start + limit)) if rest else ""
            },
        }
