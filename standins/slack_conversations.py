"""Conversation listings of the Slack stand-in, membership and bulk fixtures (mixed into
:class:`standins.slack_api.FakeSlack`).

Methods (parameters in the query string or a form body, as every method of the fake):

- ``users.conversations`` (https://docs.slack.dev/reference/methods/users.conversations):
  "the channels and conversations your bot is party to" — the conversations of the token's
  team its bot is a member of. The page says its conversation objects omit ``is_member`` and
  ``num_members``;
- ``conversations.list`` (https://docs.slack.dev/reference/methods/conversations.list): every
  public channel of the team, member or not, plus the private channels, group DMs and DMs the
  bot is in, each with ``is_member``.

Both take ``types`` (comma-separated ``public_channel``, ``private_channel``, ``mpim``,
``im``; default ``public_channel``; anything else answers ``invalid_types``),
``exclude_archived`` (``true``/``1``), ``limit`` (default 100; not a number or below 1:
``invalid_limit``; above 999, the current reference's maximum, it is capped) and ``cursor``
(a ``next_cursor`` of an earlier answer, else ``invalid_cursor``), and answer ``{"ok": true,
"channels": [...], "response_metadata": {"next_cursor": "..."}}`` with ``""`` on the last
page (https://docs.slack.dev/apis/web-api/pagination). Conversations come in id order; the
cursor names the next id, so a listing resumed from it skips nothing that existed before.

Conversation objects follow https://docs.slack.dev/reference/objects/conversation-object:
``id``, ``name``, ``is_channel``, ``is_group``, ``is_im``, ``is_mpim``, ``is_private``,
``created`` (Unix seconds), ``updated`` (Unix milliseconds), ``is_archived``, ``is_general``,
``name_normalized``, ``is_shared``, ``is_ext_shared``, ``is_org_shared``, ``creator``,
``topic``, ``purpose``, ``context_team_id``; a DM has ``user`` and no ``name``.

A conversation's kind and name come from :meth:`SlackConversations.describe_channel`, else
from its id (``C…`` public channel, ``G…`` private, ``D…`` DM; named after the lower-cased
id). The bot is a member of every conversation until :meth:`~SlackConversations.set_member`
says otherwise; then ``conversations.history`` and ``conversations.replies`` answer
``not_in_channel`` for a public channel and ``channel_not_found`` for another kind, as Slack
does for a conversation the bot is not in
(https://docs.slack.dev/reference/methods/conversations.history, "Errors").
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

__all__ = ["LISTING_METHODS", "TYPES", "SlackConversations", "decode_cursor", "encode_cursor"]

#: The listing methods this module answers.
LISTING_METHODS = ("users.conversations", "conversations.list")
#: Conversation types of the ``types`` parameter, and the kind of each.
TYPES = ("public_channel", "private_channel", "mpim", "im")
#: Largest ``limit`` honoured ("a max of 999", users.conversations' reference).
MAX_LIMIT = 999
_PREFIX_KINDS = {"C": "public_channel", "G": "private_channel", "D": "im"}


def encode_cursor(key: str, value: str) -> str:
    """An opaque cursor pointing at ``value`` (``base64("<key>:<value>")``): Slack's cursors
    are base64 strings such as ``bmV4dF90czoxNTEyMDg1ODYxMDAwNTQz`` ("next_ts:1512085861000543",
    https://docs.slack.dev/apis/web-api/pagination); these have the same flavour."""
    return base64.b64encode(f"{key}:{value}".encode()).decode()


def decode_cursor(cursor: str, key: str) -> str | None:
    """The value of a cursor :func:`encode_cursor` made with ``key``, else ``None``."""
    try:
        raw = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    prefix, _, value = raw.partition(":")
    return value if prefix == key and value else None


class SlackConversations:
    """Listings, membership and bulk fixtures of :class:`~standins.slack_api.FakeSlack`
    (which provides the conversations, their teams and the lock)."""

    _lock: threading.RLock
    _channels: dict[str, dict[str, dict[str, Any]]]
    _channel_teams: dict[str, set[str]]
    _clock: int
    team_id: str

    if TYPE_CHECKING:

        def _claim(self, channel: str, team_id: str | None) -> None: ...

    def _init_conversations(self) -> None:
        #: Per conversation: kind, name, user, created, archived, topic, purpose.
        self._info: dict[str, dict[str, Any]] = {}
        #: Per conversation: the teams whose bot is not a member.
        self._outside: dict[str, set[str]] = {}
        self._seq = 0

    # ------------------------------------------------------------------ fixtures

    def describe_channel(
        self,
        channel: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        user: str | None = None,
        archived: bool | None = None,
        created: int | None = None,
        topic: str | None = None,
        purpose: str | None = None,
        team_id: str | None = None,
    ) -> None:
        """Set what the listings say of ``channel`` (created, empty, in team ``team_id``,
        if new): ``kind`` one of :data:`TYPES`, ``name`` (a DM has none: ``user`` is the
        person), ``archived``, ``created`` (Unix seconds), ``topic``, ``purpose``.

        Raises:
            ValueError: ``kind`` is not one of :data:`TYPES`.
        """
        if kind is not None and kind not in TYPES:
            raise ValueError(f"kind must be one of {TYPES}, got {kind!r}")
        with self._lock:
            self._claim(channel, team_id)
            self._channels.setdefault(channel, {})
            info = self._info.setdefault(channel, {"created": self._clock})
            given = {
                "kind": kind,
                "name": name,
                "user": user,
                "archived": archived,
                "created": created,
                "topic": topic,
                "purpose": purpose,
            }
            info.update({k: v for k, v in given.items() if v is not None})

    def set_member(self, channel: str, member: bool = True, *, team_id: str | None = None) -> None:
        """Make team ``team_id``'s bot (default: the default team's) a member of
        ``channel`` or not.

        Raises:
            KeyError: no such conversation.
        """
        with self._lock:
            if channel not in self._channels:
                raise KeyError(channel)
            outside = self._outside.setdefault(channel, set())
            (outside.discard if member else outside.add)(team_id or self.team_id)

    def add_channels(
        self,
        n: int,
        team_id: str | None = None,
        member: bool = True,
        messages: int = 0,
        *,
        kind: str = "public_channel",
        name: str = "bulk",
    ) -> list[str]:
        """Create ``n`` conversations of ``kind`` in team ``team_id`` (default: the default
        team), named ``<name>-<i>``, the bot a ``member`` of each or not, each with
        ``messages`` top-level messages (one second apart on the fake's clock); returns
        their ids (``C…``, ``G…`` or ``D…`` by kind), in the listings' order."""
        prefix = {"public_channel": "C", "im": "D"}.get(kind, "G")
        ids: list[str] = []
        with self._lock:
            for i in range(n):
                while True:
                    self._seq += 1
                    channel = f"{prefix}0BULK{self._seq:06d}"
                    if channel not in self._channels:
                        break
                self.describe_channel(
                    channel,
                    kind=kind,
                    team_id=team_id,
                    name=None if kind == "im" else f"{name}-{i}",
                    user=f"U0PEER{i:05d}" if kind == "im" else None,
                )
                if not member:
                    self.set_member(channel, False, team_id=team_id)
                msgs = self._channels[channel]
                for j in range(messages):
                    self._clock += 1
                    ts = f"{self._clock}.000100"
                    msgs[ts] = {
                        "type": "message",
                        "ts": ts,
                        "user": "U2147483697",
                        "text": f"{name}-{i} message {j + 1}",
                    }
                ids.append(channel)
        return ids

    # ------------------------------------------------------------------ API logic

    def _kind(self, channel: str) -> str:
        kind = self._info.get(channel, {}).get("kind")
        return str(kind) if kind else _PREFIX_KINDS.get(channel[:1], "public_channel")

    def _is_member(self, team_id: str, channel: str) -> bool:
        return team_id not in self._outside.get(channel, set())

    def _membership_error(
        self, method: str, team_id: str, params: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """The error of ``conversations.history``/``replies`` on a conversation the team's
        bot is not in (module docstring), else ``None``. Called with the lock held."""
        channel = params.get("channel", "")
        if (
            method not in ("conversations.history", "conversations.replies")
            or channel not in self._channels
            or self._is_member(team_id, channel)
        ):
            return None
        public = self._kind(channel) == "public_channel"
        return {"ok": False, "error": "not_in_channel" if public else "channel_not_found"}

    def _conversation(self, channel: str, team_id: str, *, with_member: bool) -> dict[str, Any]:
        info = self._info.get(channel, {})
        kind = self._kind(channel)
        created = int(info.get("created") or self._created(channel))
        member = self._is_member(team_id, channel)
        shared = len(self._channel_teams.get(channel, ())) > 1
        out: dict[str, Any] = {
            "id": channel,
            "created": created,
            "updated": created * 1000,
            "is_archived": bool(info.get("archived")),
            "context_team_id": team_id,
        }
        if kind == "im":
            out.update(
                {
                    "is_im": True,
                    "is_org_shared": False,
                    "priority": 0,
                    "user": info.get("user") or "U0PEER00000",
                    "is_user_deleted": False,
                }
            )
        else:
            name = str(info.get("name") or channel.lower())
            if kind == "mpim" and not info.get("name"):
                name = f"mpdm-{channel.lower()}-1"
            text = {"topic": str(info.get("topic") or ""), "purpose": str(info.get("purpose") or "")}
            out.update(
                {
                    "name": name,
                    "name_normalized": name,
                    "is_channel": kind == "public_channel",
                    "is_group": kind == "private_channel",
                    "is_im": False,
                    "is_mpim": kind == "mpim",
                    "is_private": kind != "public_channel",
                    "is_general": False,
                    "unlinked": 0,
                    "is_shared": shared,
                    "is_ext_shared": shared,
                    "is_org_shared": False,
                    "is_pending_ext_shared": False,
                    "pending_shared": [],
                    "creator": "U2147483697",
                    "previous_names": [],
                    **{
                        k: {
                            "value": v,
                            "creator": "U2147483697" if v else "",
                            "last_set": created if v else 0,
                        }
                        for k, v in text.items()
                    },
                }
            )
        if with_member:
            out["is_member"] = member
        return out

    def _created(self, channel: str) -> int:
        stamps = [int(ts.split(".", 1)[0]) for ts in self._channels.get(channel, {})]
        return min(stamps, default=self._clock)

    def _list_conversations(self, method: str, team_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``users.conversations`` or ``conversations.list`` for ``team_id`` (module
        docstring). Called with the lock held."""
        types = [t.strip() for t in (params.get("types") or "public_channel").split(",") if t.strip()]
        if not types or any(t not in TYPES for t in types):
            return {"ok": False, "error": "invalid_types"}
        try:
            limit = int(params.get("limit") or 100)
        except ValueError:
            return {"ok": False, "error": "invalid_limit"}
        if limit < 1:
            return {"ok": False, "error": "invalid_limit"}
        limit = min(limit, MAX_LIMIT)
        start: str | None = None
        if params.get("cursor"):
            start = decode_cursor(params["cursor"], "next_id")
            if start is None:
                return {"ok": False, "error": "invalid_cursor"}
        skip_archived = params.get("exclude_archived") in ("1", "true", "True")
        mine = method == "users.conversations"
        found: list[str] = []
        for channel in sorted(self._channels):
            if team_id not in self._channel_teams.get(channel, ()) or self._kind(channel) not in types:
                continue
            if skip_archived and self._info.get(channel, {}).get("archived"):
                continue
            public = self._kind(channel) == "public_channel"
            if (mine or not public) and not self._is_member(team_id, channel):
                continue
            if start is None or channel >= start:
                found.append(channel)
        page, rest = found[:limit], found[limit:]
        return {
            "ok": True,
            "channels": [self._conversation(c, team_id, with_member=not mine) for c in page],
            "response_metadata": {"next_cursor": encode_cursor("next_id", rest[0]) if rest else ""},
        }
