"""The Notion SDK client and the request wrapper: retries, ``Retry-After``, error codes,
budget charging.

Through ``notion-client``'s ``AsyncClient`` (Notion-Version 2025-09-03). The SDK's own retry
loop is switched off; :meth:`NotionClient._call` retries 5xx answers twice after short sleeps
and a 429 only when its ``Retry-After`` is short, and hands a long ``Retry-After`` back to the
queue as :class:`~integrations.base.RateLimited` (the policy is spelled out on
:class:`~integrations.notion.NotionIntegration`). It is also the one place that charges the
workspace's budget (:mod:`integrations.metering`): one request per attempt sent, retries
included, and serves a read the current sync already received from its checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from notion_client import AsyncClient
from notion_client.client import ClientOptions
from notion_client.errors import APIErrorCode, APIResponseError, HTTPResponseError

from debounce.config import Settings
from debounce.metrics import count_api_request
from debounce.retry import parse_retry_after
from integrations.base import AuthRevoked, PermanentError, RateLimited, current_token
from integrations.metering import charge, recall, remember, request_key

__all__ = ["DEFAULT_RETRY_AFTER", "NOTION_VERSION", "NotionClient", "api_error", "endpoint_name"]

#: The Notion API version we speak (notion-client 3.1's default; pinned so an SDK upgrade
#: cannot change the response shapes under us). 2025-09-03 splits databases into data sources.
NOTION_VERSION = "2025-09-03"

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
_WRONG_KIND_CODES = frozenset(
    {APIErrorCode.ObjectNotFound.value, APIErrorCode.ValidationError.value}
)

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
    """The SDK half of :class:`~integrations.notion.NotionIntegration` (a mixin): the lazily
    created ``AsyncClient`` and every request through :meth:`_call`'s retry policy."""

    settings: Settings
    retry_delays: tuple[float, ...]
    max_inline_wait: float
    timeout_seconds: float
    _client: AsyncClient | None
    _clients: dict[str, AsyncClient]

    def _api(self) -> AsyncClient:
        """The SDK client of the current sync's workspace token (else ``NOTION_TOKEN``), one
        per token, created on first use.

        Raises:
            PermanentError: no token at all.
        """
        token = current_token(self.settings.notion_token)
        if not token:
            raise PermanentError(
                "NOTION_TOKEN is not set: set NOTION_TOKEN to the Notion integration's "
                "token (Settings → Connections → Develop or manage integrations) and "
                "share the pages with it, then re-sync"
            )
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
        self._client = client
        return client

    async def aclose(self) -> None:
        """Close the SDK clients' HTTP connection pools (idempotent)."""
        clients = list(self._clients.values())
        if self._client is not None and self._client not in clients:
            clients.append(self._client)
        self._client, self._clients = None, {}
        for client in clients:
            await client.aclose()

    async def _call(self, fn: Callable[..., Any], /, *, cache: bool = True, **kwargs: Any) -> Any:
        """``await fn(**kwargs)`` with this integration's retry policy (class docstring),
        charged to the current sync's budget (:mod:`integrations.metering`).

        Every attempt sent — the first and each in-process retry — is charged first
        (``charge()``: one request). With ``cache`` (reads a sync may repeat after it yielded:
        every request of a page sync) an answer the current sync's checkpoint already holds
        is returned without sending or charging anything, and a successful answer is recorded
        in it, keyed by ``request_key(<endpoint name>, kwargs)``; ``cache=False`` for answers
        that must be fresh (``search``: a listing).

        Raises:
            BudgetExhausted: the budget has no request left (nothing sent).
            RateLimited: a 429 whose ``Retry-After`` (seconds) is too long to wait here.
            HTTPResponseError: any other error answer once in-process retries are spent.
        """
        key = request_key(endpoint_name(fn), kwargs) if cache else None
        if key is not None:
            cached = recall(key)
            if cached is not None:
                return cached
        attempt = 0
        while True:
            await charge()
            try:
                call: Awaitable[Any] = fn(**kwargs)
                result = await call
            except HTTPResponseError as exc:
                count_api_request("notion", exc.status)
                code = _code(exc)
                can_retry = attempt < len(self.retry_delays)
                overloaded = exc.status == 529 or code == "service_overload"
                if exc.status == 429 or code == APIErrorCode.RateLimited.value or overloaded:
                    wait = parse_retry_after(exc.headers)
                    if wait is not None and wait <= self.max_inline_wait and can_retry:
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
                    delay = self.retry_delays[attempt]
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
                remember(key, result)
            return result

    async def _fetch(self, fn: Callable[..., Any], /, **kwargs: Any) -> dict[str, Any] | None:
        """One object via :meth:`_call`; ``None`` if Notion answers ``object_not_found``."""
        try:
            result = await self._call(fn, **kwargs)
        except APIResponseError as exc:
            if _code(exc) == APIErrorCode.ObjectNotFound.value:
                return None
            raise
        return result if isinstance(result, dict) else None


    def _bound(self, fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        async def call(**kwargs: Any) -> Any:
            return await self._call(fn, **kwargs)

        return call
