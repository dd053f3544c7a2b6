"""Slack: Events API webhooks in, one Markdown document per thread out.

**Parse half** (web process, no I/O). Every delivery is verified with Slack's request signing
(``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>">`` keyed by the app's
signing secret, ``X-Slack-Request-Timestamp`` within 5 minutes;
https://docs.slack.dev/authentication/verifying-requests-from-slack). ``url_verification``
is answered with its challenge (https://docs.slack.dev/reference/events/url_verification);
``app_rate_limited`` is a warning (https://docs.slack.dev/apis/events-api/#rate-limiting);
an ``event_callback`` whose event is a ``message`` (any subtype; channels, private channels,
DMs; https://docs.slack.dev/reference/events/message) becomes one job keyed by the
conversation id, deduplicated by the envelope's ``event_id`` (stable across Slack's retries,
which carry ``X-Slack-Retry-Num``). Other event types are acknowledged and ignored.

**Sync half** (worker). The job key is a conversation. The sync reads
``conversations.history`` (https://docs.slack.dev/reference/methods/conversations.history)
from the conversation's stored watermark minus a look-back window, newest first, following
``response_metadata.next_cursor``; threads whose ``reply_count``/``latest_reply`` (or root
text) changed are read with ``conversations.replies``
(https://docs.slack.dev/reference/methods/conversations.replies). One document per thread,
``document_id = "<channel>/<thread_ts>"`` (a message without replies is a thread of one).
The job's latest event payload is used as a hint for what the window cannot see: an edited
or deleted reply, a reply to an old thread, a deleted root. The per-conversation state
(``sync_state``) holds the watermark, an in-progress scan and a fingerprint per recent thread;
it is written only after the documents it describes. See ``docs/slack.md`` for the choices.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import Clock, SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from debounce.config import Settings
from debounce.documents import Document, DocumentStore, WriteOutcome
from debounce.types import SyncJob
from integrations.base import (
    PageEvent,
    PermanentError,
    RateLimited,
    SyncResult,
    WebhookError,
    WebhookResult,
    header,
)

__all__ = [
    "SOURCE_TYPE",
    "SlackApiFailure",
    "SlackIntegration",
    "create",
    "mrkdwn_to_markdown",
    "render_thread",
]

SOURCE_TYPE = "slack"

log = logging.getLogger(__name__)

#: Slack refuses requests whose timestamp is more than 5 minutes from now (replay protection);
#: https://docs.slack.dev/authentication/verifying-requests-from-slack
SIGNATURE_MAX_AGE_SECONDS = 300
#: Default look-back below the watermark re-read on every sync, in seconds, so recent edits
#: and deletions are seen (overridable per instance).
DEFAULT_LOOKBACK_SECONDS = 3600.0
#: Messages per ``conversations.history``/``replies`` page. Slack recommends no more than 200
#: (https://docs.slack.dev/apis/web-api/pagination).
DEFAULT_PAGE_LIMIT = 200
#: Retry-After used when a 429 carries none, in seconds (tier 3 is about 50 calls/minute).
DEFAULT_RETRY_AFTER_SECONDS = 60.0
#: HTTP timeout of one Web API call, in seconds.
HTTP_TIMEOUT_SECONDS = 30.0

#: Error codes after which retrying cannot help, with what the operator should do
#: (https://docs.slack.dev/reference/methods/conversations.history#errors).
PERMANENT_ERRORS: Mapping[str, str] = {
    "invalid_auth": "SLACK_BOT_TOKEN is not a valid token for this workspace",
    "not_authed": "no token was sent: set SLACK_BOT_TOKEN",
    "token_revoked": "the bot token was revoked: reinstall the app and update SLACK_BOT_TOKEN",
    "token_expired": "the bot token expired: refresh it and update SLACK_BOT_TOKEN",
    "account_inactive": "the app's bot user or the workspace is deactivated",
    "not_in_channel": "the app is not a member: invite it to the channel (/invite @app)",
    "channel_not_found": "the conversation is gone or the app cannot see it",
    "missing_scope": "add the channels:history, groups:history, im:history and "
    "mpim:history scopes and reinstall the app",
    "no_permission": "the token lacks permission for this conversation",
    "team_access_not_granted": "the token has no access to this workspace",
}
#: A thread that no longer exists (``conversations.replies``).
_THREAD_GONE = frozenset({"thread_not_found", "message_not_found"})
#: Message subtypes that are membership noise, not content: never a document.
SKIPPED_SUBTYPES = frozenset(
    {"channel_join", "channel_leave", "group_join", "group_leave", "tombstone"}
)

_STATE_VERSION = 1


# --------------------------------------------------------------------------- small helpers


def _ts_key(ts: str) -> tuple[int, int]:
    """Sort key of a Slack ``ts`` (``"<unix seconds>.<6 digits>"``)."""
    sec, _, frac = ts.partition(".")
    return int(sec), int((frac or "0").ljust(6, "0")[:6])


def _ts_minus(ts: str, seconds: float) -> str:
    sec, frac = _ts_key(ts)
    return f"{max(0, sec - round(seconds))}.{frac:06d}"


def _ts_datetime(ts: str) -> datetime:
    """Aware UTC datetime of a Slack ``ts``."""
    sec, frac = _ts_key(ts)
    return datetime.fromtimestamp(sec, UTC) + timedelta(microseconds=frac)


def _fmt_time(ts: str) -> str:
    return _ts_datetime(ts).strftime("%Y-%m-%d %H:%M:%S UTC")


def _max_ts(values: Iterable[str | None]) -> str | None:
    best: str | None = None
    for v in values:
        if v and (best is None or _ts_key(v) > _ts_key(best)):
            best = v
    return best


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_root(msg: Mapping[str, Any]) -> bool:
    thread_ts = msg.get("thread_ts")
    return thread_ts is None or thread_ts == msg.get("ts")


# --------------------------------------------------------------------------- rendering

_LINK = re.compile(r"<([^<>\n]+)>")


def mrkdwn_to_markdown(text: str) -> str:
    """Convert Slack ``mrkdwn`` entities to Markdown.

    ``<@U1>``/``<@U1|name>`` → ``@U1``; ``<#C1|general>`` → ``#general``; ``<!here>`` →
    ``@here``; ``<!subteam^S1|@team>`` → ``@team``; ``<url|label>`` → ``[label](url)``;
    ``<url>`` → ``<url>``; then ``&lt;``, ``&gt;``, ``&amp;`` are unescaped
    (https://docs.slack.dev/messaging/formatting-message-text). Emphasis marks are left
    as Slack wrote them.
    """

    def one(m: re.Match[str]) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return target
        if target.startswith("#"):
            return f"#{label}" if label else target
        if target.startswith("!"):
            if label:
                return label
            name = target[1:].split("^", 1)[0]
            return f"@{name}"
        if label:
            return f"[{label}]({target})"
        return f"<{target}>"

    out = _LINK.sub(one, text)
    return out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _author(msg: Mapping[str, Any]) -> str:
    return _str(msg.get("user")) or _str(msg.get("bot_id")) or "unknown"


def _body(msg: Mapping[str, Any]) -> str:
    text = mrkdwn_to_markdown(msg.get("text") or "").strip()
    extras: list[str] = []
    for f in msg.get("files") or []:
        if isinstance(f, Mapping):
            extras.append(f"_(file: {f.get('name') or f.get('title') or f.get('id')})_")
    if not text:
        for a in msg.get("attachments") or []:
            if isinstance(a, Mapping):
                fallback = a.get("fallback") or a.get("text")
                if fallback:
                    extras.append(mrkdwn_to_markdown(str(fallback)).strip())
    parts = [p for p in [text, *extras] if p]
    return "\n\n".join(parts) if parts else "_(no text)_"


def _render_message(msg: Mapping[str, Any]) -> str:
    head = f"**{_author(msg)}**"
    username = _str(msg.get("username"))
    if username and not _str(msg.get("user")):
        head += f" ({username})"
    head += f" · {_fmt_time(str(msg['ts']))}"
    edited = msg.get("edited")
    if isinstance(edited, Mapping) and _str(edited.get("ts")):
        head += f" · edited {_fmt_time(str(edited['ts']))}"
    return f"{head}\n\n{_body(msg)}\n"


def _title(channel: str, root: Mapping[str, Any], limit: int = 80) -> str:
    text = mrkdwn_to_markdown(root.get("text") or "")
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return f"Message by {_author(root)} in {channel}"


def render_thread(channel: str, messages: Sequence[Mapping[str, Any]]) -> Document:
    """Render one thread as a :class:`Document`.

    ``messages``: the thread parent first, then its replies oldest first (Slack message
    objects with ``ts``, ``text``, ``user`` or ``bot_id``, optionally ``edited.ts``,
    ``reply_count``). The content is a Markdown transcript: per message a line
    ``**<author id>** · <YYYY-MM-DD HH:MM:SS UTC>[ · edited <time>]``, a blank line, the
    text (mrkdwn converted by :func:`mrkdwn_to_markdown`), messages separated by a blank
    line. ``source_updated_at`` is the latest post or edit time (aware UTC); ``url`` is
    Slack's permalink shape ``https://slack.com/archives/<channel>/p<ts without dot>``
    (https://docs.slack.dev/reference/methods/chat.getPermalink), which Slack redirects to
    the signed-in workspace.
    """
    if not messages:
        raise ValueError("a thread has at least its parent message")
    root = messages[0]
    thread_ts = str(root["ts"])
    authors: list[str] = []
    times: list[str | None] = []
    for m in messages:
        a = _author(m)
        if a not in authors:
            authors.append(a)
        times.append(str(m["ts"]))
        edited = m.get("edited")
        if isinstance(edited, Mapping):
            times.append(_str(edited.get("ts")))
    latest = _max_ts(times) or thread_ts
    reply_count = root.get("reply_count")
    return Document(
        source_type=SOURCE_TYPE,
        document_id=f"{channel}/{thread_ts}",
        source_page_id=channel,
        title=_title(channel, root),
        content="\n".join(_render_message(m) for m in messages),
        url=f"https://slack.com/archives/{channel}/p{thread_ts.replace('.', '')}",
        metadata={
            "channel": channel,
            "thread_ts": thread_ts,
            "authors": authors,
            "reply_count": int(reply_count) if isinstance(reply_count, int) else len(messages) - 1,
        },
        source_updated_at=_ts_datetime(latest),
    )


def _fingerprint(msg: Mapping[str, Any]) -> str:
    """What of a history message decides its document: its rendering plus thread counters."""
    raw = json.dumps(
        [
            _render_message(msg),
            msg.get("subtype"),
            msg.get("reply_count"),
            msg.get("latest_reply"),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------- errors


class SlackApiFailure(Exception):
    """A Web API call failed in a way worth retrying (5xx, ``fatal_error``,
    ``internal_error``, an unexpected body). The queue retries it with backoff."""


class _ChannelGone(Exception):
    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


class _FnClock(Clock):
    def __init__(self, fn: Callable[[], float]) -> None:
        self._fn = fn

    def now(self) -> float:
        return self._fn()


def _retry_after(headers: Any) -> float:
    raw = header(headers, "Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else DEFAULT_RETRY_AFTER_SECONDS
    except ValueError:
        return DEFAULT_RETRY_AFTER_SECONDS


# --------------------------------------------------------------------------- integration


class SlackIntegration:
    """The Slack source (see the module docstring).

    ``clock``: seconds since the epoch, for the signature's 5-minute window (tests inject it).
    ``lookback_seconds``: how far below the watermark each sync re-reads history (default
    ``settings.slack_lookback_seconds`` if the settings have it, else 3600).
    ``page_limit``: messages per history/replies call (default 200).
    """

    source_type = SOURCE_TYPE

    def __init__(
        self,
        settings: Settings,
        store: DocumentStore | None,
        *,
        clock: Callable[[], float] | None = None,
        lookback_seconds: float | None = None,
        page_limit: int = DEFAULT_PAGE_LIMIT,
    ) -> None:
        self.settings = settings
        self.store = store
        self._clock: Clock = _FnClock(clock) if clock is not None else Clock()
        configured = getattr(settings, "slack_lookback_seconds", None)
        if lookback_seconds is None:
            lookback_seconds = (
                float(configured) if configured is not None else DEFAULT_LOOKBACK_SECONDS
            )
        self.lookback_seconds = max(0.0, lookback_seconds)
        self.page_limit = max(1, min(page_limit, 999))
        self._verifier = (
            SignatureVerifier(settings.slack_signing_secret, clock=self._clock)
            if settings.slack_signing_secret and settings.slack_signing_secret.strip()
            else None
        )
        self._session: aiohttp.ClientSession | None = None
        self._web: AsyncWebClient | None = None

    # ------------------------------------------------------------------ parse half

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and map one Events API delivery (no I/O).

        ``headers``: request headers (any case); ``body``: the raw body bytes.

        Returns a :class:`WebhookResult`: the challenge reply for ``url_verification``; one
        :class:`PageEvent` (``source_page_id`` = ``event.channel``, ``event_id`` = the
        envelope's ``event_id``, ``payload`` = the envelope) for a ``message`` event; a
        warning for ``app_rate_limited``; a note and no events otherwise.

        Raises:
            WebhookError: 503 ``not_configured`` (``SLACK_SIGNING_SECRET`` unset); 401
                ``missing_signature``/``missing_timestamp``/``invalid_timestamp``/
                ``stale_timestamp``/``invalid_signature``; 400 ``malformed_body``.
        """
        if self._verifier is None:
            raise WebhookError(
                503,
                "not_configured",
                "Slack webhooks are refused until the signing secret is configured: set "
                "SLACK_SIGNING_SECRET to the app's Signing Secret (Basic Information → App "
                "Credentials).",
            )
        lowered = {str(k).lower(): v for k, v in headers.items()}
        self._verify(lowered, body)
        try:
            envelope = json.loads(body)
        except ValueError as e:
            raise WebhookError(400, "malformed_body", f"body is not JSON: {e}") from None
        if not isinstance(envelope, dict):
            raise WebhookError(
                400, "malformed_body", f"body must be a JSON object, got {type(envelope).__name__}"
            )
        kind = envelope.get("type")
        if not isinstance(kind, str) or not kind:
            raise WebhookError(400, "malformed_body", "field 'type' is missing or not a string")
        if kind == "url_verification":
            challenge = envelope.get("challenge")
            if not isinstance(challenge, str):
                raise WebhookError(
                    400, "malformed_body", "url_verification without a string 'challenge'"
                )
            return WebhookResult(reply={"challenge": challenge}, note="url_verification")
        if kind == "app_rate_limited":
            return WebhookResult(
                note="app_rate_limited",
                warning=(
                    f"Slack dropped Events API deliveries for team {envelope.get('team_id')} "
                    f"during minute {envelope.get('minute_rate_limited')} (app_rate_limited: "
                    "more than 30 000 events per workspace per hour); re-sync the workspace's "
                    "channels to catch up"
                ),
            )
        if kind != "event_callback":
            return WebhookResult(note=f"ignored envelope type {kind}")
        return self._event_callback(envelope)

    def _verify(self, headers: Mapping[str, str], body: bytes) -> None:
        assert self._verifier is not None
        signature = headers.get("x-slack-signature")
        timestamp = headers.get("x-slack-request-timestamp")
        if not signature:
            raise WebhookError(401, "missing_signature", "X-Slack-Signature header is missing")
        if not timestamp:
            raise WebhookError(
                401, "missing_timestamp", "X-Slack-Request-Timestamp header is missing"
            )
        try:
            sent = int(timestamp.strip())
        except ValueError:
            raise WebhookError(
                401,
                "invalid_timestamp",
                f"X-Slack-Request-Timestamp must be Unix seconds, got {timestamp[:40]!r}",
            ) from None
        age = self._clock.now() - sent
        if abs(age) > SIGNATURE_MAX_AGE_SECONDS:
            raise WebhookError(
                401,
                "stale_timestamp",
                f"request timestamp is {abs(age):.0f} s from now; Slack requests more than "
                f"{SIGNATURE_MAX_AGE_SECONDS // 60} minutes old are refused (replay protection)",
            )
        try:
            valid = self._verifier.is_valid_request(body, headers)
        except ValueError:  # includes UnicodeDecodeError of a non-UTF-8 body
            valid = False
        if not valid:
            raise WebhookError(
                401,
                "invalid_signature",
                "X-Slack-Signature does not match the body signed with SLACK_SIGNING_SECRET",
            )

    def _event_callback(self, envelope: dict[str, Any]) -> WebhookResult:
        event = envelope.get("event")
        if not isinstance(event, dict):
            raise WebhookError(400, "malformed_body", "event_callback without an 'event' object")
        event_id = envelope.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            raise WebhookError(400, "malformed_body", "event_callback without an 'event_id'")
        event_type = event.get("type")
        if event_type != "message":
            return WebhookResult(note=f"ignored event type {event_type}")
        channel = event.get("channel")
        if not isinstance(channel, str) or not channel:
            raise WebhookError(400, "malformed_body", "message event without 'event.channel'")
        own = self._own_author(envelope, event)
        if own is not None:
            return WebhookResult(note=f"ignored message posted by our own bot {own}")
        return WebhookResult(events=[PageEvent(channel, event_id, envelope)])

    def _own_ids(self, envelope: Mapping[str, Any] | None = None) -> set[str]:
        ids: set[str] = set()
        if self.settings.slack_bot_user_id:
            ids.add(self.settings.slack_bot_user_id)
        for auth in (envelope or {}).get("authorizations") or []:
            if isinstance(auth, Mapping) and auth.get("is_bot") is True:
                uid = _str(auth.get("user_id"))
                if uid:
                    ids.add(uid)
        return ids

    def _own_author(self, envelope: Mapping[str, Any], event: Mapping[str, Any]) -> str | None:
        """The id of our own bot if it authored the message the event is about."""
        ids = self._own_ids(envelope)
        if not ids:
            return None
        about: list[Mapping[str, Any]] = [event]
        for key in ("message", "previous_message"):
            inner = event.get(key)
            if isinstance(inner, Mapping):
                about.append(inner)
        for m in about:
            for key in ("user", "bot_id"):
                value = _str(m.get(key))
                if value and value in ids:
                    return value
        return None

    # ------------------------------------------------------------------ sync half

    def _client(self) -> AsyncWebClient:
        if self._web is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS)
            )
            self._web = AsyncWebClient(
                token=self.settings.slack_bot_token,
                base_url=self.settings.slack_api_url,
                session=self._session,
                timeout=int(HTTP_TIMEOUT_SECONDS),
            )
        return self._web

    async def sync(self, job: SyncJob) -> SyncResult:
        """Sync one conversation (``job.source_page_id``) into per-thread documents.

        Raises:
            RateLimited: Slack answered 429 (``Retry-After`` seconds).
            PermanentError: no token, or ``invalid_auth``, ``token_revoked``,
                ``account_inactive``, ``not_in_channel``, ``channel_not_found`` (the last also
                marks the conversation's documents deleted) and similar.
            SlackApiFailure: 5xx or another Slack error worth retrying.
            aiohttp.ClientError, TimeoutError: network trouble (retried by the queue).
        """
        if self.store is None:
            raise RuntimeError("SlackIntegration.sync needs a DocumentStore (worker process)")
        if not self.settings.slack_bot_token:
            raise PermanentError(
                "SLACK_BOT_TOKEN is not set: set it to the app's Bot User OAuth Token (xoxb-…) "
                "to sync Slack conversations"
            )
        run = _ChannelSync(self, self.store, self._client(), job)
        return await run.run()

    async def aclose(self) -> None:
        """Close the HTTP session of the Web API client (if one was opened)."""
        session, self._session, self._web = self._session, None, None
        if session is not None and not session.closed:
            await session.close()


class _ChannelSync:
    """One sync of one conversation (state and counters of a single run)."""

    def __init__(
        self,
        integ: SlackIntegration,
        store: DocumentStore,
        client: AsyncWebClient,
        job: SyncJob,
    ) -> None:
        self.integ = integ
        self.store = store
        self.client = client
        self.job = job
        self.channel = job.source_page_id
        self.own_ids = integ._own_ids(job.payload if isinstance(job.payload, dict) else None)
        self.state: dict[str, Any] = {}
        self.written = 0
        self.unchanged = 0
        self.deleted = 0
        self.calls = 0
        #: Threads written from ``conversations.replies`` (or marked deleted) in this run.
        self.refreshed: set[str] = set()
        #: Root messages ``conversations.history`` returned in this run.
        self.seen_roots: set[str] = set()

    # -- state ---------------------------------------------------------------------------

    @property
    def threads(self) -> dict[str, dict[str, Any]]:
        threads: dict[str, dict[str, Any]] = self.state["threads"]
        return threads

    async def _load(self) -> None:
        raw = await self.store.get_state(SOURCE_TYPE, self.channel)
        if raw.get("v") != _STATE_VERSION:
            raw = {}
        self.state = {
            "v": _STATE_VERSION,
            "watermark": _str(raw.get("watermark")),
            "scan": raw.get("scan") if isinstance(raw.get("scan"), dict) else None,
            "threads": raw.get("threads") if isinstance(raw.get("threads"), dict) else {},
            "last_hint": _str(raw.get("last_hint")),
        }

    async def _save(self) -> None:
        await self.store.set_state(SOURCE_TYPE, self.channel, self.state)

    # -- run -----------------------------------------------------------------------------

    async def run(self) -> SyncResult:
        await self._load()
        try:
            if self.state["scan"] is not None:
                await self._scan(resume=True)
            await self._scan(resume=False)
            await self._apply_hint()
            await self._save()
        except _ChannelGone as gone:
            marked = await self.store.mark_page_deleted(SOURCE_TYPE, self.channel)
            await self.store.set_state(SOURCE_TYPE, self.channel, {})
            raise PermanentError(
                f"Slack {gone.method}: channel_not_found for {self.channel} (deleted, or the app "
                f"cannot see it); {len(marked)} document(s) marked deleted"
            ) from None
        except Exception:
            # Keep what was written (thread fingerprints are recorded only after their
            # documents, the scan position only after whole pages): a retry resumes there.
            try:
                await self._save()
            except Exception:  # pragma: no cover - the original error matters more
                log.warning("could not save Slack sync state of %s", self.channel, exc_info=True)
            raise
        return SyncResult(
            written=self.written,
            unchanged=self.unchanged,
            deleted=self.deleted,
            detail=(
                f"{self.calls} Slack call(s); watermark {self.state['watermark']}; "
                f"{len(self.threads)} recent thread(s) tracked"
            ),
        )

    # -- Web API -------------------------------------------------------------------------

    async def _call(self, method: str, **params: Any) -> dict[str, Any] | None:
        """One Web API call; ``None`` when the thread asked for is gone."""
        self.calls += 1
        try:
            if method == "conversations.history":
                resp = await self.client.conversations_history(**params)
            else:
                resp = await self.client.conversations_replies(**params)
        except SlackApiError as e:
            response = e.response
            status = getattr(response, "status_code", None)
            data = getattr(response, "data", None)
            code = data.get("error") if isinstance(data, dict) else None
            if status == 429 or code == "ratelimited":
                raise RateLimited(
                    _retry_after(getattr(response, "headers", None)),
                    f"Slack {method} rate limited",
                ) from None
            if code == "channel_not_found":
                raise _ChannelGone(method) from None
            if code in _THREAD_GONE and method == "conversations.replies":
                return None
            if isinstance(code, str) and code in PERMANENT_ERRORS:
                raise PermanentError(
                    f"Slack {method} on {self.channel}: {code} ({PERMANENT_ERRORS[code]})"
                ) from None
            raise SlackApiFailure(
                f"Slack {method} on {self.channel} failed: HTTP {status}, "
                f"error {code or '(none)'}"
            ) from e
        data = resp.data
        if not isinstance(data, dict):
            raise SlackApiFailure(f"Slack {method} answered a non-JSON body")
        return data

    async def _replies(self, thread_ts: str) -> list[dict[str, Any]] | None:
        """The whole thread (parent first), or ``None`` when Slack no longer has it."""
        found: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        while True:
            data = await self._call(
                "conversations.replies",
                channel=self.channel,
                ts=thread_ts,
                limit=self.integ.page_limit,
                cursor=cursor,
            )
            if data is None:
                return None
            for m in data.get("messages") or []:
                if isinstance(m, dict) and isinstance(m.get("ts"), str):
                    found[m["ts"]] = m
            cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            if not (data.get("has_more") and cursor):
                break
        return sorted(found.values(), key=lambda m: _ts_key(m["ts"]))

    # -- writing -------------------------------------------------------------------------

    def _is_own(self, msg: Mapping[str, Any]) -> bool:
        return any(_str(msg.get(k)) in self.own_ids for k in ("user", "bot_id"))

    def _skipped(self, msg: Mapping[str, Any]) -> bool:
        return msg.get("subtype") in SKIPPED_SUBTYPES or self._is_own(msg)

    async def _write(self, messages: Sequence[Mapping[str, Any]]) -> None:
        outcome = await self.store.upsert(render_thread(self.channel, messages))
        if outcome is WriteOutcome.UNCHANGED:
            self.unchanged += 1
        else:
            self.written += 1

    async def _mark_deleted(self, thread_ts: str) -> None:
        marked = await self.store.mark_deleted(SOURCE_TYPE, [f"{self.channel}/{thread_ts}"])
        self.deleted += len(marked)
        self.threads.pop(thread_ts, None)
        self.refreshed.add(thread_ts)

    async def _refresh_thread(self, thread_ts: str) -> None:
        """Read a thread with ``conversations.replies`` and write (or delete) its document."""
        if thread_ts in self.refreshed:
            return
        thread = await self._replies(thread_ts)
        if not thread:
            await self._mark_deleted(thread_ts)
            return
        root = thread[0]
        if root.get("ts") != thread_ts or root.get("subtype") == "tombstone":
            await self._mark_deleted(thread_ts)
            return
        self.refreshed.add(thread_ts)
        if self._skipped(root):
            return
        await self._write([root, *(m for m in thread[1:] if not self._skipped(m))])

    # -- history scan --------------------------------------------------------------------

    async def _scan(self, *, resume: bool) -> None:
        """Read history from the watermark minus the look-back (or resume a saved scan),
        newest first, writing each page's threads before recording progress."""
        lookback = self.integ.lookback_seconds
        if resume:
            scan = dict(self.state["scan"] or {})
            oldest, latest, top = _str(scan.get("oldest")), _str(scan.get("latest")), _str(
                scan.get("top")
            )
        else:
            wm = self.state["watermark"]
            oldest = _ts_minus(wm, lookback) if wm else None
            latest, top = None, wm
        upper = latest  # exclusive upper bound of what the next page covers (None: now)
        cursor: str | None = None
        while True:
            data = await self._call(
                "conversations.history",
                channel=self.channel,
                limit=self.integ.page_limit,
                oldest=oldest,
                latest=latest,
                cursor=cursor,
            )
            assert data is not None
            messages = [
                m
                for m in data.get("messages") or []
                if isinstance(m, dict) and isinstance(m.get("ts"), str)
            ]
            next_cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            more = bool(data.get("has_more")) and next_cursor is not None and bool(messages)
            top = _max_ts([top, *(m["ts"] for m in messages)])
            horizon = _ts_minus(top, lookback) if top else None
            await self._process_page(messages, horizon)
            page_min = min((m["ts"] for m in messages), key=_ts_key) if messages else None
            lower = page_min if more else oldest
            await self._detect_vanished(
                {m["ts"] for m in messages}, lower, lower_inclusive=more, upper=upper
            )
            if more:
                self.state["scan"] = {"oldest": oldest, "latest": page_min, "top": top}
                await self._save()
                upper, cursor = page_min, next_cursor
                continue
            if top is not None:
                self.state["watermark"] = _max_ts([self.state["watermark"], top])
            self.state["scan"] = None
            self._prune()
            await self._save()
            return

    async def _process_page(self, messages: list[dict[str, Any]], horizon: str | None) -> None:
        roots = [m for m in messages if _is_root(m)]
        broadcasts = [m for m in messages if not _is_root(m)]
        for m in roots:
            await self._root(m, horizon)
        for m in broadcasts:
            await self._broadcast(m, horizon)

    def _track(self, ts: str, entry: dict[str, Any], horizon: str | None) -> None:
        # Only threads the next scan will re-read need a fingerprint; older ones are
        # re-rendered (an unchanged upsert) if a scan over them is ever resumed.
        if horizon is None or _ts_key(ts) > _ts_key(horizon):
            self.threads[ts] = entry
        else:
            self.threads.pop(ts, None)

    async def _root(self, msg: dict[str, Any], horizon: str | None) -> None:
        ts = msg["ts"]
        self.seen_roots.add(ts)
        if msg.get("subtype") == "tombstone":  # deleted parent whose replies remain
            await self._mark_deleted(ts)
            return
        if self._skipped(msg):
            if ts in self.threads:
                await self._mark_deleted(ts)
            return
        fp = _fingerprint(msg)
        if ts in self.refreshed:
            self._track(ts, {"fp": fp}, horizon)
            return
        entry = self.threads.get(ts)
        if entry is not None and entry.get("fp") == fp:
            self.unchanged += 1
            return
        reply_count = msg.get("reply_count")
        if isinstance(reply_count, int) and reply_count > 0:
            await self._refresh_thread(ts)
        else:
            await self._write([msg])
            self.refreshed.add(ts)
        self._track(ts, {"fp": fp}, horizon)

    async def _broadcast(self, msg: dict[str, Any], horizon: str | None) -> None:
        """A reply also sent to the channel: it changes its thread, not a document of its own."""
        ts, thread_ts = msg["ts"], str(msg["thread_ts"])
        fp = _fingerprint(msg)
        entry = self.threads.get(ts)
        if entry is None or entry.get("fp") != fp:
            if thread_ts not in self.seen_roots:
                await self._refresh_thread(thread_ts)
        self._track(ts, {"fp": fp, "of": thread_ts}, horizon)

    async def _detect_vanished(
        self,
        present: set[str],
        lower: str | None,
        *,
        lower_inclusive: bool,
        upper: str | None,
    ) -> None:
        """Tracked messages inside the range a page covered that it did not return were
        deleted: a root's document is marked deleted, a broadcast reply's thread re-read."""
        lo = _ts_key(lower) if lower else None
        hi = _ts_key(upper) if upper else None
        for ts in list(self.threads):
            if ts in present:
                continue
            k = _ts_key(ts)
            if lo is not None and (k < lo or (k == lo and not lower_inclusive)):
                continue
            if hi is not None and k >= hi:
                continue
            entry = self.threads.get(ts) or {}
            of = _str(entry.get("of"))
            if of:
                self.threads.pop(ts, None)
                if of not in self.seen_roots:
                    await self._refresh_thread(of)
            else:
                await self._mark_deleted(ts)

    def _prune(self) -> None:
        wm = self.state["watermark"]
        if not wm:
            return
        horizon = _ts_key(_ts_minus(wm, self.integ.lookback_seconds))
        for ts in [t for t in self.threads if _ts_key(t) <= horizon]:
            del self.threads[ts]

    # -- the job's event as a hint ---------------------------------------------------------

    async def _apply_hint(self) -> None:
        """Use the job's latest event for what the look-back window cannot show: a reply
        edited or deleted, a reply to a thread older than the window, a deleted root."""
        payload = self.job.payload if isinstance(self.job.payload, dict) else {}
        event = payload.get("event")
        if not isinstance(event, dict) or event.get("channel") != self.channel:
            return
        event_id = self.job.event_id or _str(payload.get("event_id"))
        if event_id and event_id == self.state.get("last_hint"):
            return  # this event was already applied by an earlier sync
        subtype = event.get("subtype")
        if subtype == "message_deleted":
            deleted_ts = _str(event.get("deleted_ts"))
            previous = event.get("previous_message")
            thread_ts = _str(previous.get("thread_ts")) if isinstance(previous, dict) else None
            if deleted_ts and thread_ts and thread_ts != deleted_ts:
                if thread_ts not in self.seen_roots:
                    await self._refresh_thread(thread_ts)  # a reply was deleted
            elif deleted_ts and deleted_ts not in self.seen_roots:
                await self._mark_deleted(deleted_ts)  # Slack deletions are final
        elif subtype == "message_changed":
            message = event.get("message")
            if isinstance(message, dict) and _str(message.get("ts")):
                ts = str(message["ts"])
                thread_ts = _str(message.get("thread_ts"))
                if message.get("subtype") == "tombstone":
                    await self._mark_deleted(ts)
                elif thread_ts and thread_ts != ts:
                    await self._refresh_thread(thread_ts)  # an edited reply
                elif ts not in self.seen_roots:
                    await self._refresh_thread(ts)  # an edited root older than the window
        else:
            new_ts = _str(event.get("ts"))
            thread_ts = _str(event.get("thread_ts"))
            if thread_ts and thread_ts != new_ts:
                if thread_ts not in self.seen_roots:
                    await self._refresh_thread(thread_ts)
            elif new_ts and new_ts not in self.seen_roots and not self._skipped(event):
                await self._refresh_thread(new_ts)  # history did not show it (yet)
        if event_id:
            self.state["last_hint"] = event_id


def create(settings: Settings, store: DocumentStore | None) -> SlackIntegration:
    """The Slack integration (registry entry point; ``store`` is ``None`` in the web process)."""
    return SlackIntegration(settings, store)
