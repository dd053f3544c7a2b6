"""Workspaces: the workspaces (teams, organisations) of each source connected to this deployment.

A workspace is connected by an install flow (OAuth), by ``debounce workspaces add``, or — for
the single-workspace deployment of before — by the environment's token (each source's
``token_setting``), whose workspace row is created at start and whose id is learned from the
source on first use. Stored credentials are encrypted (:mod:`debounce.secrets`).

**Routing** (:class:`Directory`, the web process): an event names its workspace (the source's
own id of it, ``PageEvent.workspace``); it is

- accepted into that workspace when it is connected (``active`` or ``paused``: a paused
  workspace's jobs wait, nothing is lost);
- accepted into the environment's workspace while that one's id is not learned yet (so an
  existing single-workspace deployment needs no change);
- accepted with no workspace when the source has no workspace at all (no token configured:
  the jobs use whatever the source's settings give, as before workspaces existed);
- otherwise acknowledged and dropped (``unknown_workspace``, or ``revoked``): it enqueues
  nothing, and it is logged once per workspace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from debounce import registry
from debounce.budgets import budget_params
from debounce.db import Db, fetch_all, fetch_one
from debounce.secrets import Keyring, SecretKeyError, fingerprint
from debounce.sql import queries
from debounce.types import ApiBudget

__all__ = [
    "NO_KEY",
    "WRONG_KEY",
    "CredentialsUnreadable",
    "Directory",
    "Route",
    "WorkspaceNotFound",
    "ensure_env_workspace",
    "env_tokens",
    "learn_external_id",
    "list_workspaces",
    "remove",
    "revoke_by_external_id",
    "rotate_key",
    "block",
    "consume_state",
    "credentials_error",
    "credentials_to_check",
    "issue_state",
    "save",
    "set_credentials_error",
    "set_status",
    "unreadable_reason",
    "stored_count",
]

log = logging.getLogger("debounce.workspaces")
_Q = queries("workspaces")

#: Statuses in which a workspace's events are accepted.
ACCEPTING = ("active", "paused")


class WorkspaceNotFound(LookupError):
    """No workspace has this id."""


#: A workspace's ``credentials_error`` when the worker has no key at all.
NO_KEY = "the worker's DEBOUNCE_SECRET_KEY is not set: the stored token cannot be decrypted"
#: A workspace's ``credentials_error`` when no key of the worker decrypts its token.
WRONG_KEY = ("the worker's DEBOUNCE_SECRET_KEY does not decrypt the stored token (not the key "
             "it was encrypted with)")


class CredentialsUnreadable(SecretKeyError):
    """Workspace ``workspace_id`` has stored credentials this process cannot decrypt;
    ``reason`` is :data:`NO_KEY`, :data:`WRONG_KEY` or what else is wrong with them (the
    text stored as the workspace's ``credentials_error``)."""

    def __init__(self, workspace_id: int, reason: str) -> None:
        super().__init__(f"workspace {workspace_id}: {reason}")
        self.workspace_id = workspace_id
        self.reason = reason


def unreadable_reason(keyring: Keyring | None, stored: bytes) -> str | None:
    """Why ``keyring`` cannot decrypt the stored credentials ``stored`` (:data:`NO_KEY`,
    :data:`WRONG_KEY`, or the decryption's own message); ``None`` when it can."""
    if keyring is None:
        return NO_KEY
    try:
        keyring.decrypt(stored)
    except SecretKeyError as exc:
        return _reason(exc)
    return None


def _reason(exc: SecretKeyError) -> str:
    return WRONG_KEY if "do not decrypt" in str(exc) else str(exc)


@dataclass(frozen=True)
class Route:
    """Where an event goes: ``accept`` it into ``workspace_id`` (``None``: no workspace), or
    drop it for ``reason`` (``unknown_workspace``, ``revoked_workspace``)."""

    accept: bool
    workspace_id: int | None = None
    reason: str = ""


class Directory:
    """The web process's map from (source, the source's workspace id) to a workspace,
    re-read from the database at most every ``ttl`` seconds (a connected or revoked workspace
    is seen within that time by every web process)."""

    def __init__(self, db: Db, *, ttl: float = 5.0, env_tokens: Mapping[str, str] | None = None) -> None:
        self.db = db
        self.ttl = ttl
        #: Sources whose environment defines a workspace (created on the first refresh).
        self.env_tokens = dict(env_tokens or {})
        self._ensured = False
        self._sources: set[str] = set()
        self._by_id: dict[tuple[str, str], dict[str, Any]] = {}
        self._unlearned: dict[str, dict[str, Any]] = {}
        self._loaded_at = float("-inf")
        self._warned: set[tuple[str, str]] = set()

    def stale(self) -> bool:
        """Whether the copy is older than ``ttl`` (the next :meth:`refresh` re-reads it)."""
        return time.monotonic() - self._loaded_at >= self.ttl

    async def refresh(self, *, force: bool = False) -> None:
        """Re-read the workspaces if the copy is older than ``ttl`` (or ``force``)."""
        if force or self.stale():
            if not self._ensured:
                for source_type, token in self.env_tokens.items():
                    await ensure_env_workspace(self.db, source_type, token)
                self._ensured = True
            rows = [dict(r) for r in await fetch_all(self.db, _Q["routes"], {})]
            # Indexed once per refresh: an event's lookup is a dict access, however many
            # workspaces are connected.
            self._sources = {r["source_type"] for r in rows}
            self._by_id = {(r["source_type"], r["external_id"]): r for r in rows
                           if r["external_id"] is not None}
            self._unlearned = {r["source_type"]: r for r in rows
                               if r["origin"] == "env" and r["external_id"] is None}
            self._loaded_at = time.monotonic()

    def lookup(self, source_type: str, external_id: str | None,
               enterprise_id: str | None = None) -> Route:
        """The :class:`Route` of an event of ``source_type`` naming ``external_id`` (and, for an
        org-wide install, ``enterprise_id``), from the copy as it is (no I/O: the caller
        refreshes it first)."""
        if source_type not in self._sources:
            return Route(True, None)
        row = self._by_id.get((source_type, external_id)) if external_id else None
        if row is None and enterprise_id:  # an org-wide (Grid) install covers the org's teams
            row = self._by_id.get((source_type, enterprise_id))
            if row is not None and row["enterprise_id"] != enterprise_id:
                row = None
        if row is None:
            row = self._unlearned.get(source_type)
        if row is not None:
            return self._accept(row, source_type, external_id or enterprise_id or "?")
        key = (source_type, external_id or "?")
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s event for workspace %r, which is not connected: acknowledged, "
                        "nothing enqueued (logged once per workspace)", source_type,
                        external_id or "?")
        return Route(False, None, "unknown_workspace")

    def _accept(self, row: Mapping[str, Any], source_type: str, external_id: str) -> Route:
        if row["status"] in ACCEPTING:
            return Route(True, int(row["id"]))
        key = (source_type, external_id)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s event for workspace %s, which is revoked: acknowledged, nothing "
                        "enqueued (re-install to reconnect it)", source_type, external_id)
        return Route(False, int(row["id"]), "revoked_workspace")


def env_tokens(settings: Any) -> dict[str, str]:
    """``{source type: token}`` of the sources whose environment sets a token (their
    :class:`~debounce.contract.Source` ``token_setting``): each defines a workspace."""
    out: dict[str, str] = {}
    for source in registry.sources().values():
        token = source.token(settings)
        if token:
            out[source.source_type] = token
    return out


async def ensure_env_workspace(db: Db, source_type: str, token: str) -> dict[str, Any]:
    """The environment's workspace of ``source_type`` (created if missing), its fingerprint
    kept current. The token itself stays in the environment."""
    row = await fetch_one(db, _Q["ensure_env_workspace"],
                          {"source_type": source_type, "fingerprint": fingerprint(token),
                           "name": f"{source_type} (environment)"})
    assert row is not None
    return dict(row)


async def save(
    db: Db, keyring: Keyring, *, source_type: str, external_id: str, name: str,
    credentials: dict[str, Any], origin: str = "oauth", enterprise_id: str | None = None,
    bot_user_id: str | None = None,
) -> dict[str, Any]:
    """Connect a workspace (or re-connect it: reactivated, credentials replaced).
    ``credentials`` must hold ``access_token``; it is stored encrypted. Returns the row
    (without credentials) and ``inserted``."""
    row = await fetch_one(db, _Q["save_workspace"], {
        "source_type": source_type, "external_id": external_id, "enterprise_id": enterprise_id,
        "name": name, "origin": origin, "credentials": keyring.encrypt(credentials),
        "fingerprint": fingerprint(str(credentials["access_token"])), "bot_user_id": bot_user_id})
    assert row is not None
    return _public(row)


async def learn_external_id(db: Db, workspace_id: int, external_id: str, name: str,
                            bot_user_id: str | None = None) -> None:
    """Record the source's id of the environment's workspace (learned on first use)."""
    try:
        await fetch_one(db, _Q["learn_external_id"], {"id": workspace_id, "external_id": external_id,
                                                      "name": name, "bot_user_id": bot_user_id})
    except Exception as exc:  # the same workspace was also installed: keep both rows apart
        log.warning("cannot record workspace id %s of the environment's workspace: %s",
                    external_id, exc.__class__.__name__)


async def set_status(db: Db, workspace_id: int, status: str, error: str | None = None) -> dict[str, Any]:
    """Set a workspace's status (``active``, ``paused``, ``revoked``).

    Raises:
        WorkspaceNotFound: no such workspace.
        ValueError: unknown status.
    """
    if status not in ("active", "paused", "revoked"):
        raise ValueError(f"status must be active, paused or revoked, got {status!r}")
    row = await fetch_one(db, _Q["set_status"], {"id": workspace_id, "status": status, "error": error})
    if row is None:
        raise WorkspaceNotFound(workspace_id)
    return _public(row)


async def revoke_by_external_id(db: Db, source_type: str, external_id: str, error: str) -> list[int]:
    """Mark the workspace ``external_id`` of ``source_type`` revoked; returns the ids changed."""
    rows = await fetch_all(db, _Q["revoke_by_external_id"],
                           {"source_type": source_type, "external_id": external_id, "error": error})
    return [int(r["id"]) for r in rows]


async def remove(db: Db, workspace_id: int) -> int:
    """Disconnect a workspace: its pending jobs are dropped, its documents stay. Returns how
    many pending jobs were dropped.

    Raises:
        WorkspaceNotFound: no such workspace.
    """
    row = await fetch_one(db, _Q["remove_workspace"], {"id": workspace_id})
    if row is None or row["id"] is None:
        raise WorkspaceNotFound(workspace_id)
    return int(row["dropped_jobs"])


async def list_workspaces(db: Db, workspace_id: int | None = None, *,
                          budgets: Mapping[str, ApiBudget] | None = None,
                          now: datetime | None = None) -> list[dict[str, Any]]:
    """Every workspace (or one) with its figures: jobs by state, documents, last sync, last
    error, ``credentials_error`` / ``credentials_error_at`` (a worker cannot decrypt its
    stored token: why and since when; ``None``: no such problem), and ``budget``
    ``{"per_minute", "burst", "available", "source_default"}`` (requests; ``budgets``: the
    sources' default budgets, see ``debounce.budgets``; ``available`` is the bucket at ``now``,
    UTC, default the database clock). Never the credentials: ``token_fingerprint`` stands for
    the token."""
    rows = await fetch_all(db, _Q["list_workspaces"], {"id": workspace_id, "now": now,
                                                       **budget_params(budgets)})
    out = []
    for r in rows:
        row = _public(r)
        row["budget"] = {"per_minute": row.pop("budget_per_minute"),
                         "burst": row.pop("budget_burst"),
                         "available": round(row.pop("budget_available"), 2),
                         "source_default": not row.pop("budget_overridden")}
        out.append(row)
    return out


async def credentials(db: Db, keyring: Keyring | None, workspace_id: int) -> dict[str, Any] | None:
    """The decrypted credentials and state of a workspace: ``{"status", "origin",
    "external_id", "access_token" (absent for the environment's workspace), …}``; ``None`` if
    it no longer exists.

    Raises:
        CredentialsUnreadable: stored credentials and no (or the wrong) key.
    """
    row = await fetch_one(db, _Q["workspace_credentials"], {"id": workspace_id})
    if row is None:
        return None
    return credentials_of(row, keyring, workspace_id)


def credentials_of(row: Mapping[str, Any], keyring: Keyring | None,
                   workspace_id: int) -> dict[str, Any]:
    """:func:`credentials` from a row already read (``status``, ``origin``, ``external_id``,
    ``bot_user_id``, ``credentials``: the worker's claim returns them with each job).

    Raises:
        CredentialsUnreadable: stored credentials and no (or the wrong) key.
    """
    out: dict[str, Any] = {"status": row["status"], "origin": row["origin"],
                           "external_id": row["external_id"], "bot_user_id": row["bot_user_id"]}
    if row["credentials"] is not None:
        if keyring is None:
            raise CredentialsUnreadable(workspace_id, NO_KEY)
        try:
            out.update(keyring.decrypt(row["credentials"]))
        except SecretKeyError as exc:
            raise CredentialsUnreadable(workspace_id, _reason(exc)) from None
    return out


async def credentials_to_check(db: Db, *, only_flagged: bool = False) -> list[dict[str, Any]]:
    """The workspaces with stored credentials (only those with a ``credentials_error`` when
    ``only_flagged``): ``{"id", "source_type", "external_id", "name", "credentials" (the
    encrypted bytes), "credentials_error"}``, by id."""
    rows = await fetch_all(db, _Q["credentials_to_check"], {"only_flagged": only_flagged})
    return [dict(r) for r in rows]


async def set_credentials_error(db: Db, workspace_id: int, error: str | None) -> dict[str, Any] | None:
    """Record that a worker cannot decrypt the workspace's stored token (``error``: why, see
    :data:`NO_KEY`, :data:`WRONG_KEY`), or that it can (``None``: cleared). While it is set,
    the claim and the enumerations skip the workspace. Returns ``{"id", "source_type",
    "external_id", "name", "credentials_error", "credentials_error_at", "previous_error"}``,
    or ``None`` when the workspace is gone."""
    row = await fetch_one(db, _Q["set_credentials_error"],
                          {"id": workspace_id, "error": error[:500] if error else None})
    return dict(row) if row else None


async def credentials_error(db: Db, workspace_id: int) -> tuple[str, Any] | None:
    """The workspace's credentials error and since when (a ``datetime``), or ``None`` (none,
    or no such workspace)."""
    row = await fetch_one(db, _Q["credentials_error"], {"id": workspace_id})
    if row is None or row["credentials_error"] is None:
        return None
    return str(row["credentials_error"]), row["credentials_error_at"]


async def block(db: Db, workspace_id: int, seconds: float, reason: str) -> dict[str, Any] | None:
    """A source rate-limited this workspace: no worker claims its jobs for ``seconds`` (a
    later block never shortens an earlier one). Returns ``{"id", "blocked_until",
    "rate_limit_reason"}`` or ``None`` if it no longer exists."""
    row = await fetch_one(db, _Q["block_workspace"], {"id": workspace_id, "seconds": float(seconds),
                                                      "reason": reason[:200]})
    return dict(row) if row else None


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
        await fetch_all(db, _Q["replace_credentials"],
                        {"id": row["id"], "credentials": keyring.rotate(row["credentials"])})
    return len(rows)


#: Seconds an OAuth state parameter stays valid.
STATE_TTL_SECONDS = 600.0


async def issue_state(db: Db, source_type: str, *, ttl: float = STATE_TTL_SECONDS) -> str:
    """A new single-use OAuth ``state`` for an install of ``source_type`` (random, 256 bits),
    valid ``ttl`` seconds. The install flows' state store."""
    import secrets

    state = secrets.token_urlsafe(32)
    await fetch_all(db, _Q["issue_oauth_state"], {"state": state, "source_type": source_type,
                                                  "ttl": float(ttl)})
    return state


async def consume_state(db: Db, source_type: str, state: str) -> bool:
    """Use ``state`` once: ``True`` if it was issued for ``source_type`` and had not expired
    or been used (it is deleted either way)."""
    if not state or len(state) > 200:
        return False
    rows = await fetch_all(db, _Q["consume_oauth_state"], {"state": state, "source_type": source_type})
    return bool(rows)


def _public(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "credentials"}
