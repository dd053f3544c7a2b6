"""Per-workspace API budgets and request counts of the Notion stand-in (mixed into
:class:`standins.notion_api.FakeNotion`).

Notion limits requests per connection and, separately, per workspace: every connection of a
workspace (other apps' too) shares the workspace's budget
(https://developers.notion.com/reference/request-limits, "Per-workspace limit"). The stand-in
models the per-workspace one, off by default: :meth:`NotionBudgets.set_budget` gives a
workspace a token bucket (:class:`standins.budgets.TokenBucket`) that every request with a
token of that workspace draws one token from, whichever token, for every endpoint under
``/v1/`` except the OAuth token exchange (which carries client credentials, not a workspace's
token). The budget is charged right after authentication, before any injected fault (a
request a fault answers went through, as one the real API fails after admitting it).

A request that finds the bucket empty costs nothing and answers as Notion does: HTTP 429,
``Retry-After`` in whole seconds (the time until one token is back, rounded up, at least 1),
and ``{"object": "error", "status": 429, "code": "rate_limited", "message": ...,
"request_id": ..., "additional_data": {"rate_limit_reason": ...}}`` (the page above: "Requests
that exceed a limit return a "rate_limited" error code and an HTTP 429 response.
additional_data.rate_limit_reason says which limit was exceeded"; ``notion_client`` parses
``additional_data`` into ``APIResponseError.additional_data``). The reason is
:data:`DEFAULT_RATE_LIMIT_REASON` unless :meth:`~NotionBudgets.set_budget` says otherwise.

:meth:`~NotionBudgets.usage` counts, per workspace, the requests that passed (by endpoint, see
:data:`standins.notion_api.ENDPOINTS`) and the 429s, with the clock's time of each; the
older :attr:`~standins.notion_api.FakeNotion.calls` still counts every request received.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from starlette.responses import Response

from standins.budgets import BudgetBook, Clock, Usage, retry_after_seconds
from standins.notion_http import DEFAULT_MESSAGES, error_response, norm_id

if TYPE_CHECKING:
    from standins.notion_workspaces import NotionWorkspace

__all__ = ["DEFAULT_RATE_LIMIT_REASON", "NotionBudgets"]

#: ``additional_data.rate_limit_reason`` of the stand-in's 429s by default. Notion's page
#: lists its values in a table (and warns that others can appear); this one is the stand-in's
#: own name for "the per-workspace limit": pass Notion's exact value to
#: :meth:`NotionBudgets.set_budget` when a test depends on it.
DEFAULT_RATE_LIMIT_REASON = "workspace_rate_limit"


class NotionBudgets:
    """Budgets and usage of :class:`~standins.notion_api.FakeNotion` (see the module)."""

    # Provided by FakeNotion / NotionWorkspaces.
    workspace_id: str
    workspaces: dict[str, NotionWorkspace]
    _lock: threading.Lock

    def _init_budgets(self, clock: Clock = time.monotonic) -> None:
        self._budgets = BudgetBook(clock)
        self._budget_reasons: dict[str, str] = {}

    def _budget_scope(self, workspace_id: str | None) -> str:
        """The canonical id of ``workspace_id`` (``None``: the default workspace).

        Raises:
            KeyError: no such workspace.
        """
        if workspace_id is None:
            return self.workspace_id
        wid = norm_id(workspace_id) or workspace_id
        if wid not in self.workspaces:
            raise KeyError(f"no workspace {workspace_id!r}: add_workspace() it first")
        return wid

    def set_budget(
        self,
        workspace_id: str | None = None,
        *,
        per_second: float,
        burst: float,
        reason: str = DEFAULT_RATE_LIMIT_REASON,
    ) -> None:
        """Limit workspace ``workspace_id`` (``None``: the default one) to ``burst`` requests
        at once, refilled at ``per_second`` requests per second (Notion's per-connection
        order of magnitude is "an average of three requests per second",
        https://developers.notion.com/reference/request-limits). The bucket starts full and
        replaces any earlier budget of the workspace; ``reason`` is the 429s'
        ``additional_data.rate_limit_reason``.

        Raises:
            KeyError: no such workspace.
            ValueError: ``per_second`` is not positive or ``burst`` is below 1.
        """
        wid = self._budget_scope(workspace_id)
        self._budgets.set(wid, per_second=per_second, burst=burst)
        with self._lock:
            self._budget_reasons[wid] = reason

    def clear_budget(self, workspace_id: str | None = None) -> None:
        """Lift the budget of ``workspace_id`` (``None``: the default workspace); its requests
        are still counted."""
        self._budgets.clear(self._budget_scope(workspace_id))

    def usage(self, workspace_id: str | None = None) -> Usage:
        """What the workspace (``None``: the default one) sent since the start or
        :meth:`reset_usage`: requests accepted by endpoint, 429s answered, and the stand-in's
        clock (seconds) at each.

        Raises:
            KeyError: no such workspace.
        """
        return self._budgets.usage(self._budget_scope(workspace_id))

    def reset_usage(self) -> None:
        """Forget the counts of :meth:`usage` for every workspace (budgets keep their tokens;
        ``calls`` is not touched)."""
        self._budgets.reset_usage()

    def _spend(self, workspace_id: str, endpoint: str) -> Response | None:
        """Charge one request of ``workspace_id`` to ``endpoint``: ``None`` if it may go on,
        else the 429 to answer."""
        wait = self._budgets.admit(workspace_id, endpoint)
        if wait <= 0:
            return None
        with self._lock:
            reason = self._budget_reasons.get(workspace_id, DEFAULT_RATE_LIMIT_REASON)
        return error_response(
            429,
            "rate_limited",
            DEFAULT_MESSAGES["rate_limited"],
            {"Retry-After": str(retry_after_seconds(wait))},
            additional_data={"rate_limit_reason": reason},
        )
