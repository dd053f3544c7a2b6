"""This worker's key against the workspaces' stored tokens: a token it cannot decrypt marks
its workspace (``credentials_error``: its jobs and backfills wait, nothing is spent, said
once per workspace and reason in this process), one it decrypts clears the mark. Checked at
start (:func:`check_stored`) and every :data:`RECHECK_SECONDS` for the marked ones
(:func:`watch`): another worker, with another key, may have marked them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import workspaces
from debounce.infra.secrets import Keyring, SecretKeyError
from debounce.worker.errors import log_db_error

__all__ = ["RECHECK_SECONDS", "CredentialMarks", "check_stored", "require_key", "watch"]

log = logging.getLogger("debounce.worker")

#: How often a worker with a key re-checks the workspaces marked with a credentials error
#: (another worker, with another key, may have marked them), seconds.
RECHECK_SECONDS = 30.0


class CredentialMarks:
    """Sets and clears workspaces' ``credentials_error`` (``pool``: autocommit connections),
    saying each change once per workspace and condition in this process."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        #: What this process last said of each workspace's credentials (``None``: readable).
        self._said: dict[int, str | None] = {}

    async def unreadable(self, workspace_id: int, reason: str) -> None:
        """This worker cannot decrypt ``workspace_id``'s stored token (``reason``): mark the
        workspace (its jobs and backfills wait, nothing is spent) and say so in one line,
        once per workspace and reason in this process."""
        row = await workspaces.set_credentials_error(self.pool, workspace_id, reason)
        if row is None or self._said.get(workspace_id) == reason:
            return
        self._said[workspace_id] = reason
        log.warning(
            "workspace %d (%s %s): %s; its jobs and backfills wait, no attempt spent, "
            "until a worker with the right key starts",
            workspace_id,
            row["source_type"],
            row["external_id"] or row["name"],
            reason,
        )

    async def readable(self, workspace_id: int) -> None:
        """This worker decrypts ``workspace_id``'s stored token: clear its credentials error
        (its jobs are claimed again), saying so once."""
        row = await workspaces.set_credentials_error(self.pool, workspace_id, None)
        if (
            row is None
            or row["previous_error"] is None
            or (workspace_id in self._said and self._said[workspace_id] is None)
        ):
            return
        self._said[workspace_id] = None
        log.info(
            "workspace %d (%s %s): DEBOUNCE_SECRET_KEY decrypts its stored token; "
            "credentials error cleared, its jobs are claimed again",
            workspace_id,
            row["source_type"],
            row["external_id"] or row["name"],
        )


async def require_key(pool: AsyncConnectionPool[Any], keyring: Keyring | None) -> None:
    """A worker with no key (``keyring`` ``None``) may start only while no credentials are
    stored.

    Raises:
        SecretKeyError: credentials are stored and ``DEBOUNCE_SECRET_KEY`` is unset.
    """
    if keyring is not None:
        return
    stored = await workspaces.stored_count(pool)
    if stored:
        raise SecretKeyError(
            f"credentials of {stored} workspace(s) are stored but "
            "DEBOUNCE_SECRET_KEY is not set: set the key they were "
            "encrypted with"
        )


async def check_stored(
    pool: AsyncConnectionPool[Any],
    keyring: Keyring | None,
    marks: CredentialMarks,
    *,
    only_flagged: bool = False,
) -> None:
    """Try every stored token (``only_flagged``: those marked with a credentials error) with
    ``keyring``; mark those it cannot decrypt (unless ``only_flagged``: another worker's mark
    stays as it is) and clear the marks of those it can."""
    for row in await workspaces.credentials_to_check(pool, only_flagged=only_flagged):
        reason = workspaces.unreadable_reason(keyring, row["credentials"])
        if reason is None:
            if row["credentials_error"] is not None:
                await marks.readable(int(row["id"]))
        elif not only_flagged:
            await marks.unreadable(int(row["id"]), reason)


async def watch(
    pool: AsyncConnectionPool[Any], keyring: Keyring | None, marks: CredentialMarks, stopping: asyncio.Event
) -> None:
    """Every :data:`RECHECK_SECONDS` until ``stopping`` is set: clear the marks of the
    workspaces whose token ``keyring`` decrypts (:func:`check_stored`). A worker without a
    key has nothing to check. A database error is logged and the next round tries again."""
    if keyring is None:
        return
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=RECHECK_SECONDS)
            return
        try:
            await check_stored(pool, keyring, marks, only_flagged=True)
        except Exception as exc:
            log_db_error("re-checking the workspaces' stored tokens", exc)
