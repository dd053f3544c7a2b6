"""The operator's side of push delivery: register an endpoint (with optional filters: source,
workspace, kinds of change), rotate its secret with an overlap, disable, enable, replay from a
cursor, remove; and each subscription's state and lag (what the admin API, the CLI and the
dashboard show). SQL: ``sql/queries/delivery.sql``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from debounce.delivery.signing import new_secret
from debounce.documents import feed
from debounce.documents.kinds import check_kinds as check_document_kinds
from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries

__all__ = [
    "KINDS",
    "MAX_OVERLAP_SECONDS",
    "Start",
    "Subscription",
    "SubscriptionNotFound",
    "create",
    "disable",
    "enable",
    "get",
    "list_subscriptions",
    "parse_start",
    "remove",
    "replay",
    "rotate",
]

_Q = queries("delivery")

#: The kinds of change a subscription may ask for (the feed's ``op``); none: every kind.
KINDS = ("upsert", "delete")
#: The longest overlap of a rotated secret, seconds (a week).
MAX_OVERLAP_SECONDS = 7 * 86400.0
#: Lag is counted up to this many changes (the dashboard shows "10000+").
LAG_COUNT_LIMIT = 10000


class SubscriptionNotFound(LookupError):
    """No subscription has this id."""


@dataclass(frozen=True)
class Start:
    """Where a subscription follows the feed from: after ``cursor`` (``None``: from the oldest
    change retained)."""

    cursor: feed.Cursor | None

    def params(self) -> dict[str, Any]:
        """The position as ``delivery.sql`` takes it."""
        c = self.cursor
        return {
            "epoch": c.epoch if c else None,
            "after_xid": str(c.xid) if c else None,
            "after_seq": c.seq if c else None,
        }


async def parse_start(db: Db, text: str | None) -> Start:
    """``text`` as a start: ``head`` or ``None`` (the changes written from now on),
    ``oldest`` (every change retained), or a feed cursor (the changes after it).

    Raises:
        ValueError: anything else (a malformed cursor).
    """
    if text is None or text == "head":
        return Start(await feed.head(db))
    if text == "oldest":
        return Start(None)
    try:
        return Start(feed.Cursor.decode(text))
    except feed.CursorError:
        raise ValueError(f"start must be 'head', 'oldest' or a feed cursor, not {text[:80]!r}") from None


@dataclass(frozen=True)
class Subscription:
    """A subscription as an operator sees it. ``cursor``: the position delivered up to (the
    text a consumer keeps; ``None``: from the oldest retained change); ``status`` ``active``
    or ``disabled`` (``disabled_reason`` says why); ``batch_id`` the ``webhook-id`` of the
    batch in flight and ``attempts`` its failed attempts, ``next_attempt_at`` when it is tried
    next; ``failing_since`` the first failure of the current run of them; ``last_status`` the
    last answer's HTTP status (``None``: none, or no answer: ``last_error`` says);
    ``lag_changes`` the changes after its position that pass its filters (counted up to
    :data:`LAG_COUNT_LIMIT` + 1) and ``lag_seconds`` the age of the oldest (0: none waits).
    Datetimes are UTC."""

    id: int
    url: str
    description: str
    source_type: str | None
    workspace_id: int | None
    kinds: list[str]
    document_kinds: list[str]
    full_content: bool
    status: str
    disabled_reason: str | None
    disabled_at: datetime | None
    cursor: str | None
    batch_id: str | None
    batch_changes: int | None
    attempts: int
    next_attempt_at: datetime
    failing_since: datetime | None
    last_status: int | None
    last_error: str | None
    last_attempt_at: datetime | None
    last_success_at: datetime | None
    delivered_changes: int
    delivered_batches: int
    leased_by: str | None
    lease_until: datetime | None
    previous_secret_until: datetime | None
    created_at: datetime
    lag_changes: int = 0
    lag_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The subscription as the admin API's JSON object (datetimes ISO 8601)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = value.isoformat() if isinstance(value, datetime) else value
        return out


def _subscription(row: Any) -> Subscription:
    cursor = (
        feed.Cursor(row["epoch"], int(row["after_xid"]), int(row["after_seq"])).encode()
        if row["after_xid"] is not None
        else None
    )
    lag_oldest = row.get("lag_oldest_at")
    read_at = row.get("read_at") or datetime.now(UTC)
    return Subscription(
        id=int(row["id"]),
        url=row["url"],
        description=row["description"],
        source_type=row["source_type"],
        workspace_id=row["workspace_id"],
        kinds=list(row["kinds"]),
        document_kinds=list(row["document_kinds"]),
        full_content=bool(row["full_content"]),
        status=row["status"],
        disabled_reason=row["disabled_reason"],
        disabled_at=row["disabled_at"],
        cursor=cursor,
        batch_id=row["batch_id"],
        batch_changes=row["batch_changes"],
        attempts=int(row["attempts"]),
        next_attempt_at=row["next_attempt_at"],
        failing_since=row["failing_since"],
        last_status=row["last_status"],
        last_error=row["last_error"],
        last_attempt_at=row["last_attempt_at"],
        last_success_at=row["last_success_at"],
        delivered_changes=int(row["delivered_changes"]),
        delivered_batches=int(row["delivered_batches"]),
        leased_by=row["leased_by"],
        lease_until=row["lease_until"],
        previous_secret_until=row["previous_secret_until"],
        created_at=row["created_at"],
        lag_changes=int(row.get("lag_changes") or 0),
        lag_seconds=max((read_at - lag_oldest).total_seconds(), 0.0) if lag_oldest else 0.0,
    )


def check_url(url: str) -> str:
    """``url`` if it is an absolute ``http``/``https`` URL with a host.

    Raises:
        ValueError: anything else.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 2000:
        raise ValueError(f"url must be an absolute http(s) URL, not {url[:80]!r}")
    return url


def check_kinds(kinds: Sequence[str]) -> list[str]:
    """``kinds`` sorted, without repeats.

    Raises:
        ValueError: a kind not in :data:`KINDS`.
    """
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kind(s) of change {', '.join(unknown)} (known: {', '.join(KINDS)})")
    return sorted(set(kinds))


async def create(
    db: Db,
    url: str,
    *,
    start: Start,
    source_type: str | None = None,
    workspace_id: int | None = None,
    kinds: Sequence[str] = (),
    full_content: bool = False,
    description: str = "",
    document_kinds: Sequence[str] = (),
) -> tuple[Subscription, str]:
    """Register endpoint ``url`` following the feed from ``start``, with its filters
    (``None``/empty: any; ``kinds``: kinds of change, the feed's ``op``; ``document_kinds``:
    kinds of document, :mod:`debounce.documents.kinds`). Returns the subscription and its
    secret (``whsec_…``: shown once,
    never readable again).

    Raises:
        ValueError: a malformed ``url``, an unknown kind of change or of document.
    """
    secret = new_secret()
    row = await fetch_one(
        db,
        _Q["create"],
        {
            "url": check_url(url),
            "description": description,
            "source_type": source_type,
            "workspace_id": workspace_id,
            "kinds": check_kinds(kinds),
            "document_kinds": check_document_kinds(document_kinds),
            "full_content": full_content,
            "secret": secret,
            **start.params(),
        },
    )
    assert row is not None
    return _subscription(row), secret


async def list_subscriptions(db: Db, subscription_id: int | None = None) -> list[Subscription]:
    """Every subscription (or the one of ``subscription_id``), by id, with its lag."""
    return [_subscription(r) for r in await fetch_all(db, _Q["list"], {"id": subscription_id})]


async def get(db: Db, subscription_id: int) -> Subscription:
    """Subscription ``subscription_id`` with its lag.

    Raises:
        SubscriptionNotFound: none has this id.
    """
    found = await list_subscriptions(db, subscription_id)
    if not found:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return found[0]


async def _one(db: Db, name: str, subscription_id: int, params: dict[str, Any]) -> Subscription:
    row = await fetch_one(db, _Q[name], {"id": subscription_id, **params})
    if row is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")
    return _subscription(row)


async def remove(db: Db, subscription_id: int) -> None:
    """Remove subscription ``subscription_id`` (its deliverer stops at its next step).

    Raises:
        SubscriptionNotFound: none has this id.
    """
    if await fetch_one(db, _Q["delete"], {"id": subscription_id}) is None:
        raise SubscriptionNotFound(f"no subscription {subscription_id}")


async def rotate(
    db: Db, subscription_id: int, overlap_seconds: float, *, now: datetime | None = None
) -> tuple[Subscription, str]:
    """A new secret for subscription ``subscription_id``: deliveries are signed with both the
    new and the current secret for ``overlap_seconds`` after ``now`` (default: the database's
    clock), then with the new one only. Returns the subscription and the new secret (shown
    once).

    Raises:
        ValueError: ``overlap_seconds`` outside 0..:data:`MAX_OVERLAP_SECONDS`.
        SubscriptionNotFound: none has this id.
    """
    if not 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS:
        raise ValueError(f"overlap must be between 0 and {MAX_OVERLAP_SECONDS:.0f} seconds")
    secret = new_secret()
    sub = await _one(
        db,
        "rotate",
        subscription_id,
        {"secret": secret, "overlap_seconds": float(overlap_seconds), "now": now},
    )
    return sub, secret


async def disable(
    db: Db, subscription_id: int, reason: str = "disabled by an operator", *, now: datetime | None = None
) -> Subscription:
    """Stop delivering to ``subscription_id``; its position and batch in flight are kept.

    Raises:
        SubscriptionNotFound: none has this id.
    """
    return await _one(db, "disable", subscription_id, {"reason": reason, "now": now})


async def enable(db: Db, subscription_id: int, *, now: datetime | None = None) -> Subscription:
    """Deliver to ``subscription_id`` again from where it stopped (the batch in flight first,
    under the same ``webhook-id``), its retry schedule started over.

    Raises:
        SubscriptionNotFound: none has this id.
    """
    return await _one(db, "enable", subscription_id, {"now": now})


async def replay(db: Db, subscription_id: int, start: Start, *, now: datetime | None = None) -> Subscription:
    """Deliver to ``subscription_id`` again from ``start`` (active again; the batch in flight
    is dropped: its changes come again in new batches with new ids).

    Raises:
        SubscriptionNotFound: none has this id.
    """
    return await _one(db, "replay", subscription_id, {**start.params(), "now": now})
