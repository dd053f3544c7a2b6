"""Routing an event to its workspace (the web process): :class:`Directory`, the web's
cached map from (source, the source's id of a workspace) to a workspace row.

An event names its workspace (the source's own id of it, ``PageEvent.workspace``); it is

- accepted into that workspace when it is connected (``active`` or ``paused``: a paused
  workspace's jobs wait, nothing is lost);
- accepted into the environment's workspace while that one's id is not learned yet (so an
  existing single-workspace deployment needs no change);
- accepted with no workspace when the source has no workspace at all (no token configured:
  the jobs use whatever the source's settings give, as before workspaces existed);
- otherwise acknowledged and dropped (``unknown_workspace``: not connected, or removed — a
  source whose every workspace was removed still has workspaces, so its events are not
  accepted with no workspace; or ``revoked``): it enqueues nothing, and it is logged once per
  workspace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from debounce.infra.db import Db, fetch_all
from debounce.infra.sql import queries
from debounce.workspaces.environment import ensure_env_workspace

__all__ = ["ACCEPTING", "Directory", "Route"]

log = logging.getLogger("debounce.workspaces")
_Q = queries("workspaces")

#: Statuses in which a workspace's events are accepted.
ACCEPTING = ("active", "paused")


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
            self._by_id = {
                (r["source_type"], r["external_id"]): r for r in rows if r["external_id"] is not None
            }
            self._unlearned = {
                r["source_type"]: r for r in rows if r["origin"] == "env" and r["external_id"] is None
            }
            self._loaded_at = time.monotonic()

    def lookup(self, source_type: str, external_id: str | None, enterprise_id: str | None = None) -> Route:
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
        return self._unknown(source_type, external_id or "?")

    def _unknown(self, source_type: str, external_id: str) -> Route:
        key = (source_type, external_id)
        if key not in self._warned:
            self._warned.add(key)
            log.warning(
                "%s event for workspace %r, which is not connected: acknowledged, "
                "nothing enqueued (logged once per workspace)",
                source_type,
                external_id,
            )
        return Route(False, None, "unknown_workspace")

    def _accept(self, row: Mapping[str, Any], source_type: str, external_id: str) -> Route:
        if row["status"] in ACCEPTING:
            return Route(True, int(row["id"]))
        if row["status"] == "removed":
            return self._unknown(source_type, external_id)
        key = (source_type, external_id)
        if key not in self._warned:
            self._warned.add(key)
            log.warning(
                "%s event for workspace %s, which is revoked: acknowledged, nothing "
                "enqueued (re-install to reconnect it)",
                source_type,
                external_id,
            )
        return Route(False, int(row["id"]), "revoked_workspace")
