"""Charging each outgoing API request to the workspace's budget, and the checkpoint of a sync
that yields its slot when the budget runs out mid-way.

The worker gives every sync (and every backfill page) a
:class:`~debounce.contract.sync.SyncContext` with a :class:`Meter` of the job's workspace and
a :class:`Checkpoint`. Each source's one request wrapper (Notion ``NotionClient.call``, Slack
``call_api``) does, before each attempt it sends (its own retries included):

1. ``cached = context.recall(key)``: a response this sync already fetched before it yielded
   is served from the checkpoint, free;
2. ``await context.charge()``: take one request from the budget, or raise
   :class:`~debounce.contract.errors.BudgetExhausted` (the worker hands the job back to the
   queue, due when the budget allows, with the checkpoint of what was fetched so far; the
   attempt is given back);
3. after a successful answer ``context.remember(key, response)``.

Without a meter (tests of one source) nothing is charged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from debounce.contract.errors import BudgetExhausted

__all__ = ["BudgetExhausted", "Checkpoint", "Meter", "request_key"]


class Meter(Protocol):
    """Takes requests from one workspace's budget (``debounce.workspaces.budgets``)."""

    async def take(self) -> None:
        """Charge one request.

        Raises:
            BudgetExhausted: none left now.
        """
        ...


class Checkpoint:
    """The responses one sync received, by :func:`request_key`, JSON-serialisable: kept with
    the job when it yields (``sync_jobs.checkpoint``) and served back to the resumed sync of
    the same revision, so a big page costs its requests once however often it yields."""

    def __init__(self, responses: Mapping[str, Any] | None = None) -> None:
        self.responses: dict[str, Any] = dict(responses or {})

    def to_json(self) -> dict[str, Any]:
        """``{"responses": {key: response}}``."""
        return {"responses": self.responses}

    @classmethod
    def from_json(cls, data: Any) -> Checkpoint:
        """The checkpoint stored by :meth:`to_json` (anything else: an empty one)."""
        responses = data.get("responses") if isinstance(data, dict) else None
        return cls(responses if isinstance(responses, dict) else None)


def request_key(method: str, params: Mapping[str, Any]) -> str:
    """A stable key for one read request: the method and its parameters as sorted JSON."""
    return method + " " + json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
