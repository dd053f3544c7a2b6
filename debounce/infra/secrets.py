"""Credentials at rest: encrypted with ``DEBOUNCE_SECRET_KEY`` (``cryptography``'s Fernet).

``DEBOUNCE_SECRET_KEY`` is one Fernet key or several, comma-separated: the first encrypts,
every one decrypts (``MultiFernet``), so a key rotates by putting the new key first, running
``debounce workspaces rotate-key`` (re-encrypts every stored credential with it), and then
dropping the old one. A key is made with ``debounce workspaces new-key`` (or
``Fernet.generate_key()``). Tokens are never logged or shown: :func:`fingerprint` is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

__all__ = ["Keyring", "SecretKeyError", "fingerprint", "new_key"]


class SecretKeyError(ValueError):
    """``DEBOUNCE_SECRET_KEY`` is missing where it is needed, malformed, or does not decrypt
    what is stored (a key was dropped before ``rotate-key`` ran)."""


def new_key() -> str:
    """A fresh Fernet key (URL-safe base64 of 32 random bytes)."""
    return Fernet.generate_key().decode()


def fingerprint(token: str) -> str:
    """What is shown instead of a token: ``sha256:`` and the first 12 hex digits of its hash."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


class Keyring:
    """Encrypts and decrypts credentials (a JSON object) with the keys of
    ``DEBOUNCE_SECRET_KEY``.

    Raises (construction):
        SecretKeyError: no key, or a key that is not a Fernet key.
    """

    def __init__(self, keys: str | None) -> None:
        parts = [k.strip() for k in (keys or "").split(",") if k.strip()]
        if not parts:
            raise SecretKeyError(
                "DEBOUNCE_SECRET_KEY is not set: it encrypts workspace "
                "credentials (make one with `debounce workspaces new-key`)"
            )
        try:
            self._fernet = MultiFernet([Fernet(k.encode()) for k in parts])
        except (ValueError, TypeError):
            raise SecretKeyError(
                "DEBOUNCE_SECRET_KEY must be Fernet keys (URL-safe base64 of 32 "
                "bytes), comma-separated; make one with "
                "`debounce workspaces new-key`"
            ) from None

    def encrypt(self, credentials: dict[str, Any]) -> bytes:
        """``credentials`` as a Fernet token (bytes), encrypted with the first key."""
        return self._fernet.encrypt(json.dumps(credentials, sort_keys=True).encode())

    def decrypt(self, token: bytes) -> dict[str, Any]:
        """The credentials in ``token``.

        Raises:
            SecretKeyError: no key of the keyring decrypts it.
        """
        try:
            value = json.loads(self._fernet.decrypt(bytes(token)))
        except InvalidToken:
            raise SecretKeyError(
                "stored credentials do not decrypt with DEBOUNCE_SECRET_KEY "
                "(was the key that encrypted them removed?)"
            ) from None
        if not isinstance(value, dict):
            raise SecretKeyError("stored credentials are not a JSON object")
        return value

    def rotate(self, token: bytes) -> bytes:
        """``token`` re-encrypted with the first key (``MultiFernet.rotate``).

        Raises:
            SecretKeyError: no key of the keyring decrypts it.
        """
        try:
            return self._fernet.rotate(bytes(token))
        except InvalidToken:
            raise SecretKeyError("stored credentials do not decrypt with DEBOUNCE_SECRET_KEY") from None
