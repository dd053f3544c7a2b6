"""Per-team (per-workspace) API budgets and request counts of the Slack stand-in (mixed into
:class:`standins.slack_api.FakeSlack`).

Slack limits Web API calls "per API method per workspace/team per app", in tiers of requests
per minute with some bursts tolerated (https://docs.slack.dev/apis/web-api/rate-limits:
tier 3, which ``conversations.history`` and ``conversations.replies`` belong to for internal
and Marketplace apps, is "50+ per minute"; since 2025-05-29 a commercially distributed
non-Marketplace app gets 1 per minute for those two). The stand-in, which serves one app, has
buckets (:class:`standins.budgets.TokenBucket`) per team and method, set with
:meth:`SlackBudgets.set_budget`, off by default, plus optionally one per team for all its
methods (``method=None``); a call takes one token from each bucket that applies, or none.
Every call with a token of the team is charged (Bearer header or ``token`` parameter, the
default team's when the fake accepts any token), whatever method, except ``oauth.v2.access``,
which carries the app's client credentials rather than a team's token; calls without a valid
token are not (they answer ``not_authed``/``invalid_auth``/``token_revoked``). The budget is
charged before any injected fault.

A call that finds a bucket empty costs nothing and answers as Slack does: HTTP 429 with
``Retry-After`` in seconds (the time until every bucket involved holds a token, rounded up, at
least 1) and ``{"ok": false, "error": "ratelimited"}`` (same page).
:meth:`~SlackBudgets.usage` counts per team the calls that passed (by method) and the 429s,
with the clock's time of each; the older ``calls`` and ``requests`` of
:class:`~standins.slack_api.FakeSlack` still record every call received.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse, Response

from standins.budgets import BudgetBook, Clock, Usage, retry_after_seconds
from standins.slack_teams import token_of

if TYPE_CHECKING:
    from standins.slack_teams import SlackTeam

__all__ = ["SlackBudgets"]

#: The method that is never charged: it authenticates the app, not a team.
_FREE = "oauth.v2.access"


class SlackBudgets:
    """Budgets and usage of :class:`~standins.slack_api.FakeSlack` (see the module)."""

    # Provided by FakeSlack / SlackTeams.
    team_id: str
    teams: dict[str, SlackTeam]
    _lock: threading.RLock

    if TYPE_CHECKING:

        def _team_for(self, token: str) -> tuple[str | None, str | None]: ...

    def _init_budgets(self, clock: Clock = time.monotonic) -> None:
        self._budgets = BudgetBook(clock)

    def _budget_scope(self, team_id: str | None) -> str:
        """``team_id`` (``None``: the default team).

        Raises:
            KeyError: no such team.
        """
        tid = self.team_id if team_id is None else team_id
        if tid not in self.teams:
            raise KeyError(f"no team {team_id!r}: add_team() it first")
        return tid

    def set_budget(
        self,
        team_id: str | None = None,
        *,
        per_minute: float,
        burst: float,
        method: str | None = None,
    ) -> None:
        """Limit team ``team_id`` (``None``: the default team) to ``burst`` calls at once,
        refilled at ``per_minute`` calls per minute, for ``method`` (e.g.
        ``"conversations.history"``, tier 3: ``per_minute=50``) or, with ``method=None``, for
        all its methods together. The bucket starts full and replaces an earlier one of the
        same team and method.

        Raises:
            KeyError: no such team.
            ValueError: ``per_minute`` is not positive, ``burst`` is below 1, or ``method``
                is ``oauth.v2.access`` (never charged).
        """
        if method == _FREE:
            raise ValueError(f"{_FREE} is not charged to a team's budget")
        self._budgets.set(self._budget_scope(team_id), per_second=per_minute / 60, burst=burst, method=method)

    def clear_budget(self, team_id: str | None = None, *, method: str | None = None) -> None:
        """Lift the budget of team ``team_id`` (``None``: the default team) for ``method``
        (``None``: the team-wide one); its calls are still counted."""
        self._budgets.clear(self._budget_scope(team_id), method)

    def usage(self, team_id: str | None = None) -> Usage:
        """What team ``team_id`` (``None``: the default team) sent since the start or
        :meth:`reset_usage`: calls accepted by method, 429s answered, and the stand-in's clock
        (seconds) at each.

        Raises:
            KeyError: no such team.
        """
        return self._budgets.usage(self._budget_scope(team_id))

    def reset_usage(self) -> None:
        """Forget the counts of :meth:`usage` for every team (budgets keep their tokens;
        ``calls`` and ``requests`` are not touched)."""
        self._budgets.reset_usage()

    def _spend(self, method: str, params: Mapping[str, str], authorization: str | None) -> Response | None:
        """Charge one call of ``method`` to the team of its token: ``None`` if it may go on
        (or is not charged), else the 429 to answer. Called with the lock held."""
        token = token_of(params, authorization)
        if method == _FREE or not token:
            return None
        team, _ = self._team_for(token)
        if team is None:
            return None
        wait = self._budgets.admit(team, method)
        if wait <= 0:
            return None
        return JSONResponse(
            {"ok": False, "error": "ratelimited"},
            status_code=429,
            headers={"Retry-After": str(retry_after_seconds(wait))},
        )
