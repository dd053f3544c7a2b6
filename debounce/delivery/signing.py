"""Secrets and signatures of push delivery, per Standard Webhooks 1.0
(https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
a secret is ``whsec_`` + the base64 of 24–64 random bytes (here 32), one per subscription;
``webhook-signature`` is ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, several
separated by spaces while a rotated secret's overlap lasts. Signed by the ``standardwebhooks``
package (MIT), the one receivers verify with."""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook

__all__ = ["PREFIX", "headers", "new_message_id", "new_secret"]

#: The prefix of a Standard Webhooks secret.
PREFIX = "whsec_"
#: Random bytes of a new secret (the spec allows 24 to 64).
SECRET_BYTES = 32


def new_secret() -> str:
    """A new secret: ``whsec_`` + base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_message_id() -> str:
    """A new ``webhook-id`` (``msg_`` + 32 hex digits): one per batch, the same on every
    retry of it (the receiver's idempotency key)."""
    return f"msg_{uuid.uuid4().hex}"


def headers(secrets_: Sequence[str], message_id: str, body: str, at: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: ``webhook-id`` ``message_id``,
    ``webhook-timestamp`` ``at`` (UTC, whole seconds), ``webhook-signature`` one ``v1,…`` per
    secret of ``secrets_`` (the current first), and ``content-type: application/json``.

    Raises:
        ValueError: ``secrets_`` is empty.
    """
    if not secrets_:
        raise ValueError("a delivery needs at least one secret")
    at = at.astimezone(UTC)
    signatures = " ".join(Webhook(s).sign(message_id, at, body) for s in secrets_)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signatures,
        "content-type": "application/json",
    }
