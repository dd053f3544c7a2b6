"""Workspaces' stored tokens (their credentials, encrypted with ``DEBOUNCE_SECRET_KEY``):
read for a sync, checked against a worker's key, the ``credentials_error`` mark (a worker
cannot decrypt the token: the claim and the backfills skip the workspace while it is set),
counted, and re-encrypted with a new key. Decryption itself is
:mod:`debounce.workspaces.decryption`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from debounce.infra.db import Db, fetch_all, fetch_one
from debounce.infra.secrets import Keyring
from debounce.infra.sql import queries
from debounce.types import ClaimedWorkspace

__all__ = [
    "credentials_error",
    "credentials_to_check",
    "rotate_key",
    "set_credentials_error",
    "stored_count",
    "sync_state",
]

_Q = queries("workspaces")


async def sync_state(db: Db, workspace_id: int) -> ClaimedWorkspace | None:
    """What a sync or a backfill page needs of workspace ``workspace_id`` (its state and the still
    encrypted token), as the claim reads it for a job; ``None`` if it no longer exists."""
    row = await fetch_one(db, _Q["workspace_credentials"], {"id": workspace_id})
    return None if row is None else ClaimedWorkspace.from_row(row)


async def credentials_to_check(db: Db, *, only_flagged: bool = False) -> list[dict[str, Any]]:
    """The workspaces with stored credentials (only those with a ``credentials_error`` when
    ``only_flagged``): ``{"id", "source_type", "external_id", "name", "credentials" (the
    encrypted bytes), "credentials_error"}``, by id."""
    rows = await fetch_all(db, _Q["credentials_to_check"], {"only_flagged": only_flagged})
    return [dict(r) for r in rows]


async def set_credentials_error(db: Db, workspace_id: int, error: str | None) -> dict[str, Any] | None:
    """Record that a worker cannot decrypt the workspace's stored token (``error``: why, see
    :data:`~debounce.workspaces.decryption.NO_KEY`,
    :data:`~debounce.workspaces.decryption.WRONG_KEY`; at most 500 characters are kept), or
    that it can (``None``: cleared). While it is set, the claim and the backfills skip the
    workspace. Returns ``{"id", "source_type", "external_id", "name", "credentials_error",
    "credentials_error_at", "previous_error"}``, or ``None`` when the workspace is gone."""
    row = await fetch_one(
        db, _Q["set_credentials_error"], {"id": workspace_id, "error": error[:500] if error else None}
    )
    return dict(row) if row else None


async def credentials_error(db: Db, workspace_id: int) -> tuple[str, datetime] | None:
    """The workspace's credentials error and since when (a ``datetime``, UTC), or ``None``
    (none, or no such workspace)."""
    row = await fetch_one(db, _Q["credentials_error"], {"id": workspace_id})
    if row is None or row["credentials_error"] is None:
        return None
    return str(row["credentials_error"]), row["credentials_error_at"]


async def stored_count(db: Db) -> int:
    """How many workspaces have stored (encrypted) credentials."""
    row = await fetch_one(db, _Q["stored_count"], {})
    return int(row["n"]) if row else 0


async def rotate_key(db: Db, keyring: Keyring) -> int:
    """Re-encrypt every stored credential with the keyring's first key; returns how many.

    Raises:
        SecretKeyError: a credential no key decrypts.
    """
    rows = await fetch_all(db, _Q["stored_credentials"], {})
    for row in rows:
        await fetch_all(
            db,
            _Q["replace_credentials"],
            {"id": row["id"], "credentials": keyring.rotate(row["credentials"])},
        )
    return len(rows)
