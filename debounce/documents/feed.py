"""The change feed: every write to ``documents`` a consumer can see, in an order that is
gap-free under concurrent commits (migration 013; the contract is docs/consumers.md).

A change's position is ``(feed_xid, seq)``: the writing transaction's ``pg_current_xact_id()``
(raised to the document's previous position when that is higher) and a sequence number. A read
serves only positions below the ``xmin`` of a snapshot (``pg_snapshot_xmin(
pg_current_snapshot())``, PostgreSQL manual, "Transaction ID and Snapshot Information
Functions"): every transaction that could still append below it has ended, so once a reader
has passed a position nothing appears behind it. A long-running transaction anywhere in the
cluster holds ``xmin`` back and delays readers (:func:`lag`).

A :class:`Cursor` is ``(epoch, feed_xid, seq)`` written as opaque text: the epoch is the
database cluster's system identifier (``pg_control_system()``), so a cursor of another cluster
(a logical restore, another database) is refused, as is one below the retention frontier
(pruned) or past the current transaction id (a point-in-time restore): :class:`CursorGone`,
which carries the head to follow from after re-reading the documents.

**Reads write nothing**, so a hot standby serves them (PostgreSQL manual, "Hot Standby"): a
standby's snapshot counts the primary's running transactions as running, so the ``xmin`` rule
holds there too, and a physical standby has the primary's system identifier, so one cursor is
valid on every server of the cluster. A cursor past a *standby's* ``xmax`` comes from a more
advanced server (the primary, or a replica further ahead): that is replay lag, and the read
answers no changes and the same cursor (:attr:`FeedPage.behind`) — unless the primary, when the
caller gives it, has not reached that transaction either: then it is a point-in-time restore
(``future``). On a primary a cursor past ``xmax`` is always ``future``. The epoch check that
writes (:func:`reset_epoch`, after a logical restore) runs where writing is allowed: ``debounce
migrate`` and the prune; until then a read serves nothing.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.sql import queries
from debounce.queue import PRUNE_LOCK_ID

__all__ = [
    "MAX_LIMIT",
    "MAX_SEQ",
    "PARTITIONS_PER_RETENTION",
    "Change",
    "Cursor",
    "CursorError",
    "CursorGone",
    "FeedPage",
    "Pruned",
    "frontier",
    "head",
    "lag",
    "prune_changes",
    "read_changes",
    "replica_lag",
    "reset_epoch",
]

_Q = queries("feed")

#: Largest ``limit`` of one read.
MAX_LIMIT = 1000
#: Largest sequence number (bigint): a head cursor ``(xmin - 1, MAX_SEQ)`` is past every change
#: of the transactions below ``xmin``.
MAX_SEQ = 2**63 - 1
#: Rows examined per statement when filters exclude changes (bounds one read's work).
_SCAN = 1000
_CURSOR_TEXT = re.compile(r"([0-9]{1,20})\.([0-9]{1,20})\.([0-9]{1,19})")


class CursorError(ValueError):
    """A cursor that is not one this service wrote (malformed)."""


@dataclass(frozen=True, order=True)
class Cursor:
    """A position in the feed: after ``(xid, seq)`` of cluster ``epoch`` (its system
    identifier, decimal). :meth:`encode` gives the opaque text consumers keep."""

    epoch: str
    xid: int
    seq: int

    def encode(self) -> str:
        """The opaque, URL-safe text of this cursor."""
        raw = f"{self.epoch}.{self.xid}.{self.seq}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor ``text`` encodes.

        Raises:
            CursorError: ``text`` is not a cursor written by :meth:`encode`.
        """
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        except (binascii.Error, ValueError):
            raise CursorError(f"malformed cursor {text[:80]!r}") from None
        match = _CURSOR_TEXT.fullmatch(raw)
        if match is None or int(match.group(3)) > MAX_SEQ:
            raise CursorError(f"malformed cursor {text[:80]!r}")
        return cls(match.group(1), int(match.group(2)), int(match.group(3)))

    def position(self) -> tuple[int, int]:
        """``(xid, seq)``."""
        return self.xid, self.seq


class CursorGone(Exception):
    """The cursor cannot be followed: ``reason`` is ``epoch`` (another database cluster, or
    a logical restore), ``pruned`` (below the retention frontier) or ``future`` (past this
    database's transaction ids: a point-in-time restore). ``head`` is where to follow from
    after re-reading the documents."""

    def __init__(self, reason: str, head: Cursor) -> None:
        super().__init__(reason)
        self.reason = reason
        self.head = head

    def explain(self) -> str:
        """One sentence for the consumer: why, and what to do."""
        why = {
            "epoch": "the cursor belongs to another database (or one restored from a dump)",
            "pruned": "changes after the cursor were pruned (DEBOUNCE_CHANGE_RETENTION_SECONDS)",
            "future": "the cursor is past this database's transactions (a point-in-time restore)",
        }[self.reason]
        return (
            f"{why}: re-read the documents (GET /documents), then follow the feed from the cursor given here"
        )


@dataclass(frozen=True)
class Change:
    """One change: ``op`` is ``upsert`` or ``delete`` (the document is a tombstone, or its row
    was deleted); ``updated_at`` is UTC; ``content_sha256`` the hex SHA-256 of the content
    written (the last content of a deleted document); ``sections`` which section ids the
    change ``added``, ``changed`` and ``removed`` (migration 027; ``None``: unknown — a row
    deleted outright, or written before sections existed); ``kind`` the document's kind
    (``document_kind``, migration 029: :mod:`debounce.documents.kinds`), not the change's
    (that is ``op``)."""

    cursor: Cursor
    source: str
    workspace_id: int | None
    document_id: str
    source_page_id: str
    op: str
    updated_at: datetime
    content_sha256: str
    sections: dict[str, list[str]] | None = None
    kind: str = "page"

    def to_json(self) -> dict[str, Any]:
        """The change as the feed's JSON object (docs/consumers.md)."""
        return {
            "cursor": self.cursor.encode(),
            "source": self.source,
            "workspace_id": self.workspace_id,
            "document_id": self.document_id,
            "kind": self.kind,
            "source_page_id": self.source_page_id,
            "op": self.op,
            "updated_at": self.updated_at.isoformat(),
            "content_sha256": self.content_sha256,
            "sections": self.sections,
        }


@dataclass(frozen=True)
class FeedPage:
    """One read: ``changes`` in feed order, ``next`` the cursor to read after them (past
    every change examined, matched or not: the cursor read after when there was none),
    ``at_head`` whether the read reached the servable head, ``pending`` whether committed
    changes wait behind an open transaction, ``behind`` whether the server cannot serve the cursor
    yet — a standby has not replayed its transaction, or the log awaits :func:`reset_epoch`
    (the page is empty and ``next`` the cursor given),
    ``standby`` whether a standby answered, and ``replica_lag`` its replay lag in seconds (0 on
    a primary)."""

    changes: list[Change]
    next: Cursor
    at_head: bool
    pending: bool
    behind: bool = False
    standby: bool = False
    replica_lag: float = 0.0


@dataclass(frozen=True)
class _State:
    epoch: str
    current: bool
    pruned: tuple[int, int]
    xmin: int
    xmax: int
    standby: bool
    replica_lag: float

    @property
    def head(self) -> Cursor:
        return Cursor(self.epoch, max(self.xmin - 1, 0), MAX_SEQ)


async def _state(db: Db) -> _State:
    row = await fetch_one(db, _Q["state"], {})
    assert row is not None
    return _State(
        row["epoch"],
        bool(row["epoch_current"]),
        (int(row["pruned_xid"]), int(row["pruned_seq"])),
        int(row["xmin"]),
        int(row["xmax"]),
        bool(row["standby"]),
        float(row["replica_lag_seconds"]),
    )


async def _behind(after: Cursor, state: _State, primary: Db | None) -> bool:
    """Whether ``after`` (past this server's ``xmax``) is replay lag rather than a restore."""
    if not state.standby:
        return False
    if primary is None:
        return True
    row = await fetch_one(primary, _Q["primary_xmax"], {})
    return row is not None and after.xid < int(row["xmax"])


async def _check(after: Cursor, state: _State, primary: Db | None) -> bool:
    """Raises :class:`CursorGone` when ``after`` cannot be followed here; ``True`` when this
    server has not replayed its transaction yet (a standby behind the cursor's server)."""
    if after.epoch != state.epoch:
        raise CursorGone("epoch", state.head)
    if after.position() < state.pruned:
        raise CursorGone("pruned", state.head)
    if after.xid >= state.xmax:
        if await _behind(after, state, primary):
            return True
        raise CursorGone("future", state.head)
    return False


async def head(db: Db) -> Cursor:
    """The cursor past every change servable now (a consumer that has just read the documents
    follows from here; take it *before* reading them)."""
    return (await _state(db)).head


async def read_changes(
    db: Db,
    after: Cursor | None,
    limit: int,
    *,
    source_type: str | None = None,
    workspace_id: int | None = None,
    document_kind: str | None = None,
    primary: Db | None = None,
) -> FeedPage:
    """Up to ``limit`` changes after ``after`` (``None``: from the oldest retained) that match
    the filters (``None``: any; ``document_kind`` a kind of document,
    :mod:`debounce.documents.kinds`), gap-free (see the module docstring), writing nothing (``db``
    may be a hot standby). Changes the filters exclude are skipped without being returned:
    ``next`` moves past them (at most a few thousand examined per call; a page may then be
    empty and not at the head). ``primary``: the primary, when ``db`` may be a standby — a
    cursor past the standby's transactions is asked about there (lag, or a restore); without
    it such a cursor is taken for lag.

    Raises:
        ValueError: ``limit`` outside 1..:data:`MAX_LIMIT`.
        CursorGone: ``after`` is of another epoch, below the retention frontier or past the
            database's transaction ids.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}")
    state = await _state(db)
    extra: dict[str, Any] = {"standby": state.standby, "replica_lag": state.replica_lag}
    if after is not None and await _check(after, state, primary):
        return FeedPage([], after, True, False, behind=True, **extra)
    if not state.current:
        # The log was copied from another cluster (a logical restore) and reset_epoch has not
        # run yet: nothing in it is ours to serve (a cursor of that cluster was refused above
        # by its epoch); the follower looks again soon.
        return FeedPage([], after or state.head, True, True, behind=True, **extra)
    position = after.position() if after is not None else state.pruned
    filtered = source_type is not None or workspace_id is not None or document_kind is not None
    scan = max(limit, _SCAN) if filtered else limit
    changes: list[Change] = []
    for _ in range(4 if filtered else 1):
        rows = await fetch_all(
            db,
            _Q["changes"],
            {
                "after_xid": str(position[0]),
                "after_seq": position[1],
                "below": str(state.xmin),
                "limit": scan,
                "source_type": source_type,
                "workspace_id": workspace_id,
            },
        )
        frontier = (int(rows[0]["pruned_xid"]), int(rows[0]["pruned_seq"]))
        if position < frontier:
            if after is not None or changes:  # pruned past the cursor while this read went on
                raise CursorGone("pruned", state.head)
            position = frontier  # no cursor: start at the new oldest change
        rows = [r for r in rows if r["feed_xid"] is not None]
        for row in rows:
            position = (int(row["feed_xid"]), int(row["seq"]))
            if row["matches"] and (document_kind is None or row["kind"] == document_kind):
                changes.append(_change(state.epoch, row))
                if len(changes) == limit:
                    break
        if len(changes) == limit or len(rows) < scan:
            break
    at_head = len(changes) < limit and len(rows) < scan
    pending = False
    if at_head:
        summary = await fetch_one(db, _Q["pending"], {})
        pending = bool(summary and summary["pending"])
    return FeedPage(changes, Cursor(state.epoch, *position), at_head, pending, **extra)


def _change(epoch: str, row: Any) -> Change:
    return Change(
        Cursor(epoch, int(row["feed_xid"]), int(row["seq"])),
        row["source_type"],
        row["workspace_id"],
        row["document_id"],
        row["source_page_id"],
        row["op"],
        row["updated_at"],
        row["content_sha256"],
        row.get("sections"),
        row.get("kind") or "page",
    )


async def replica_lag(db: Db) -> float:
    """Seconds ``db``, a hot standby, lags its primary's commits: 0 when it has replayed
    everything it received, and on a primary."""
    return (await _state(db)).replica_lag


async def frontier(db: Db) -> tuple[bool, str | None]:
    """``(standby, position)``: whether ``db`` is a standby, and the newest servable change's
    position as text (``None``: none). It moves exactly when a change becomes servable: what
    a process polls while followers wait (:mod:`debounce.documents.feed_listen`)."""
    row = await fetch_one(db, _Q["frontier"], {})
    assert row is not None
    return bool(row["standby"]), row["position"]


async def reset_epoch(db: Db) -> int | None:
    """After a logical restore into another cluster, empty the change log copied from there
    and reset the retention frontier (cursors of the old cluster answer 410 ``epoch``);
    ``None`` when the log is this cluster's already. Writes: run on the primary (``debounce
    migrate`` and the prune do). Returns the changes removed."""
    row = await fetch_one(db, _Q["reset_epoch"], {})
    return int(row["purged"]) if row is not None else None


async def lag(db: Db) -> float:
    """Seconds the servable head lags the newest written change: the age of the oldest
    change committed but not servable yet (an older transaction is still open), 0 when
    none. Counts at most 1000 such changes."""
    row = await fetch_one(db, _Q["pending"], {})
    return float(row["lag_seconds"]) if row else 0.0


@dataclass(frozen=True)
class Pruned:
    """One prune of the change log (a partition drop, migration 028): ``changes`` and
    ``partitions`` dropped, partitions ``added`` ahead, and the rows the DEFAULT partition held
    (``overflow``: a burst that outran the partitions made ahead; 0 in a normal run)."""

    changes: int
    partitions: int
    added: int
    overflow: int


#: A partition of the change log holds about this share of the retention's writes: a change
#: stays at most about that much longer than the retention.
PARTITIONS_PER_RETENTION = 8


async def prune_changes(
    db: Db,
    older_than: float,
    *,
    exclusive: bool = False,
    now: datetime | None = None,
) -> Pruned | None:
    """Retention of the change log, by whole partitions (migration 028): create partitions
    ahead (each sized to hold ``older_than / PARTITIONS_PER_RETENTION`` seconds of writes at
    the rate transaction ids were used lately), then drop the oldest ones that are closed (no
    running transaction can write in their range) and hold only changes written more than
    ``older_than`` seconds before ``now`` (default: the database's clock), moving the
    retention frontier to the last change dropped (cursors below it answer
    :class:`CursorGone`). A change is kept at least ``older_than`` seconds, and about a
    partition's span longer at most. With ``exclusive``, ``None`` when another session holds
    the prune lock.

    Raises:
        ValueError: ``older_than`` negative.
        psycopg.errors.LockNotAvailable: a partition's DDL waited 1 s for a lock on the log
            (a long transaction reading it): the next prune tries again.
    """
    if older_than < 0:
        raise ValueError("older_than must be non-negative seconds")
    await reset_epoch(db)
    row = await fetch_one(
        db,
        _Q["prune"],
        {
            "older_than": float(older_than),
            "span": float(older_than) / PARTITIONS_PER_RETENTION,
            "exclusive": exclusive,
            "lock_id": PRUNE_LOCK_ID,
            "now": now,
        },
    )
    assert row is not None
    if not row["ran"]:
        return None
    await fetch_one(db, _Q["bury_graves"], {})
    return Pruned(int(row["changes"]), int(row["dropped"]), int(row["added"]), int(row["overflow"]))


async def has_changes_of_workspace(db: Db, workspace_id: int) -> bool:
    """Whether the change feed holds a change of workspace ``workspace_id`` (a removed
    workspace's changes stay, with its id)."""
    row = await fetch_one(db, _Q["workspace_in_feed"], {"workspace_id": workspace_id})
    return bool(row and row["found"])
