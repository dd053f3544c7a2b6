"""The worker's side of workspaces: the credentials each job syncs with, a revoked token
marking its workspace, a token this worker cannot decrypt marking its workspace
(``credentials_error``: said once per workspace and condition, the workspace parked until a
worker whose key decrypts it clears the mark), and the environment's workspace learning its
id on first use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import registry, workspaces
from debounce.config import Settings
from debounce.contract import BudgetExhausted, Meter
from debounce.secrets import Keyring
from debounce.types import SyncJob
from debounce.worker.errors import log_db_error

__all__ = ["DECRYPTED_KEPT", "RECHECK_SECONDS", "WorkspaceAccess"]

log = logging.getLogger("debounce.worker")

#: Decrypted credentials a worker keeps (one per workspace in use; cleared when full).
DECRYPTED_KEPT = 1024
#: How often a worker with a key re-checks the workspaces marked with a credentials error
#: (another worker, with another key, may have marked them), seconds.
RECHECK_SECONDS = 30.0


class WorkspaceAccess:
    """Credentials per job, revocation, and learning (see the module docstring).

    Raises (construction):
        SecretKeyError: ``settings.secret_key`` is malformed.
    """

    def __init__(self, settings: Settings, pool: AsyncConnectionPool[Any]) -> None:
        self.settings = settings
        self.pool = pool
        self.keyring = Keyring(settings.secret_key) if settings.secret_key else None
        self._learned: set[int] = set()
        #: Decrypted credentials by (workspace id, the stored token's bytes): a token is
        #: decrypted once per value, not once per job (a re-install stores new bytes).
        self._decrypted: dict[tuple[int, bytes], dict[str, Any]] = {}
        #: What this process last said of each workspace's credentials (``None``: readable).
        self._said: dict[int, str | None] = {}

    async def prepare(self) -> None:
        """At start: the environment's workspaces exist; stored credentials have a key, and
        each stored token is tried with it: one this key cannot decrypt marks its workspace
        (:meth:`unreadable`), one it decrypts clears an earlier mark (:meth:`readable`).

        Raises:
            SecretKeyError: credentials are stored and ``DEBOUNCE_SECRET_KEY`` is unset.
        """
        for source_type, token in workspaces.env_tokens(self.settings).items():
            await workspaces.ensure_env_workspace(self.pool, source_type, token)
        if self.keyring is None:
            stored = await workspaces.stored_count(self.pool)
            if stored:
                from debounce.secrets import SecretKeyError

                raise SecretKeyError(f"credentials of {stored} workspace(s) are stored but "
                                     "DEBOUNCE_SECRET_KEY is not set: set the key they were "
                                     "encrypted with")
        await self.check_stored()

    async def check_stored(self, *, only_flagged: bool = False) -> None:
        """Try every stored token (``only_flagged``: those marked with a credentials error)
        with this worker's key; mark those it cannot decrypt (unless ``only_flagged``: another
        worker's mark stays as it is) and clear the marks of those it can."""
        for row in await workspaces.credentials_to_check(self.pool, only_flagged=only_flagged):
            reason = workspaces.unreadable_reason(self.keyring, row["credentials"])
            if reason is None:
                if row["credentials_error"] is not None:
                    await self.readable(int(row["id"]))
            elif not only_flagged:
                await self.unreadable(int(row["id"]), reason)

    async def watch(self, stopping: asyncio.Event) -> None:
        """Every :data:`RECHECK_SECONDS` until ``stopping`` is set: clear the marks of the
        workspaces whose token this worker's key decrypts (:meth:`check_stored`). A worker
        without a key has nothing to check."""
        if self.keyring is None:
            return
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=RECHECK_SECONDS)
                return
            try:
                await self.check_stored(only_flagged=True)
            except Exception as exc:
                log_db_error("re-checking the workspaces' stored tokens", exc)

    async def unreadable(self, workspace_id: int, reason: str) -> None:
        """This worker cannot decrypt ``workspace_id``'s stored token (``reason``): mark the
        workspace (its jobs and enumerations wait, nothing is spent) and say so in one line,
        once per workspace and reason in this process."""
        row = await workspaces.set_credentials_error(self.pool, workspace_id, reason)
        if row is None or self._said.get(workspace_id) == reason:
            return
        self._said[workspace_id] = reason
        log.warning("workspace %d (%s %s): %s; its jobs and backfills wait, no attempt spent, "
                    "until a worker with the right key starts",
                    workspace_id, row["source_type"], row["external_id"] or row["name"], reason)

    async def readable(self, workspace_id: int) -> None:
        """This worker decrypts ``workspace_id``'s stored token: clear its credentials error
        (its jobs are claimed again), saying so once."""
        row = await workspaces.set_credentials_error(self.pool, workspace_id, None)
        if row is None or row["previous_error"] is None or (
                workspace_id in self._said and self._said[workspace_id] is None):
            return
        self._said[workspace_id] = None
        log.info("workspace %d (%s %s): DEBOUNCE_SECRET_KEY decrypts its stored token; "
                 "credentials error cleared, its jobs are claimed again", workspace_id,
                 row["source_type"], row["external_id"] or row["name"])

    async def credentials(self, job: SyncJob,
                          claimed: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
        """What ``job`` syncs with: its workspace's decrypted credentials (``None``: no
        workspace, or the environment's: the source's settings give the token). ``claimed``:
        the workspace's row as the claim returned it (``queue.claim_with_workspaces``): then
        no query is made, and a token is decrypted once per workspace and stored value.

        Raises:
            CredentialsUnreadable: stored credentials that no key of this worker decrypts.
        """
        if job.workspace_id is None:
            return None
        if claimed is None:
            return await self.for_workspace(job.workspace_id)
        token = claimed["credentials"]
        if token is None:
            return workspaces.credentials_of(claimed, self.keyring, job.workspace_id)
        key = (job.workspace_id, bytes(token))
        cached = self._decrypted.get(key)
        if cached is not None:
            return {**cached, "status": claimed["status"], "origin": claimed["origin"],
                    "external_id": claimed["external_id"],
                    "bot_user_id": claimed["bot_user_id"]}
        try:
            out = workspaces.credentials_of(claimed, self.keyring, job.workspace_id)
        except workspaces.CredentialsUnreadable as exc:
            await self.unreadable(job.workspace_id, exc.reason)
            raise
        if len(self._decrypted) >= DECRYPTED_KEPT:
            self._decrypted.clear()
        self._decrypted[key] = out
        return dict(out)

    async def for_workspace(self, workspace_id: int) -> Mapping[str, Any] | None:
        """The decrypted credentials of ``workspace_id`` (``None``: the environment's, or
        gone). Stored credentials this worker cannot decrypt mark the workspace
        (:meth:`unreadable`) before the error is raised.

        Raises:
            CredentialsUnreadable: stored credentials that no key of this worker decrypts.
        """
        try:
            return await workspaces.credentials(self.pool, self.keyring, workspace_id)
        except workspaces.CredentialsUnreadable as exc:
            await self.unreadable(workspace_id, exc.reason)
            raise

    async def block(self, workspace_id: int, seconds: float, reason: str) -> bool:
        """The source rate-limited ``workspace_id``: block it for every worker for
        ``seconds``. Returns ``False`` when that failed (the database is away: then only the
        job or enumeration at hand waits)."""
        try:
            blocked = await workspaces.block(self.pool, workspace_id, seconds, reason)
        except Exception as exc:
            log.warning("could not block workspace %d (%s)", workspace_id,
                        exc.__class__.__name__)
            return False
        return blocked is not None

    async def revoke_workspace(self, workspace_id: int, error: str) -> bool:
        """The token of ``workspace_id`` no longer works: mark it revoked (its jobs wait until
        a re-install). Returns ``False`` when the workspace is gone."""
        try:
            await workspaces.set_status(self.pool, workspace_id, "revoked", error[:500])
        except workspaces.WorkspaceNotFound:
            return False
        log.error("workspace %d revoked: %s; its jobs wait until it is re-installed",
                  workspace_id, error)
        return True

    async def revoked(self, job: SyncJob, error: str) -> bool:
        """The token of ``job``'s workspace no longer works (:meth:`revoke_workspace`).
        Returns ``False`` when the job has no workspace."""
        if job.workspace_id is None:
            return False
        return await self.revoke_workspace(job.workspace_id, error)

    async def rate_limited(self, job: SyncJob, seconds: float, reason: str) -> bool:
        """The source rate-limited ``job``'s workspace (:meth:`block`). Returns ``False``
        when the job has no workspace or the block could not be stored."""
        if job.workspace_id is None:
            return False
        return await self.block(job.workspace_id, seconds, reason)

    async def learn(self, job: SyncJob, credentials: Mapping[str, Any] | None,
                    meter: Meter | None = None) -> None:
        """After a sync of the environment's workspace whose id is not known yet: ask the
        source who the token is (``users.me``, ``auth.test``) and record it. Best effort. The
        request is charged to ``meter`` (the workspace's budget) first; with none left, it is
        asked after a later sync."""
        if (job.workspace_id is None or job.workspace_id in self._learned or credentials is None
                or credentials.get("origin") != "env" or credentials.get("external_id")):
            return
        self._learned.add(job.workspace_id)
        source = registry.sources().get(job.source_type)
        token = source.token(self.settings) if source else None
        if source is None or source.identify is None or not token:
            return
        try:
            if meter is not None:
                await meter.take()
            identity = await source.identify(source.configure(self.settings), str(token))
        except BudgetExhausted:
            self._learned.discard(job.workspace_id)   # ask again after a later sync
            return
        except Exception as exc:
            log.warning("could not learn the id of the environment's %s workspace (%s)",
                        job.source_type, exc.__class__.__name__)
            return
        if identity.external_id:
            await workspaces.learn_external_id(self.pool, job.workspace_id, identity.external_id,
                                               identity.name, identity.bot_user_id)
            log.info("the environment's %s workspace is %s (%s)", job.source_type,
                     identity.external_id, identity.name)
