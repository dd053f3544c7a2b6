"""The memory of a markdown endpoint that refused a workspace's token.

``GET /v1/pages/{id}/markdown`` answers 403 to a connection without the read-content
capability (https://developers.notion.com/reference/retrieve-page-markdown, "Requirements"), and
an API that does not serve it answers 400 ``invalid_request_url``. Asking again on every page
sync would spend one request per page for nothing before the block walk (3 requests per
backfilled page instead of 2). So a refusal is remembered **per workspace** — in the sync
state of the key ``~workspace/<id>/markdown-endpoint`` (``env`` for the environment's token),
which every worker reads once, and in this process — with a fingerprint of the token it was
refused to. The endpoint is asked again after :data:`RETRY_AFTER` (a capability can be granted
at any time) or as soon as the workspace's token changes (a re-install). A success forgets the
refusal.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from debounce.contract import SyncContext

__all__ = ["RETRY_AFTER", "EndpointRefusals", "token_fingerprint"]

log = logging.getLogger("integrations.notion")

#: How long a refusal is believed before the endpoint is asked again.
RETRY_AFTER = timedelta(days=1)

_STATE_SOURCE = "notion"


def token_fingerprint(token: str) -> str:
    """A short digest of ``token`` (the token itself is never stored in the state)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


def _key(workspace_id: int | None, endpoint: str = "markdown-endpoint") -> str:
    return f"~workspace/{'env' if workspace_id is None else workspace_id}/{endpoint}"


class EndpointRefusals:
    """Which workspaces' tokens the markdown endpoint refused, and since when.

    ``endpoint``: the last part of the state key (``markdown-endpoint``; the comments
    endpoint's refusals, a connection without the read-comments capability, are
    ``comments-endpoint``). ``clock``: the current time (aware UTC; tests move it). One
    instance per syncer: the in-process copy saves a database read per sync once a workspace
    was looked up.
    """

    def __init__(
        self,
        *,
        retry_after: timedelta = RETRY_AFTER,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        endpoint: str = "markdown-endpoint",
    ) -> None:
        self.endpoint = endpoint
        self.retry_after = retry_after
        self.clock = clock
        #: key → the stored memory (``{}``: not refused, as far as this process knows).
        self._known: dict[str, dict[str, Any]] = {}

    async def _memory(self, context: SyncContext, key: str) -> dict[str, Any]:
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = await context.writer().get_state(_STATE_SOURCE, key)
        return known

    async def refused(self, context: SyncContext, workspace_id: int | None, token: str) -> bool:
        """Whether the endpoint refused this workspace's ``token`` less than
        :attr:`retry_after` ago (then the sync goes straight to the block walk)."""
        memory = await self._memory(context, _key(workspace_id, self.endpoint))
        if not memory or memory.get("token") != token_fingerprint(token):
            return False
        try:
            since = datetime.fromisoformat(str(memory.get("refused_at")))
        except ValueError:
            return False
        return self.clock() - since < self.retry_after

    async def remember(self, context: SyncContext, workspace_id: int | None, token: str, reason: str) -> None:
        """Record that the endpoint refused ``token`` now (``reason``: the answer)."""
        key = _key(workspace_id, self.endpoint)
        memory = {
            "refused_at": self.clock().isoformat(),
            "token": token_fingerprint(token),
            "reason": reason[:200],
        }
        self._known[key] = memory
        await context.writer().set_state(_STATE_SOURCE, key, memory)
        log.info(
            "notion: the markdown endpoint refused workspace %s's token (%s); its pages "
            "use the block walk, asked again in %s or when its token changes",
            "env" if workspace_id is None else workspace_id,
            reason,
            self.retry_after,
        )

    async def forget(self, context: SyncContext, workspace_id: int | None) -> None:
        """The endpoint served this workspace: drop a remembered refusal (if any)."""
        key = _key(workspace_id, self.endpoint)
        if self._known.get(key):
            self._known[key] = {}
            await context.writer().set_state(_STATE_SOURCE, key, {})
