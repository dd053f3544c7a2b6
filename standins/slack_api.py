"""A local stand-in of the Slack Web API methods the Slack integration calls.

It speaks the documented shapes of

- ``conversations.history`` (https://docs.slack.dev/reference/methods/conversations.history):
  top-level messages of a conversation, **newest first**, between ``oldest`` and ``latest``
  (exclusive unless ``inclusive``), cursor-paginated: ``{"ok": true, "messages": [...],
  "has_more": bool, "pin_count": 0, "response_metadata": {"next_cursor": "..."}}``;
- ``conversations.replies`` (https://docs.slack.dev/reference/methods/conversations.replies):
  one thread, parent first then replies **oldest first**; a message without replies comes back
  alone; an unknown ``ts`` answers ``thread_not_found``;
- ``auth.test`` and ``oauth.v2.access``, and several teams (workspaces) with their own tokens
  and conversations: :mod:`standins.slack_teams`;
- ``users.conversations`` and ``conversations.list``, the bot's membership and bulk fixtures
  (``add_channels``): :mod:`standins.slack_conversations`;
- ``conversations.members`` and ``conversations.info``, a conversation's members
  (``set_members``, ``add_member``, ``remove_member``): :mod:`standins.slack_members`;
- files (``files.info``): :mod:`standins.slack_files`; canvases (``canvases.getContent``,
  ``files.list``, a channel canvas in ``conversations.info``), their events and missing
  scopes (``missing_scope`` with ``needed``): :mod:`standins.slack_canvases`.

Errors are HTTP 200 with ``{"ok": false, "error": "<code>"}`` as Slack answers them
(https://docs.slack.dev/apis/web-api/#responses); rate limiting is HTTP 429 with a
``Retry-After`` header in seconds and ``{"ok": false, "error": "ratelimited"}``
(https://docs.slack.dev/apis/web-api/rate-limits). The token is read from
``Authorization: Bearer <token>`` or a ``token`` parameter (missing: ``not_authed``; unknown:
``invalid_auth``; revoked: ``token_revoked``; another team's conversation:
``channel_not_found``). Parameters are accepted in the query string (``slack_sdk`` sends these
methods as GET) and in a form-encoded POST body.

Message objects carry ``type``, ``ts``, ``user`` (or ``bot_id``), ``text``; a thread parent
also ``thread_ts``, ``reply_count``, ``reply_users``, ``reply_users_count``, ``latest_reply``;
a reply ``thread_ts`` and ``parent_user_id``; an edited message ``edited: {user, ts}``; a
deleted parent that still has replies is a ``tombstone`` (https://docs.slack.dev/reference/
events/message/message_deleted and the ``tombstone`` subtype), as Slack shows it.

Use :class:`FakeSlack`: mutate it from the test thread (``post``, ``reply``, ``edit``,
``delete``, ``remove_channel``), queue faults (``rate_limit``, ``fail``, ``server_error``;
:mod:`standins.slack_faults`), read ``calls`` (a per-method counter), limit and count a team's
calls (``set_budget``, ``usage``; :mod:`standins.slack_budgets`), and serve ``app()`` with
:class:`standins.server.BackgroundServer`; point ``SLACK_API_URL`` at ``<url>/api/``.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from standins.slack_budgets import SlackBudgets
from standins.slack_canvases import SlackCanvases
from standins.slack_conversations import LISTING_METHODS, SlackConversations, decode_cursor, encode_cursor
from standins.slack_demo import (
    DEMO_SECOND_BOT_USER_ID,
    DEMO_SECOND_CHANNEL,
    DEMO_SECOND_TEAM_ID,
    DEMO_SECOND_TEAM_NAME,
    DEMO_SECOND_TOKEN,
    seed_demo,
)
from standins.slack_faults import Fault, SlackFaults
from standins.slack_files import SlackFiles
from standins.slack_members import MEMBER_METHODS, SlackMembers
from standins.slack_teams import SlackTeams, token_of

__all__ = [
    "DEMO_SECOND_BOT_USER_ID",
    "DEMO_SECOND_CHANNEL",
    "DEMO_SECOND_TEAM_ID",
    "DEMO_SECOND_TEAM_NAME",
    "DEMO_SECOND_TOKEN",
    "FakeSlack",
    "Fault",
    "ts_key",
]

#: Slack's own text of a deleted thread parent that still has replies.
TOMBSTONE_TEXT = "This message was deleted."

#: Methods this fake answers (others: ``unknown_method``, as Slack does).
METHODS = (
    "conversations.history",
    "conversations.replies",
    "auth.test",
    "oauth.v2.access",
    *LISTING_METHODS,
    *MEMBER_METHODS,
)


def ts_key(ts: str) -> tuple[int, int]:
    """Sort key of a Slack ``ts`` (``"<unix seconds>.<6-digit sequence>"``)."""
    sec, _, frac = ts.partition(".")
    return int(sec), int((frac or "0").ljust(6, "0")[:6])


def _ts(seconds: int, micros: int) -> str:
    return f"{seconds}.{micros:06d}"


def _encode_cursor(ts: str) -> str:
    return encode_cursor("next_ts", ts)


def _decode_cursor(cursor: str) -> str | None:
    ts = decode_cursor(cursor, "next_ts")
    try:
        return ts if ts is not None and ts_key(ts) else None
    except ValueError:
        return None


class FakeSlack(
    SlackConversations, SlackMembers, SlackBudgets, SlackFaults, SlackTeams, SlackFiles, SlackCanvases
):
    """In-memory Slack workspaces behind a Starlette app speaking the Web API.

    ``token``: the bot token of the default team (``None``: any token not of another team is
    the default team's); more teams, shared channels and OAuth:
    :class:`~standins.slack_teams.SlackTeams`.
    Channel ids are plain strings (``C…`` public, ``G…`` private, ``D…`` DM). All mutators
    and the HTTP handlers share one lock, so tests may mutate between syncs while the app
    runs in a :class:`~standins.server.BackgroundServer` thread. ``clock`` (seconds,
    monotonic) times the API budgets and usage counts (:mod:`standins.slack_budgets`); tests
    pass a :class:`standins.budgets.ManualClock`.
    """

    def __init__(
        self,
        token: str | None = "xoxb-test-token",
        *,
        start_ts: int = 1_763_600_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        #: Calls answered per method (faults included), e.g. ``calls["conversations.history"]``.
        self.calls: Counter[str] = Counter()
        #: Every request as ``(method, params)``, oldest first.
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._channels: dict[str, dict[str, dict[str, Any]]] = {}
        self._faults: dict[str, deque[Fault]] = {}
        self._lock = threading.RLock()
        self._clock = start_ts
        self._init_teams(token)
        self._init_budgets(clock)
        self._init_conversations()
        self._init_members()
        self._init_files()
        self._init_canvases()

    # ------------------------------------------------------------------ workspace mutation

    def advance(self, seconds: int) -> None:
        """Move the fake clock that stamps new messages forward by ``seconds``."""
        with self._lock:
            self._clock += seconds

    def _fresh_ts(self) -> str:
        while True:
            self._clock += 1
            ts = _ts(self._clock, 100)
            if not any(ts in msgs for msgs in self._channels.values()):
                return ts

    def add_channel(self, channel: str, *, team_id: str | None = None) -> None:
        """Create an empty conversation of team ``team_id`` (default: the default team);
        posting creates one implicitly."""
        with self._lock:
            self._claim(channel, team_id)
            self._channels.setdefault(channel, {})

    def remove_channel(self, channel: str) -> None:
        """Make ``channel`` unknown: its methods answer ``channel_not_found`` afterwards."""
        with self._lock:
            self._channels.pop(channel, None)
            self._channel_teams.pop(channel, None)

    def post(
        self,
        channel: str,
        text: str,
        *,
        user: str | None = "U2147483697",
        bot_id: str | None = None,
        ts: str | None = None,
        subtype: str | None = None,
        team_id: str | None = None,
        **extra: Any,
    ) -> str:
        """Post a top-level message; returns its ``ts``.

        ``ts`` defaults to one second after the previous message the fake stamped. Pass
        ``bot_id`` (and ``user=None``, ``subtype="bot_message"``) for an integration's post.
        ``team_id``: the team of a conversation this creates (default: the default team); for
        an existing one it must be a team that sees it.
        """
        with self._lock:
            self._claim(channel, team_id)
            msgs = self._channels.setdefault(channel, {})
            ts = ts or self._fresh_ts()
            if ts in msgs:
                raise ValueError(f"message {ts} already exists in {channel}")
            msg: dict[str, Any] = {"type": "message", "ts": ts, "text": text}
            if user is not None:
                msg["user"] = user
            if bot_id is not None:
                msg["bot_id"] = bot_id
            if subtype is not None:
                msg["subtype"] = subtype
            msg.update(extra)
            msgs[ts] = msg
            return ts

    def reply(
        self,
        channel: str,
        thread_ts: str,
        text: str,
        *,
        user: str | None = "U2147483698",
        ts: str | None = None,
        broadcast: bool = False,
    ) -> str:
        """Reply in the thread of ``thread_ts``; returns the reply's ``ts``.

        ``broadcast=True`` is "also send to channel" (subtype ``thread_broadcast``): the
        reply then also appears in ``conversations.history``.
        """
        with self._lock:
            msgs = self._channel(channel)
            parent = msgs.get(thread_ts)
            if parent is None or parent.get("thread_ts", thread_ts) != thread_ts:
                raise KeyError(f"no thread parent {thread_ts} in {channel}")
            ts = ts or self._fresh_ts()
            msg: dict[str, Any] = {
                "type": "message",
                "ts": ts,
                "text": text,
                "thread_ts": thread_ts,
            }
            if user is not None:
                msg["user"] = user
            if parent.get("user"):  # kept when the parent is later deleted, as in Slack
                msg["parent_user_id"] = parent["user"]
            if broadcast:
                msg["subtype"] = "thread_broadcast"
            msgs[ts] = msg
            return ts

    def edit(self, channel: str, ts: str, text: str, *, edited_ts: str | None = None) -> None:
        """Edit a message's text; it gains ``edited: {"user", "ts"}`` as Slack shows it."""
        with self._lock:
            msg = self._channel(channel)[ts]
            msg["text"] = text
            msg["edited"] = {"user": msg.get("user", ""), "ts": edited_ts or self._fresh_ts()}

    def delete(self, channel: str, ts: str, *, tombstone: bool = True) -> None:
        """Delete a message. A thread parent with replies becomes a ``tombstone`` (its
        replies stay); anything else disappears. ``tombstone=False`` removes such a parent
        outright while its replies stay (history then lacks it and ``conversations.replies``
        answers the replies alone: Slack does not document this case, the sync must cope)."""
        with self._lock:
            msgs = self._channel(channel)
            if ts not in msgs:
                raise KeyError(f"no message {ts} in {channel}")
            if tombstone and self._replies_of(msgs, ts):
                msgs[ts] = {
                    "type": "message",
                    "subtype": "tombstone",
                    "hidden": True,
                    "ts": ts,
                    "thread_ts": ts,
                    "user": "USLACKBOT",
                    "text": TOMBSTONE_TEXT,
                }
            else:
                del msgs[ts]

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Every stored message of ``channel`` (replies included), oldest first; copies."""
        with self._lock:
            msgs = self._channel(channel)
            return [copy.deepcopy(msgs[k]) for k in sorted(msgs, key=ts_key)]

    # ------------------------------------------------------------------ API logic

    def _channel(self, channel: str) -> dict[str, dict[str, Any]]:
        msgs = self._channels.get(channel)
        if msgs is None:
            raise KeyError(channel)
        return msgs

    @staticmethod
    def _replies_of(msgs: dict[str, dict[str, Any]], thread_ts: str) -> list[dict[str, Any]]:
        out = [m for ts, m in msgs.items() if ts != thread_ts and m.get("thread_ts") == thread_ts]
        out.sort(key=lambda m: ts_key(m["ts"]))
        return out

    def _present(self, msgs: dict[str, dict[str, Any]], msg: dict[str, Any]) -> dict[str, Any]:
        """A stored message as the API shows it (thread fields computed)."""
        out = copy.deepcopy(msg)
        ts = out["ts"]
        thread_ts = out.get("thread_ts")
        if thread_ts is None or thread_ts == ts:
            replies = self._replies_of(msgs, ts)
            if replies:
                users: list[str] = []
                for r in replies:
                    u = r.get("user")
                    if u and u not in users:
                        users.append(u)
                out["thread_ts"] = ts
                out["reply_count"] = len(replies)
                out["reply_users"] = users
                out["reply_users_count"] = len(users)
                out["latest_reply"] = replies[-1]["ts"]
                out["subscribed"] = False
            elif out.get("subtype") != "tombstone":
                out.pop("thread_ts", None)
        else:
            parent = msgs.get(thread_ts)
            if parent is not None and parent.get("user") and "parent_user_id" not in out:
                out["parent_user_id"] = parent["user"]
        return out

    @staticmethod
    def _limit(params: dict[str, str], default: int) -> int:
        try:
            limit = int(params.get("limit") or default)
        except ValueError:
            limit = default
        return max(1, min(limit, 999))

    @staticmethod
    def _bounds(params: dict[str, str]) -> tuple[tuple[int, int] | None, tuple[int, int] | None, bool]:
        def parse(name: str) -> tuple[int, int] | None:
            raw = params.get(name)
            if not raw or raw in ("0", "0.0"):
                return None
            return ts_key(raw)

        inclusive = params.get("inclusive") in ("1", "true", "True")
        return parse("oldest"), parse("latest"), inclusive

    def _history(self, params: dict[str, str]) -> dict[str, Any]:
        msgs = self._channels.get(params.get("channel", ""))
        if msgs is None:
            return {"ok": False, "error": "channel_not_found"}
        try:
            oldest, latest, inclusive = self._bounds(params)
        except ValueError:
            return {"ok": False, "error": "invalid_ts_oldest"}
        limit = self._limit(params, 100)
        cursor_ts: str | None = None
        if params.get("cursor"):
            cursor_ts = _decode_cursor(params["cursor"])
            if cursor_ts is None:
                return {"ok": False, "error": "invalid_cursor"}

        def visible(m: dict[str, Any]) -> bool:
            t = m.get("thread_ts")
            if t is not None and t != m["ts"] and m.get("subtype") != "thread_broadcast":
                return False
            k = ts_key(m["ts"])
            if oldest is not None and (k < oldest or (k == oldest and not inclusive)):
                return False
            if latest is not None and (k > latest or (k == latest and not inclusive)):
                return False
            return not (cursor_ts is not None and k > ts_key(cursor_ts))

        found = sorted((m for m in msgs.values() if visible(m)), key=lambda m: ts_key(m["ts"]))
        found.reverse()  # newest first
        page, rest = found[:limit], found[limit:]
        body: dict[str, Any] = {
            "ok": True,
            "messages": [self._present(msgs, m) for m in page],
            "has_more": bool(rest),
            "pin_count": 0,
            "channel_actions_ts": None,
            "channel_actions_count": 0,
        }
        body["response_metadata"] = {"next_cursor": _encode_cursor(rest[0]["ts"]) if rest else ""}
        return body

    def _replies(self, params: dict[str, str]) -> dict[str, Any]:
        msgs = self._channels.get(params.get("channel", ""))
        if msgs is None:
            return {"ok": False, "error": "channel_not_found"}
        ts = params.get("ts")
        if not ts:
            return {"ok": False, "error": "invalid_arguments"}
        root = msgs.get(ts)
        if root is None and self._replies_of(msgs, ts):
            root = {"ts": ts, "thread_ts": ts}  # a parent deleted without a tombstone
        if root is None:
            return {"ok": False, "error": "thread_not_found"}
        parent_ts = root.get("thread_ts") or ts  # ``ts`` of a reply names its thread
        parent = msgs.get(parent_ts)
        try:
            oldest, latest, inclusive = self._bounds(params)
        except ValueError:
            return {"ok": False, "error": "invalid_ts_oldest"}
        limit = self._limit(params, 1000)
        cursor_ts: str | None = None
        if params.get("cursor"):
            cursor_ts = _decode_cursor(params["cursor"])
            if cursor_ts is None:
                return {"ok": False, "error": "invalid_cursor"}

        def in_range(m: dict[str, Any]) -> bool:
            k = ts_key(m["ts"])
            if oldest is not None and (k < oldest or (k == oldest and not inclusive)):
                return False
            if latest is not None and (k > latest or (k == latest and not inclusive)):
                return False
            return not (cursor_ts is not None and k < ts_key(cursor_ts))

        thread = [parent] if parent is not None else []
        thread += self._replies_of(msgs, parent_ts)
        found = [m for m in thread if in_range(m)]
        page, rest = found[:limit], found[limit:]
        return {
            "ok": True,
            "messages": [self._present(msgs, m) for m in page],
            "has_more": bool(rest),
            "response_metadata": {"next_cursor": _encode_cursor(rest[0]["ts"]) if rest else ""},
        }

    def handle(self, method: str, params: dict[str, str], authorization: str | None) -> Response:
        """Answer one API call (the HTTP layer's logic, callable without a server)."""
        with self._lock:
            self.calls[method] += 1
            self.requests.append((method, dict(params)))
            answer = self._spend(method, params, authorization)  # the team's budget
            if answer is None:
                answer = self._injected(method)  # a queued fault
            if answer is not None:
                return answer
            token = token_of(params, authorization)
            if method == "oauth.v2.access":  # the app's credentials, not a token
                return JSONResponse(self._oauth_v2_access(params, authorization))
            if not token:
                return JSONResponse({"ok": False, "error": "not_authed"})
            team, error = self._team_for(token)
            if team is None:
                return JSONResponse({"ok": False, "error": error})
            refused = self._membership_error(method, team, params)
            lacking = self._missing_scope(method, team)
            if lacking is not None:
                body = lacking
            elif method.startswith("conversations.") and not self._can_see(team, params.get("channel", "")):
                body = {"ok": False, "error": "channel_not_found"}
            elif method in MEMBER_METHODS:
                body = self._member_method(method, team, params)
            elif method in LISTING_METHODS or refused is not None:
                body = refused or self._list_conversations(method, team, params)
            elif method == "conversations.history":
                body = self._history(params)
            elif method == "conversations.replies":
                body = self._replies(params)
            elif method == "files.info":
                body = self._files_info(params)
            elif method == "files.list":
                body = self._files_list(team, params)
            elif method == "canvases.getContent":
                body = self._canvases_get_content(team, params)
            elif method == "auth.test":
                body = self._auth_test(team)
            else:
                body = {"ok": False, "error": "unknown_method"}
            return JSONResponse(body)

    # ------------------------------------------------------------------ HTTP

    def app(self) -> Starlette:
        """The Starlette app: ``GET|POST /api/{method}`` (query or form parameters)."""

        async def api(request: Request) -> Response:
            method = request.path_params["method"]
            params: dict[str, str] = {k: v for k, v in request.query_params.items()}
            if request.method == "POST":
                ctype = request.headers.get("content-type", "")
                if ctype.startswith("application/x-www-form-urlencoded"):
                    # Parsed here: Starlette's request.form() needs python-multipart.
                    params.update(parse_qsl((await request.body()).decode(errors="replace")))
                elif ctype.startswith("multipart/form-data"):
                    form = await request.form()
                    for k, v in form.items():
                        if isinstance(v, str):
                            params[k] = v
                elif ctype.startswith("application/json"):
                    try:
                        data = await request.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict):
                        params.update({k: str(v) for k, v in data.items()})
            return self.handle(method, params, request.headers.get("authorization"))

        async def root(request: Request) -> Response:
            return PlainTextResponse("debounce fake Slack Web API: POST /api/<method>\n")

        return Starlette(
            routes=[
                Route("/api/{method}", api, methods=["GET", "POST"]),
                Route("/", root, methods=["GET"]),
            ]
        )

    # ------------------------------------------------------------------ demo content

    @classmethod
    def demo(cls, token: str | None = None) -> FakeSlack:
        """Teams seeded with realistic content, for ``debounce serve --demo``
        (:mod:`standins.slack_demo`).

        In the default team (``token``; ``None`` accepts any bot token not of another team),
        ``C2147483705`` holds the conversation of ``examples/slack`` (the thread rooted at
        ``1763682934.000200`` with the reply ``1763683000.000300``, the bot post
        ``1763683300.000600``) plus a short release thread; ``G0PRIVATE1`` is a private
        channel with the message of ``private_channel_message.json``. A second team,
        :data:`DEMO_SECOND_TEAM_ID` (token :data:`DEMO_SECOND_TOKEN`), has
        :data:`DEMO_SECOND_CHANNEL` with a short thread.
        """
        fake = cls(token=token)
        seed_demo(fake)
        return fake
