"""What the Slack app can see: one page of ``users.conversations`` per :meth:`backfill_page` call
(:class:`debounce.contract.Backfillable`, for backfill).

``users.conversations`` (https://docs.slack.dev/reference/methods/users.conversations) lists
"the channels and conversations your bot is party to" with a bot token — exactly the
conversations whose history the sync can read (``conversations.history`` answers
``not_in_channel`` elsewhere), unlike ``conversations.list``, which also lists every public
channel the bot is not in. From that reference page: parameters ``types`` (a comma-separated
list of ``public_channel``, ``private_channel``, ``mpim``, ``im``; default ``public_channel``
only), ``exclude_archived``, ``limit`` ("a max of 999. We recommend no more than 200 results at
a time") and ``cursor``; the conversation objects omit ``is_member`` and ``num_members``; and
"this Conversations API method's required scopes depend on the type of channel-like object":
``channels:read`` (public channels), ``groups:read`` (private channels), ``mpim:read`` (group
DMs), ``im:read`` (DMs). The install asks for all four
(``integrations.slack.install.DEFAULT_SCOPES``); a token lacking one answers ``missing_scope``:
a :class:`~debounce.contract.PermanentError` naming the scopes. The answer is ``{"ok": true,
"channels": [...], "response_metadata": {"next_cursor": "..."}}``, ``""`` on the last page
(https://docs.slack.dev/apis/web-api/pagination). Each page is one request, charged to the
team's budget like a sync's (:mod:`integrations.slack.client`).

The listing does not say when a conversation last had a message, so ``edited_at`` is ``None``:
the backfill enqueues a sync only for conversations without a document or sync state, and
the job's payload is ``{}`` — a job without an event, which makes the sync read the
conversation's history (:mod:`integrations.slack.sync`).

After the last page of conversations the listing goes on with the workspace's **canvases**:
``files.list`` with ``types=canvas`` (https://docs.slack.dev/reference/methods/files.list,
``files:read``; paged by ``page`` and ``count``, ``paging.pages``), each a ``canvas:<file id>``
item whose ``edited_at`` is the file's ``updated`` (a canvas whose document is as new is
skipped). The cursor of that part is ``canvases:<page>``. A token without ``files:read``
(``missing_scope``) ends the listing there, logged: the conversations are listed, and a full
sweep still re-checks every canvas document it did not list, one canvas job each (the job says
whether it is gone).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from debounce.contract import BackfillItem, BackfillPage, PermanentError, SyncContext
from integrations.slack.audience import AudienceKeeper
from integrations.slack.canvases import canvas_key, is_canvas
from integrations.slack.client import MissingScope, SlackCall, SlackClient

__all__ = [
    "CANVAS_CURSOR_PREFIX",
    "CONVERSATION_TYPES",
    "LIST_LIMIT",
    "SlackBackfill",
    "backfill_item",
    "canvas_item",
]

log = logging.getLogger("integrations.slack")

#: The cursor of the listing's canvases part: ``canvases:<files.list page>``.
CANVAS_CURSOR_PREFIX = "canvases:"

#: Every kind of conversation the sync handles.
CONVERSATION_TYPES = "public_channel,private_channel,mpim,im"
#: Conversations per ``users.conversations`` page: Slack's recommended maximum (200).
LIST_LIMIT = 200


def backfill_item(channel: Mapping[str, Any]) -> BackfillItem | None:
    """One conversation object as a :class:`BackfillItem` (``None``: no id): the job key is
    the conversation id (as ``message`` events name it), no edit time, an empty payload; the
    title is its ``name`` (a DM has none: ``DM <user>``)."""
    channel_id = channel.get("id")
    if not isinstance(channel_id, str) or not channel_id:
        return None
    name = channel.get("name")
    user = channel.get("user")
    title = (
        name
        if isinstance(name, str) and name
        else f"DM {user}"
        if isinstance(user, str) and user
        else channel_id
    )
    return BackfillItem(source_page_id=channel_id, edited_at=None, payload={}, title=title)


def canvas_item(f: Mapping[str, Any]) -> BackfillItem | None:
    """One canvas of ``files.list`` as a :class:`BackfillItem` (``None``: no id, or not a
    canvas): the job key ``canvas:<file id>``, its ``updated`` as the edit time, its title."""
    file_id = f.get("id")
    if not isinstance(file_id, str) or not file_id or not is_canvas(f):
        return None
    stamp = f.get("updated") or f.get("created")
    edited = (
        datetime.fromtimestamp(stamp, UTC) if isinstance(stamp, int) and not isinstance(stamp, bool) else None
    )
    title = f.get("title") or f.get("name") or file_id
    return BackfillItem(source_page_id=canvas_key(file_id), edited_at=edited, payload={}, title=str(title))


class SlackBackfill:
    """The conversations the bot is in (:class:`debounce.contract.Backfillable`), through the
    source's shared :class:`~integrations.slack.client.SlackClient`."""

    def __init__(
        self, client: SlackClient, list_limit: int = LIST_LIMIT, *, audiences: AudienceKeeper | None = None
    ) -> None:
        self.client = client
        #: Refreshes the audiences a backfill page shows changed or aged (``None``: never).
        self.audiences = audiences
        #: Conversations asked per request (``limit``; tests page with fewer).
        self.list_limit = list_limit

    async def backfill_page(
        self, cursor: str | None, context: SyncContext, *, newest_first: bool = False
    ) -> BackfillPage:
        """One page (up to :attr:`list_limit`) of the conversations the bot is a member of,
        archived ones left out, from ``cursor`` (``response_metadata.next_cursor``; ``None``:
        the first page). ``newest_first`` is ignored: the listing cannot be sorted. With an
        audience keeper and ``context.audiences``, the audiences of listed conversations whose
        kind changed or whose cache aged are refreshed first
        (:meth:`~integrations.slack.audience.AudienceKeeper.refresh_listed`: a
        ``conversations.members`` listing each, charged to the budget).

        Raises:
            BudgetExhausted: the workspace's budget is empty (nothing sent).
            RateLimited: Slack answered 429 (``Retry-After`` seconds).
            AuthRevoked: ``invalid_auth``, ``token_revoked`` and the like.
            PermanentError: no token; ``missing_scope`` and other permanent errors.
            SlackApiFailure: 5xx or another error worth retrying.
        """
        if not self.client.token(context):
            raise PermanentError(
                "SLACK_BOT_TOKEN is not set: set it to the app's Bot User OAuth Token (xoxb-…) "
                "to list Slack conversations"
            )
        call = self.client.bind(context)
        if cursor is not None and cursor.startswith(CANVAS_CURSOR_PREFIX):
            return await self._canvases_page(call, cursor)
        data = await call.call(
            "users.conversations",
            types=CONVERSATION_TYPES,
            exclude_archived=True,
            limit=self.list_limit,
            cursor=cursor or None,
        )
        assert data is not None  # only conversations.replies answers None
        if self.audiences is not None:
            await self.audiences.refresh_listed(
                call, [c for c in data.get("channels") or [] if isinstance(c, dict)]
            )
        items = [
            d
            for c in data.get("channels") or []
            if isinstance(c, dict)
            if (d := backfill_item(c)) is not None
        ]
        meta = data.get("response_metadata")
        next_cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
        if not (isinstance(next_cursor, str) and next_cursor):
            next_cursor = f"{CANVAS_CURSOR_PREFIX}1"  # the conversations are done: the canvases
        return BackfillPage(items=items, cursor=next_cursor)

    async def _canvases_page(self, call: SlackCall, cursor: str) -> BackfillPage:
        """One ``files.list`` page of canvases (module docstring); ``cursor``
        ``canvases:<page>``. A token without ``files:read`` ends the listing."""
        raw = cursor.removeprefix(CANVAS_CURSOR_PREFIX)
        page = int(raw) if raw.isdigit() and int(raw) > 0 else 1
        try:
            data = await call.call("files.list", types="canvas", count=self.list_limit, page=page)
        except MissingScope as exc:
            log.warning("Slack canvases not listed: %s", exc)
            return BackfillPage(items=[], cursor=None)
        assert data is not None
        items = [
            d for f in data.get("files") or [] if isinstance(f, dict) if (d := canvas_item(f)) is not None
        ]
        paging = data.get("paging")
        pages = paging.get("pages") if isinstance(paging, dict) else None
        more = isinstance(pages, int) and page < pages
        return BackfillPage(items=items, cursor=f"{CANVAS_CURSOR_PREFIX}{page + 1}" if more else None)
