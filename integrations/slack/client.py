"""The Slack Web API client and the request wrapper: 429s, error codes → queue outcomes,
budget charging.

Through ``slack_sdk``'s ``AsyncWebClient`` on an ``aiohttp`` session. Its default retry
handlers cover connection errors only; a 429 becomes :class:`~debounce.contract.RateLimited`
at its ``Retry-After``, a token or access error :class:`~debounce.contract.PermanentError`,
anything else :class:`SlackApiFailure` (retried by the queue). :func:`call_api` is the one
request wrapper of the source (syncs and listings alike, each with its
:class:`~debounce.contract.SyncContext`); it serves the history a sync already read from its
checkpoint (:mod:`debounce.contract.metering`).

**Charging.** Every HTTP attempt is charged to the sync's budget (its context's ``charge()``)
when it takes a connection — the session's :func:`charging_trace`, on aiohttp's
``on_connection_create_start`` / ``on_connection_reuseconn`` signals
(https://docs.aiohttp.org/en/stable/tracing_reference.html), exactly one of which fires per
attempt, before anything is sent. Charging in :func:`call_api` alone would miss two retries
that happen below it: ``slack_sdk``'s ``AsyncConnectionErrorRetryHandler`` (one retry after a
connection error; ``web/async_internal_utils.py`` awaits the handler's
``prepare_for_next_attempt_async`` and sends again), and aiohttp's own: ``ClientSession``
re-sends an idempotent request (GET, which ``slack_sdk`` uses for ``conversations.*`` and
``users.conversations``) once after ``ServerDisconnectedError``/``ClientOSError``
(``aiohttp/client.py``, "retry_persistent_connection", RFC 9112 §9.3.1), invisibly to the SDK's
handlers. At the connection, every attempt of every layer is charged once, and a
:class:`~debounce.contract.BudgetExhausted` raised there stops the attempt before it is
sent and propagates out of the SDK call.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from debounce.contract import (
    AuthRevoked,
    BudgetExhausted,
    PermanentError,
    RateLimited,
    ScopeMissing,
    SyncContext,
    count_api_request,
    parse_retry_after,
    request_key,
)
from integrations.slack.settings import SlackSettings

__all__ = [
    "CACHED_METHODS",
    "DEFAULT_RETRY_AFTER_SECONDS",
    "METHODS",
    "HTTP_TIMEOUT_SECONDS",
    "SCOPE_NEEDED",
    "MissingScope",
    "PERMANENT_ERRORS",
    "SlackApiFailure",
    "SlackCall",
    "SlackClient",
    "call_api",
    "charging_trace",
]

#: Retry-After used when a 429 carries none, in seconds (tier 3 is about 50 calls/minute).
DEFAULT_RETRY_AFTER_SECONDS = 60.0
#: HTTP timeout of one Web API call, in seconds.
HTTP_TIMEOUT_SECONDS = 30.0

#: Error codes that mean the workspace's token no longer works: the workspace is revoked.
AUTH_ERRORS = frozenset({"invalid_auth", "token_revoked", "token_expired", "account_inactive", "not_authed"})

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
    "mpim:history scopes (the sync) and channels:read, groups:read, im:read and mpim:read "
    "(the channel listing) and reinstall the app",
    "no_permission": "the token lacks permission for this conversation",
    "team_access_not_granted": "the token has no access to this workspace",
}
#: The Web API methods :func:`call_api` sends → the ``AsyncWebClient`` method that sends each.
METHODS: Mapping[str, str] = {
    "conversations.history": "conversations_history",
    "conversations.replies": "conversations_replies",
    "users.conversations": "users_conversations",
    "conversations.list": "conversations_list",
    "conversations.info": "conversations_info",
    "conversations.members": "conversations_members",
    "files.info": "files_info",
    "files.list": "files_list",
    "canvases.getContent": "canvases_getContent",
}
#: The methods whose answers a sync keeps in its checkpoint (a resumed sync reads them
#: again for free; a sync that yielded between a conversation's info and its member pages
#: does not pay for them twice; a canvas sync that yielded after ``canvases.getContent`` does
#: not read it again — on a bucket that refills one request at a time it would never get to
#: its ``files.info``); listings are always asked afresh. A new event of the job's page drops
#: them (the checkpoint is tagged with the job's revision).
CACHED_METHODS = frozenset(
    {
        "conversations.history",
        "conversations.replies",
        "conversations.info",
        "conversations.members",
        "canvases.getContent",
        "files.info",
    }
)

#: A thread that no longer exists (``conversations.replies``).
_THREAD_GONE = frozenset({"thread_not_found", "message_not_found"})
#: The scope each method needs that a token may lack without the rest of the sync failing,
#: and what its ``missing_scope`` answer means (:class:`MissingScope`).
SCOPE_NEEDED: Mapping[str, str] = {
    "canvases.getContent": "canvases:read",
    "files.list": "files:read",
}
#: A file this token cannot read (``files.info``: a Slack Connect file of another organisation,
#: a deleted file, an app without ``files:read``): the file is skipped, the sync goes on
#: (https://docs.slack.dev/reference/methods/files.info#errors).
_FILE_UNREADABLE = frozenset(
    {"access_denied", "file_not_found", "file_deleted", "missing_scope", "no_permission"}
)


class MissingScope(ScopeMissing):
    """Slack answered ``missing_scope`` for a method of :data:`SCOPE_NEEDED`: the workspace's
    token lacks ``scope`` (Slack's ``needed``, else the method's). Permanent for the job; the
    worker records the scope on the workspace."""

    def __init__(self, method: str, scope: str) -> None:
        super().__init__(
            scope,
            f"Slack {method}: missing_scope: the app lacks the {scope} scope: add it to the app's bot "
            "scopes and reinstall it in the workspace",
        )
        self.method = method


class SlackApiFailure(Exception):
    """A Web API call failed in a way worth retrying (5xx, ``fatal_error``,
    ``internal_error``, an unexpected body). The queue retries it with backoff."""


class _ChannelGone(Exception):
    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


def _retry_after(response: Any) -> float:
    wait = parse_retry_after(getattr(response, "headers", None))
    return DEFAULT_RETRY_AFTER_SECONDS if wait is None else wait


#: The context of the Web API call in progress in this task (set by :func:`call_api` around
#: the SDK call): the session's trace, shared by every sync, charges its meter. Private to the
#: source: the service hands each sync its context as an argument.
_CALLING: contextvars.ContextVar[SyncContext | None] = contextvars.ContextVar("slack_calling", default=None)


async def _charge_attempt(session: aiohttp.ClientSession, context: SimpleNamespace, params: object) -> None:
    calling = _CALLING.get()
    if calling is not None:
        await calling.charge()


def charging_trace() -> aiohttp.TraceConfig:
    """The aiohttp trace that charges one request to the budget of the call in progress
    (:func:`call_api`'s context) for every HTTP attempt, before it is sent (module
    docstring)."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_start.append(_charge_attempt)
    trace.on_connection_reuseconn.append(_charge_attempt)
    return trace


async def call_api(
    client: AsyncWebClient, context: SyncContext, method: str, /, **params: Any
) -> dict[str, Any] | None:
    """One Web API call of ``method`` (one of :data:`METHODS`: ``conversations.history``,
    ``conversations.replies``, ``users.conversations``, ``conversations.list``,
    ``conversations.info``, ``conversations.members``, ``files.info``, ``files.list``,
    ``canvases.getContent``) with ``params``; the response body, or ``None`` when the thread
    asked for (``replies``) is gone, the file asked for (``files.info``) cannot be read
    (logged) or the canvas asked for (``canvases.getContent``) is gone or invisible
    (``canvas_not_found``).

    Charged to ``context``'s budget per HTTP attempt by the session's :func:`charging_trace` (a
    client made by :meth:`SlackClient.web`). The answers of :data:`CACHED_METHODS` are kept in
    the context's checkpoint under ``request_key(method, params)`` and served from it, with no
    request and no charge, when the same request is made again after the sync yielded;
    listings are always sent.

    Raises:
        BudgetExhausted: the budget has no request left (nothing sent).
        RateLimited: HTTP 429 / ``ratelimited`` (``Retry-After`` seconds, default 60).
        _ChannelGone: ``channel_not_found``.
        MissingScope: ``missing_scope`` for a method of :data:`SCOPE_NEEDED`.
        PermanentError: an error of :data:`PERMANENT_ERRORS` (:class:`AuthRevoked` for a
            token that no longer works).
        SlackApiFailure: any other error answer, or a body that is not a JSON object.
        ValueError: ``method`` is not one of :data:`METHODS`.
    """
    sender = METHODS.get(method)
    if sender is None:
        raise ValueError(f"call_api does not send {method!r}; one of {sorted(METHODS)}")
    key = request_key(method, params) if method in CACHED_METHODS else None
    if key is not None:
        cached = context.recall(key)
        if isinstance(cached, dict):
            return cached
    channel = params.get("channel")
    calling = _CALLING.set(context)
    try:
        resp = await getattr(client, sender)(**params)
    except SlackApiError as e:
        failure = _failure(e, method, channel)
        if failure is None:
            return None
        raise failure from (e if isinstance(failure, SlackApiFailure) else None)
    except BudgetExhausted:
        raise  # refused before it was sent: not an API request
    except Exception:
        count_api_request("slack", "error")
        raise
    finally:
        _CALLING.reset(calling)
    data = _answer(method, resp)
    if key is not None:
        context.remember(key, data)
    return data


def _answer(method: str, resp: Any) -> dict[str, Any]:
    count_api_request("slack", resp.status_code)
    data = resp.data
    if not isinstance(data, dict):
        raise SlackApiFailure(f"Slack {method} answered a non-JSON body")
    return data


def _failure(e: SlackApiError, method: str, channel: Any) -> Exception | None:
    """What a ``SlackApiError`` of ``method`` means to the queue (:func:`call_api`'s
    ``Raises``); ``None``: the thread asked for is gone."""
    where = f" on {channel}" if channel else ""
    response = e.response
    status = getattr(response, "status_code", None)
    count_api_request("slack", status if isinstance(status, int) else "error")
    data = getattr(response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    if status == 429 or code == "ratelimited":
        return RateLimited(
            _retry_after(response), f"Slack {method} rate limited", reason=f"ratelimited:{method}"
        )
    if code == "channel_not_found" and channel:
        return _ChannelGone(method)
    if code in _THREAD_GONE and method == "conversations.replies":
        return None
    if code in _FILE_UNREADABLE and method == "files.info":
        return None
    if code == "canvas_not_found" and method == "canvases.getContent":
        return None
    if code == "missing_scope" and method in SCOPE_NEEDED:
        needed = data.get("needed") if isinstance(data, dict) else None
        return MissingScope(method, needed if isinstance(needed, str) and needed else SCOPE_NEEDED[method])
    if isinstance(code, str) and code in AUTH_ERRORS:
        return AuthRevoked(f"Slack {method}: {code} ({PERMANENT_ERRORS[code]})")
    if isinstance(code, str) and code in PERMANENT_ERRORS:
        return PermanentError(f"Slack {method}{where}: {code} ({PERMANENT_ERRORS[code]})")
    return SlackApiFailure(f"Slack {method}{where} failed: HTTP {status}, error {code or '(none)'}")


class SlackClient:
    """The Web API clients of the Slack source: one ``aiohttp`` session (whose
    :func:`charging_trace` charges every attempt) shared by one ``AsyncWebClient`` per token,
    created on first use; a sync or a listing sends through :meth:`bind` with its context."""

    def __init__(self, settings: SlackSettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None
        self._webs: dict[str, AsyncWebClient] = {}

    def token(self, context: SyncContext) -> str | None:
        """The context's workspace token, else ``SLACK_BOT_TOKEN``."""
        return context.token(self.settings.slack_bot_token)

    def web(self, token: str) -> AsyncWebClient:
        """The Web API client of ``token`` (the SDK's default retry handlers)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS),
                trace_configs=[charging_trace()],  # every attempt charged (module docstring)
            )
        client = self._webs.get(token)
        if client is None:
            client = self._webs[token] = AsyncWebClient(
                token=token or None,
                base_url=self.settings.slack_api_url,
                session=self._session,
                timeout=int(HTTP_TIMEOUT_SECONDS),
            )
        return client

    def bind(self, context: SyncContext) -> SlackCall:
        """The requests of one sync or listing: its workspace's token, meter and checkpoint."""
        return SlackCall(self.web(self.token(context) or ""), context)

    async def aclose(self) -> None:
        """Close the HTTP session of the Web API clients (if one was opened)."""
        session, self._session, self._webs = self._session, None, {}
        if session is not None and not session.closed:
            await session.close()


class SlackCall:
    """The requests of one sync or listing (:meth:`SlackClient.bind`): the Web API client of
    its token (``web``) and :meth:`call`, charged to the context's budget."""

    def __init__(self, web: AsyncWebClient, context: SyncContext) -> None:
        self.web = web
        self.context = context

    async def call(self, method: str, /, **params: Any) -> dict[str, Any] | None:
        """:func:`call_api` with this call's client and context."""
        return await call_api(self.web, self.context, method, **params)
