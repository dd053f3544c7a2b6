"""What a sync or a backfill page runs with of its workspace's credentials: the stored token
decrypted with this worker's key, once per workspace and stored value (a re-install stores
new bytes), with the workspace's state beside it. A token the key cannot decrypt marks the
workspace (:class:`~debounce.worker.key_check.CredentialMarks`) before the error is raised."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import workspaces
from debounce.infra.secrets import Keyring
from debounce.types import ClaimedWorkspace
from debounce.worker.key_check import CredentialMarks

__all__ = ["DECRYPTED_KEPT", "Decrypter"]

#: Decrypted credentials a worker keeps (one per workspace in use; cleared when full).
DECRYPTED_KEPT = 1024


class Decrypter:
    """Credentials for :class:`~debounce.contract.SyncContext` (see the module docstring).
    ``keyring``: this worker's key (``None``: ``DEBOUNCE_SECRET_KEY`` unset); ``marks``: where
    an unreadable token is marked; ``pool``: for :meth:`for_workspace`'s read."""

    def __init__(
        self, keyring: Keyring | None, marks: CredentialMarks, pool: AsyncConnectionPool[Any]
    ) -> None:
        self.keyring = keyring
        self.marks = marks
        self.pool = pool
        #: Decrypted tokens by (workspace id, the stored token's bytes).
        self._decrypted: dict[tuple[int, bytes], dict[str, Any]] = {}

    async def credentials(self, workspace: ClaimedWorkspace | None) -> Mapping[str, Any] | None:
        """What a sync of ``workspace`` (as the claim read it) runs with: ``{"status",
        "origin", "external_id", "bot_user_id", "access_token", …}`` (a fresh dict per call;
        no ``access_token`` for the environment's workspace, whose token the source's settings
        give); ``None`` for a job of no workspace. No query is made.

        Raises:
            CredentialsUnreadable: stored credentials that no key of this worker decrypts
                (the workspace is marked first).
        """
        if workspace is None:
            return None
        out: dict[str, Any] = {
            "status": workspace.status,
            "origin": workspace.origin,
            "external_id": workspace.external_id,
            "bot_user_id": workspace.bot_user_id,
        }
        if workspace.credentials is None:
            return out
        key = (workspace.id, workspace.credentials)
        token = self._decrypted.get(key)
        if token is None:
            try:
                token = workspaces.decrypt(self.keyring, workspace.credentials, workspace.id)
            except workspaces.CredentialsUnreadable as exc:
                await self.marks.unreadable(workspace.id, exc.reason)
                raise
            if len(self._decrypted) >= DECRYPTED_KEPT:
                self._decrypted.clear()
            self._decrypted[key] = token
        out.update(token)
        return out

    async def for_workspace(self, workspace_id: int) -> Mapping[str, Any] | None:
        """:meth:`credentials` of ``workspace_id``, read now (one query; a backfill's
        page); ``None`` when the workspace is gone.

        Raises:
            CredentialsUnreadable: as :meth:`credentials`.
        """
        workspace = await workspaces.sync_state(self.pool, workspace_id)
        return None if workspace is None else await self.credentials(workspace)
