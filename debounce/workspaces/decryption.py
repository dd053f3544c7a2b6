"""What a workspace's stored token decrypts to with a process's key, and why it does not
(no I/O). The text of why is what a worker stores as the workspace's ``credentials_error``
(:mod:`debounce.workspaces.tokens`)."""

from __future__ import annotations

from typing import Any

from debounce.infra.secrets import Keyring, SecretKeyError

__all__ = ["NO_KEY", "WRONG_KEY", "CredentialsUnreadable", "decrypt", "unreadable_reason"]

#: A workspace's ``credentials_error`` when the worker has no key at all.
NO_KEY = "the worker's DEBOUNCE_SECRET_KEY is not set: the stored token cannot be decrypted"
#: A workspace's ``credentials_error`` when no key of the worker decrypts its token.
WRONG_KEY = (
    "the worker's DEBOUNCE_SECRET_KEY does not decrypt the stored token (not the key it was encrypted with)"
)


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
    try:
        decrypt(keyring, stored, 0)
    except CredentialsUnreadable as exc:
        return exc.reason
    return None


def decrypt(keyring: Keyring | None, stored: bytes, workspace_id: int) -> dict[str, Any]:
    """The JSON object ``stored`` (workspace ``workspace_id``'s Fernet token) decrypts to with
    ``keyring``: ``{"access_token", …}`` as the install flow or the CLI saved it.

    Raises:
        CredentialsUnreadable: no key (``keyring`` is ``None``), or no key of it decrypts.
    """
    if keyring is None:
        raise CredentialsUnreadable(workspace_id, NO_KEY)
    try:
        return keyring.decrypt(stored)
    except SecretKeyError as exc:
        raise CredentialsUnreadable(workspace_id, _reason(exc)) from None


def _reason(exc: SecretKeyError) -> str:
    return WRONG_KEY if "do not decrypt" in str(exc) else str(exc)
