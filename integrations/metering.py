"""Charging each outgoing API request to the workspace's budget, and the checkpoint of a sync
that yields its slot when the budget runs out mid-way.

The worker wraps every sync (and every enumeration step of a backfill) in
:func:`metered` with a :class:`Meter` of the job's workspace. Each integration's one request
wrapper (Notion ``NotionClient._call``, Slack ``call_api``) does, before each attempt it sends
(its own retries included):

1. ``cached = recall(key)``: a response this sync already fetched before it yielded is served
   from the checkpoint, free;
2. ``await charge()``: take one request from the budget, or raise :class:`BudgetExhausted`
   (the worker hands the job back to the queue, due when the budget allows, with the
   checkpoint of what was fetched so far; the attempt is given back);
3. after a successful answer ``remember(key, response)``.

Outside :func:`metered` (the web, tests of one integration) nothing is charged or cached.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from integrations.base import SyncError

__all__ = ["BudgetExhausted", "Meter", "Checkpoint", "charge", "metered", "recall", "remember",
           "request_key"]


class BudgetExhausted(SyncError):
    """The workspace's budget has no request left for this sync: hand the job back, due in
    ``retry_after`` seconds (when the bucket will hold one again). Not a 429: nothing was sent
    and no other worker needs telling (their claims skip an empty bucket)."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"API budget exhausted (a request is available in {retry_after:.2f} s)")
        self.retry_after = max(0.0, float(retry_after))


class Meter(Protocol):
    """Takes requests from one workspace's budget (``debounce.budgets``)."""

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


_METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("debounce_meter",
                                                                      default=None)
_CHECKPOINT: contextvars.ContextVar[Checkpoint | None] = contextvars.ContextVar(
    "debounce_checkpoint", default=None)


@contextlib.contextmanager
def metered(meter: Meter | None, checkpoint: Checkpoint | None = None) -> Iterator[Checkpoint]:
    """Run a sync with ``meter`` charging its requests and ``checkpoint`` (default: a new one)
    recording and serving its responses; yields the checkpoint."""
    checkpoint = checkpoint if checkpoint is not None else Checkpoint()
    t1 = _METER.set(meter)
    t2 = _CHECKPOINT.set(checkpoint)
    try:
        yield checkpoint
    finally:
        _CHECKPOINT.reset(t2)
        _METER.reset(t1)


async def charge() -> None:
    """Charge one request to the current sync's budget (no-op outside :func:`metered`).

    Raises:
        BudgetExhausted: the budget is empty.
    """
    meter = _METER.get()
    if meter is not None:
        await meter.take()


def request_key(method: str, params: Mapping[str, Any]) -> str:
    """A stable key for one read request: the method and its parameters as sorted JSON."""
    return method + " " + json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))


def recall(key: str) -> Any:
    """The response to ``key`` this sync already received (checkpoint), else ``None``."""
    checkpoint = _CHECKPOINT.get()
    return None if checkpoint is None else checkpoint.responses.get(key)


def remember(key: str, response: Any) -> None:
    """Record a successful response (only JSON objects are kept)."""
    checkpoint = _CHECKPOINT.get()
    if checkpoint is not None and isinstance(response, dict):
        checkpoint.responses[key] = response
