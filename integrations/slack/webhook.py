"""Slack Events API webhooks: verify the request signature, answer ``url_verification``,
map ``message`` events to jobs (no I/O).

Every delivery is verified with Slack's request signing (``X-Slack-Signature: v0=<hex
HMAC-SHA256 of "v0:<timestamp>:<body>">`` keyed by the app's signing secret,
``X-Slack-Request-Timestamp`` within 5 minutes;
https://docs.slack.dev/authentication/verifying-requests-from-slack). ``url_verification``
is answered with its challenge (https://docs.slack.dev/reference/events/url_verification);
``app_rate_limited`` is a warning (https://docs.slack.dev/apis/events-api/#rate-limiting);
an ``event_callback`` whose event is a ``message`` (any subtype; channels, private channels,
DMs; https://docs.slack.dev/reference/events/message) becomes one job keyed by the
conversation id, deduplicated by the envelope's ``event_id`` (stable across Slack's retries,
which carry ``X-Slack-Retry-Num``), except the system notices of
:data:`~integrations.slack.render.NO_CONTENT_SUBTYPES` (joins, leaves, pins…), which change no
document. ``member_joined_channel`` / ``member_left_channel`` become a job keyed
``members:<channel>`` that refreshes the conversation's audience
(:mod:`integrations.slack.audience`). ``file_created``, ``file_shared``, ``file_change`` and
``file_deleted`` (https://docs.slack.dev/reference/events/file_change and its siblings: the
file's id only) become a job keyed ``canvas:<file id>`` that syncs the file as a canvas
(:mod:`integrations.slack.canvases`), unless the event's file object says it is another type.
Other event types are acknowledged and ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.signature import Clock, SignatureVerifier

from debounce.contract import PageEvent, WebhookError, WebhookResult
from integrations.slack.audience import members_key
from integrations.slack.canvases import canvas_key, maybe_canvas
from integrations.slack.render import NO_CONTENT_SUBTYPES, _str
from integrations.slack.settings import SlackSettings

__all__ = ["FILE_EVENTS", "MEMBER_EVENTS", "SIGNATURE_MAX_AGE_SECONDS", "SlackWebhooks", "own_ids"]

#: Events that change who is in a conversation: its members' job refreshes the audience.
MEMBER_EVENTS = frozenset({"member_joined_channel", "member_left_channel"})

#: Events about one file, by id: each may be about a canvas (a canvas job syncs it).
FILE_EVENTS = frozenset({"file_created", "file_shared", "file_change", "file_deleted"})

#: Slack refuses requests whose timestamp is more than 5 minutes from now (replay protection);
#: https://docs.slack.dev/authentication/verifying-requests-from-slack
SIGNATURE_MAX_AGE_SECONDS = 300


def own_ids(settings: SlackSettings, envelope: Mapping[str, Any] | None = None) -> set[str]:
    """Our own bot's ids: ``SLACK_BOT_USER_ID`` and the bot authorizations of an event
    ``envelope`` (its messages are not synced)."""
    ids: set[str] = set()
    if settings.slack_bot_user_id:
        ids.add(settings.slack_bot_user_id)
    for auth in (envelope or {}).get("authorizations") or []:
        if isinstance(auth, Mapping) and auth.get("is_bot") is True:
            uid = _str(auth.get("user_id"))
            if uid:
                ids.add(uid)
    return ids


class _FnClock(Clock):
    def __init__(self, fn: Callable[[], float]) -> None:
        self._fn = fn

    def now(self) -> float:
        return self._fn()


class SlackWebhooks:
    """The Slack source's webhook parser (:class:`debounce.contract.WebhookParser`, web
    process, no I/O): reads ``settings`` (``slack_signing_secret``, ``slack_bot_user_id``).

    ``clock``: seconds since the epoch, for the signature's 5-minute window (tests inject it).
    """

    source_type = "slack"

    def __init__(self, settings: SlackSettings, *, clock: Callable[[], float] | None = None) -> None:
        self.settings = settings
        self._clock: Clock = _FnClock(clock) if clock is not None else Clock()
        secret = settings.slack_signing_secret
        self._verifier = SignatureVerifier(secret, clock=self._clock) if secret and secret.strip() else None

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and map one Events API delivery (no I/O).

        ``headers``: request headers (any case); ``body``: the raw body bytes.

        Returns a :class:`WebhookResult`: the challenge reply for ``url_verification``; one
        :class:`PageEvent` (``source_page_id`` = ``event.channel``, ``event_id`` = the
        envelope's ``event_id``, ``payload`` = the envelope) for a ``message`` event (a note and
        no events for a subtype without content, such as ``channel_join``); a warning for
        ``app_rate_limited``; a note and no events otherwise.

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
        except RecursionError:
            raise WebhookError(400, "malformed_body", "body is not JSON: nested too deeply") from None
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
                raise WebhookError(400, "malformed_body", "url_verification without a string 'challenge'")
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
        """``SignatureVerifier`` decides (signature and the 5-minute timestamp window); only
        when it refuses do we look at the headers, to say why."""
        assert self._verifier is not None
        try:
            valid = self._verifier.is_valid_request(body, headers)
        except (ValueError, TypeError):
            # ValueError: a non-numeric timestamp or a non-UTF-8 body; TypeError: a signature
            # with non-ASCII characters (hmac.compare_digest refuses to compare them).
            valid = False
        if not valid:
            raise self._refusal(headers)

    def _refusal(self, headers: Mapping[str, str]) -> WebhookError:
        """Why the verifier refused, as the 401 the sender sees."""
        signature = headers.get("x-slack-signature")
        timestamp = headers.get("x-slack-request-timestamp")
        if not signature:
            return WebhookError(401, "missing_signature", "X-Slack-Signature header is missing")
        if not timestamp:
            return WebhookError(401, "missing_timestamp", "X-Slack-Request-Timestamp header is missing")
        try:
            sent = int(timestamp.strip())
        except ValueError:
            return WebhookError(
                401,
                "invalid_timestamp",
                f"X-Slack-Request-Timestamp must be Unix seconds, got {timestamp[:40]!r}",
            )
        age = self._clock.now() - sent
        if abs(age) > SIGNATURE_MAX_AGE_SECONDS:
            return WebhookError(
                401,
                "stale_timestamp",
                f"request timestamp is {abs(age):.0f} s from now; Slack requests more than "
                f"{SIGNATURE_MAX_AGE_SECONDS // 60} minutes old are refused (replay protection)",
            )
        return WebhookError(
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
        team, enterprise = _team_of(envelope)
        if event_type in ("app_uninstalled", "tokens_revoked"):
            # https://docs.slack.dev/reference/events/app_uninstalled, .../tokens_revoked
            if event_type == "tokens_revoked" and not _bot_tokens_revoked(event):
                return WebhookResult(note="tokens_revoked for user tokens only: nothing to do")
            return WebhookResult(
                note=f"{event_type} for team {team}",
                revoked_workspace=team,
                warning=f"Slack says the app lost team {team} ({event_type}): "
                "the workspace is marked revoked until re-installed",
            )
        if event_type in MEMBER_EVENTS:
            return self._member_event(envelope, event, event_id, team, enterprise)
        if event_type in FILE_EVENTS:
            return self._file_event(envelope, event, event_id, team, enterprise)
        if event_type != "message":
            return WebhookResult(note=f"ignored event type {event_type}")
        channel = event.get("channel")
        if not isinstance(channel, str) or not channel:
            raise WebhookError(400, "malformed_body", "message event without 'event.channel'")
        subtype = event.get("subtype")
        if subtype in NO_CONTENT_SUBTYPES:
            # A join, leave, pin…: no document changes, so no job (the sync skips them too).
            return WebhookResult(note=f"ignored message subtype {subtype} (no content)")
        own = self._own_author(envelope, event)
        if own is not None:
            return WebhookResult(note=f"ignored message posted by our own bot {own}")
        return WebhookResult(
            events=[PageEvent(channel, event_id, envelope, workspace=team, enterprise=enterprise)]
        )

    def _member_event(
        self,
        envelope: dict[str, Any],
        event: Mapping[str, Any],
        event_id: str,
        team: str | None,
        enterprise: str | None,
    ) -> WebhookResult:
        """``member_joined_channel`` / ``member_left_channel``
        (https://docs.slack.dev/reference/events/member_joined_channel, ``…/member_left_channel``:
        ``user``, ``channel``, ``channel_type`` — one letter, not the kind —, ``team``): a job
        keyed ``members:<channel>`` that refreshes the conversation's member list and its
        documents' audience; when the member who joined is our own bot, also a job for the
        conversation itself (its history is new to us; event id ``<event_id>/history``)."""
        channel = event.get("channel")
        if not isinstance(channel, str) or not channel:
            raise WebhookError(400, "malformed_body", f"{event.get('type')} event without 'event.channel'")
        events = [PageEvent(members_key(channel), event_id, envelope, workspace=team, enterprise=enterprise)]
        user = _str(event.get("user"))
        if event.get("type") == "member_joined_channel" and user in self._own_ids(envelope):
            events.append(
                PageEvent(channel, f"{event_id}/history", envelope, workspace=team, enterprise=enterprise)
            )
        return WebhookResult(events=events)

    def _file_event(
        self,
        envelope: dict[str, Any],
        event: Mapping[str, Any],
        event_id: str,
        team: str | None,
        enterprise: str | None,
    ) -> WebhookResult:
        """A file event (:data:`FILE_EVENTS`: ``file_id``, ``file: {"id"}``): a job keyed
        ``canvas:<file id>``, unless the file object says it is no canvas."""
        f = event.get("file")
        file_object: Mapping[str, Any] = f if isinstance(f, Mapping) else {}
        file_id = _str(event.get("file_id")) or _str(file_object.get("id"))
        if not file_id:
            raise WebhookError(400, "malformed_body", f"{event.get('type')} event without 'event.file_id'")
        if not maybe_canvas(file_object):
            return WebhookResult(note=f"ignored {event.get('type')} of file {file_id}: not a canvas")
        key = canvas_key(file_id)
        return WebhookResult(
            events=[PageEvent(key, event_id, envelope, workspace=team, enterprise=enterprise)]
        )

    def _own_ids(self, envelope: Mapping[str, Any] | None = None) -> set[str]:
        return own_ids(self.settings, envelope)

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


def _team_of(envelope: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The team (workspace) and Grid org an envelope is for: ``team_id``, else the first
    authorization's (https://docs.slack.dev/apis/events-api/#callback-field), and
    ``enterprise_id``."""
    team = _str(envelope.get("team_id"))
    enterprise = _str(envelope.get("enterprise_id"))
    for auth in envelope.get("authorizations") or []:
        if isinstance(auth, Mapping):
            team = team or _str(auth.get("team_id"))
            enterprise = enterprise or _str(auth.get("enterprise_id"))
    return team, enterprise


def _bot_tokens_revoked(event: Mapping[str, Any]) -> bool:
    tokens = event.get("tokens")
    return isinstance(tokens, Mapping) and bool(tokens.get("bot"))
