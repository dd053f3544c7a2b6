"""The worker's side of workspaces: the credentials each job syncs with, a revoked token
marking its workspace, and the environment's workspace learning its id on first use."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

import integrations
from debounce import workspaces
from debounce.config import Settings
from debounce.secrets import Keyring
from debounce.types import SyncJob
from integrations.metering import BudgetExhausted, Meter

__all__ = ["WorkspaceAccess"]

log = logging.getLogger("debounce.worker")


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

    async def prepare(self) -> None:
        """At start: the environment's workspaces exist; stored credentials have a key.

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

    async def credentials(self, job: SyncJob) -> Mapping[str, Any] | None:
        """What ``job`` syncs with: its workspace's decrypted credentials (``None``: no
        workspace, or the environment's: the source's settings give the token).

        Raises:
            SecretKeyError: stored credentials that no key decrypts.
        """
        if job.workspace_id is None:
            return None
        return await self.for_workspace(job.workspace_id)

    async def for_workspace(self, workspace_id: int) -> Mapping[str, Any] | None:
        """The decrypted credentials of ``workspace_id`` (``None``: the environment's, or
        gone).

        Raises:
            SecretKeyError: stored credentials that no key decrypts.
        """
        return await workspaces.credentials(self.pool, self.keyring, workspace_id)

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
        source = integrations.sources().get(job.source_type)
        token = getattr(self.settings, source.token_setting) if source and source.token_setting else None
        if source is None or source.identify is None or not token:
            return
        try:
            if meter is not None:
                await meter.take()
            identity = await source.identify(self.settings, str(token))
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
