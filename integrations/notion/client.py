"""The Notion SDK client and the request wrapper: retries, ``Retry-After``, error codes,
budget charging.

Through ``notion-client``'s ``AsyncClient`` (Notion-Version 2025-09-03). The SDK's own retry
loop is switched off; :meth:`NotionCall.call` retries 5xx answers twice after short sleeps
and a 429 only when its ``Retry-After`` is short, and hands a long ``Retry-After`` back to the
queue as :class:`~debounce.contract.RateLimited` (the policy is spelled out on
:class:`NotionClient`). It is also the one place that charges the workspace's budget (the
sync's :class:`~debounce.contract.SyncContext`): one request per attempt sent, retries
included, and serves a read the current sync already received from its checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from notion_client import AsyncClient
from notion_client.client import ClientOptions
from notion_client.errors import APIErrorCode, APIResponseError, HTTPResponseError

from debounce.contract import (
    AuthRevoked,
    PermanentError,
    RateLimited,
    SyncContext,
    count_api_request,
    parse_retry_after,
    request_key,
)
from integrations.notion.settings import NotionSettings

__all__ = [
    "DEFAULT_RETRY_AFTER",
    "NOTION_VERSION",
    "NotionCall",
    "NotionClient",
    "api_error",
    "endpoint_name",
]

#: The Notion API version we speak, pinned so an SDK upgrade cannot change the response shapes
#: under us: the newest (https://developers.notion.com/reference/versioning, "our latest version
#: is 2026-03-11"; notion-client 3.1 defaults to 2025-09-03). 2025-09-03 split databases into
#: data sources; 2026-03-11 renamed ``archived`` to ``in_trash``, the ``transcription`` block to
#: ``meeting_notes`` and ``after`` to ``position`` for appending blocks (which we never do):
#: https://developers.notion.com/guides/get-started/upgrade-guide-2026-03-11. It also pins the
#: markdown endpoint's output: the endpoint has no format version of its own (its only
#: parameter is ``include_transcript``).
NOTION_VERSION = "2026-03-11"

#: One logger for the whole source, named as before the split into modules.
log = logging.getLogger("integrations.notion")

#: Error codes after which a retry cannot help: the queue fails the job at once.
_PERMANENT_CODES = frozenset(
    {
        APIErrorCode.Unauthorized.value,
        APIErrorCode.RestrictedResource.value,
        APIErrorCode.InvalidJSON.value,
        APIErrorCode.InvalidRequestURL.value,
        APIErrorCode.InvalidRequest.value,
        APIErrorCode.ValidationError.value,
    }
)
#: Codes meaning "this id is not (or no longer) an object of the kind asked for".
_WRONG_KIND_CODES = frozenset({APIErrorCode.ObjectNotFound.value, APIErrorCode.ValidationError.value})

#: Retry-After to assume when a 429 carries none, seconds.
DEFAULT_RETRY_AFTER = 30.0


def _rate_limit_reason(error: HTTPResponseError) -> str:
    """Notion's ``rate_limit_reason`` of a 429 (in the error body, at the top or under
    ``additional_data``; https://developers.notion.com/reference/request-limits), else
    ``rate_limited``."""
    try:
        body = json.loads(error.body)
    except (TypeError, ValueError):
        return "rate_limited"
    if isinstance(body, dict):
        extra = body.get("additional_data")
        for where in (body, extra if isinstance(extra, dict) else {}):
            reason = where.get("rate_limit_reason")
            if isinstance(reason, str) and reason:
                return reason[:100]
    return "rate_limited"


def _code(error: HTTPResponseError) -> str:
    code = error.code
    return str(code.value if isinstance(code, APIErrorCode) else code)


def api_error(error: APIResponseError) -> Exception | None:
    """What an error answer means for the queue: :class:`AuthRevoked` for ``unauthorized``
    (the token no longer works), :class:`PermanentError` for the codes after which a retry
    cannot help, ``None`` for the rest (the caller re-raises: transient)
    (https://developers.notion.com/reference/status-codes)."""
    code = _code(error)
    if code == APIErrorCode.Unauthorized.value:
        return AuthRevoked(f"Notion answered {error.status} {code}: the token no longer works")
    if code in _PERMANENT_CODES:
        return PermanentError(f"Notion answered {error.status} {code}: {error}")
    return None


#: ``notion-client`` endpoint classes → the endpoint names of the request keys (as the
#: SDK's attribute paths spell them: ``api.blocks.children.list`` → ``blocks.children.list``).
_ENDPOINT_PREFIXES = {
    "BlocksChildrenEndpoint": "blocks.children",
    "BlocksEndpoint": "blocks",
    "DataSourcesEndpoint": "data_sources",
    "DatabasesEndpoint": "databases",
    "PagesEndpoint": "pages",
    "SearchEndpoint": "search",
    "UsersEndpoint": "users",
}


def endpoint_name(fn: Callable[..., Any]) -> str:
    """The SDK attribute path of a bound ``notion-client`` endpoint method
    (``api.pages.retrieve`` → ``"pages.retrieve"``, the callable ``api.search`` →
    ``"search"``); anything else: its qualified name."""
    owner = getattr(fn, "__self__", None)
    if owner is None:  # an endpoint object called directly (``api.search``) or a function
        prefix = _ENDPOINT_PREFIXES.get(type(fn).__name__)
        return prefix or str(getattr(fn, "__qualname__", type(fn).__name__))
    prefix = _ENDPOINT_PREFIXES.get(type(owner).__name__, type(owner).__name__)
    return f"{prefix}.{getattr(fn, '__name__', 'call')}"


class NotionClient:
    """The SDK clients of the Notion source (one ``AsyncClient`` per token, created on first
    use, shared by every sync and listing of this worker) and the retry policy; a sync or a
    listing sends its requests through :meth:`bind` with its context.

    Retry policy (a deliberate choice). notion-client 3.x retries 429 and GET 500/503 inside
    the call, sleeping ``Retry-After`` (capped at 60 s) — a worker slot asleep for up to a
    minute, twice, and the sleep repeats the call the rate limit just refused. So the SDK's
    loop is off (``ClientOptions(retry=False)``) and :meth:`NotionCall.call` decides per answer:

    - 5xx (``internal_server_error``, ``service_unavailable``, ``gateway_timeout``, a gateway's
      non-JSON 502) and ``conflict_error``: retried in process after ``retry_delays`` seconds
      (default 0.5 s then 2 s: a blip should not cost the page a 30 s queue backoff); when
      they are spent the SDK's exception propagates and the queue backs off;
    - 429 ``rate_limited``: retried in process only if ``Retry-After`` ≤ ``max_inline_wait``
      (default 1 s, within the same retry budget); a longer wait raises
      :class:`RateLimited` at once so the slot is freed and the queue reschedules at
      ``Retry-After`` without spending an attempt (Notion allows ~3 requests/s per
      integration, shared by every worker: https://developers.notion.com/reference/request-limits);
    - timeouts (``timeout_seconds``, default 30 s) and connection errors propagate (retry);
    - ``unauthorized``/``restricted_resource`` and 400-class request errors:
      :class:`PermanentError` (:func:`api_error`).
    """

    def __init__(
        self,
        settings: NotionSettings,
        *,
        retry_delays: Sequence[float] = (0.5, 2.0),
        max_inline_wait: float = 1.0,
        timeout_seconds: float = 30.0,
    ) -> None:
        self.settings = settings
        self.retry_delays = tuple(retry_delays)
        self.max_inline_wait = max_inline_wait
        self.timeout_seconds = timeout_seconds
        self._clients: dict[str, AsyncClient] = {}

    def api(self, token: str) -> AsyncClient:
        """The SDK client of ``token`` (one per token, created on first use)."""
        client = self._clients.get(token)
        if client is None:
            client = self._clients[token] = AsyncClient(
                options=ClientOptions(
                    auth=token,
                    base_url=self.settings.notion_base_url.rstrip("/"),
                    timeout_ms=int(self.timeout_seconds * 1000),
                    notion_version=NOTION_VERSION,
                    retry=False,
                    logger=logging.getLogger("integrations.notion.sdk"),
                    log_level=logging.WARNING,
                )
            )
        return client

    def bind(self, context: SyncContext) -> NotionCall:
        """The requests of one sync or listing: its workspace's token, meter and checkpoint.

        Raises:
            PermanentError: no token at all (neither the workspace's nor ``NOTION_TOKEN``).
        """
        token = context.token(self.settings.notion_token)
        if not token:
            raise PermanentError(
                "NOTION_TOKEN is not set: set NOTION_TOKEN to the Notion integration's "
                "token (Settings → Connections → Develop or manage integrations) and "
                "share the pages with it, then re-sync"
            )
        return NotionCall(self, context, token)

    async def aclose(self) -> None:
        """Close the SDK clients' HTTP connection pools (idempotent)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


class NotionCall:
    """The requests of one sync or listing (:meth:`NotionClient.bind`): ``api`` is the SDK
    client of its token, :meth:`call` sends one request with the retry policy, charged to the
    context's budget."""

    def __init__(self, client: NotionClient, context: SyncContext, token: str) -> None:
        self.client = client
        self.context = context
        self.token = token
        self.api = client.api(token)

    async def call(self, fn: Callable[..., Any], /, *, cache: bool = True, **kwargs: Any) -> Any:
        """``await fn(**kwargs)`` with the retry policy (:class:`NotionClient`), charged to
        the context's budget (:mod:`debounce.contract.metering`).

        Every attempt sent — the first and each in-process retry — is charged first
        (``context.charge()``: one request). With ``cache`` (reads a sync may repeat after it
        yielded: every request of a page sync) an answer the context's checkpoint already
        holds is returned without sending or charging anything, and a successful answer is
        recorded in it, keyed by ``request_key(<endpoint name>, kwargs)``; ``cache=False``
        for answers that must be fresh (``search``: a listing).

        Raises:
            BudgetExhausted: the budget has no request left (nothing sent).
            RateLimited: a 429 whose ``Retry-After`` (seconds) is too long to wait here.
            HTTPResponseError: any other error answer once in-process retries are spent.
        """
        context, policy = self.context, self.client
        key = request_key(endpoint_name(fn), kwargs) if cache else None
        if key is not None:
            cached = context.recall(key)
            if cached is not None:
                return cached
        attempt = 0
        while True:
            await context.charge()
            try:
                call: Awaitable[Any] = fn(**kwargs)
                result = await call
            except HTTPResponseError as exc:
                count_api_request("notion", exc.status)
                code = _code(exc)
                can_retry = attempt < len(policy.retry_delays)
                overloaded = exc.status == 529 or code == "service_overload"
                if exc.status == 429 or code == APIErrorCode.RateLimited.value or overloaded:
                    wait = parse_retry_after(exc.headers)
                    if wait is not None and wait <= policy.max_inline_wait and can_retry:
                        log.info("notion: rate limited, waiting %.1f s in process", wait)
                        await asyncio.sleep(wait)
                        attempt += 1
                        continue
                    raise RateLimited(
                        DEFAULT_RETRY_AFTER if wait is None else wait,
                        "Notion overloaded" if overloaded else "Notion rate limited",
                        reason="service_overload" if overloaded else _rate_limit_reason(exc),
                    ) from exc
                transient = exc.status >= 500 or code == APIErrorCode.ConflictError.value
                if transient and can_retry:
                    delay = policy.retry_delays[attempt]
                    log.info("notion: %s (%s), retrying in %.1f s", exc.status, code, delay)
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                raise
            except Exception:
                count_api_request("notion", "error")
                raise
            count_api_request("notion", 200)
            if key is not None:
                context.remember(key, result)
            return result

    async def fetch(self, fn: Callable[..., Any], /, **kwargs: Any) -> dict[str, Any] | None:
        """One object via :meth:`call`; ``None`` if Notion answers ``object_not_found``."""
        try:
            result = await self.call(fn, **kwargs)
        except APIResponseError as exc:
            if _code(exc) == APIErrorCode.ObjectNotFound.value:
                return None
            raise
        return result if isinstance(result, dict) else None

    def bound(self, fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        """``fn`` sent through :meth:`call` (for the SDK's pagination helpers)."""

        async def call(**kwargs: Any) -> Any:
            return await self.call(fn, **kwargs)

        return call
