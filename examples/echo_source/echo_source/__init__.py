"""``echo``: the smallest useful debounce source, for docs/writing-a-source.md.

Its "API" is the webhook itself: a delivery is ``{"id": <event id>, "page": <page id>,
"title": …, "text": …}``, signed with ``X-Echo-Signature: sha256=<hex HMAC-SHA256 of the body
keyed by ECHO_SIGNING_SECRET>``. The sync writes the latest event's text as the page's
document (a real source would fetch the page's state from its API instead, through its SDK,
charging each request with ``context.charge()``).

Like every source it imports only :mod:`debounce.contract` (and the standard library); the
service finds it through the ``debounce.integrations`` entry point in its ``pyproject.toml``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from debounce.contract import (
    Document,
    PageEvent,
    Source,
    SourceWindow,
    SyncContext,
    SyncJob,
    SyncResult,
    WebhookError,
    WebhookResult,
    WriteOutcome,
    header,
    setting,
)

__all__ = ["SOURCE", "EchoSettings", "EchoSyncer", "EchoWebhooks", "sign"]

SIGNATURE_HEADER = "x-echo-signature"


@dataclass(frozen=True)
class EchoSettings:
    """What the source reads from the environment (field names are unique across sources)."""

    echo_signing_secret: str | None = setting(
        "ECHO_SIGNING_SECRET", kind="secret", help="the secret that signs echo webhooks"
    )


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The headers that sign ``body`` (``debounce send echo``, tests)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", SIGNATURE_HEADER: f"sha256={digest}"}


class EchoWebhooks:
    """The parser (web process): verify, then map the delivery to its page. No I/O."""

    def __init__(self, settings: EchoSettings) -> None:
        self.secret = settings.echo_signing_secret

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """One delivery → one :class:`PageEvent` keyed by its ``page``.

        Raises:
            WebhookError: 503 no secret configured, 401 bad signature, 400 malformed.
        """
        if not self.secret:
            raise WebhookError(503, "not_configured", "set ECHO_SIGNING_SECRET")
        given = header(headers, SIGNATURE_HEADER) or ""
        expected = "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise WebhookError(401, "invalid_signature", "X-Echo-Signature does not match")
        try:
            event = json.loads(body)
        except ValueError:
            raise WebhookError(400, "malformed_body", "the body is not JSON") from None
        if not isinstance(event, dict) or not isinstance(event.get("page"), str):
            raise WebhookError(400, "malformed_body", "the event has no 'page'")
        event_id = event.get("id") if isinstance(event.get("id"), str) else None
        return WebhookResult(events=[PageEvent(event["page"], event_id, event)])


class EchoSyncer:
    """The syncer (worker): writes the job's latest payload as the page's document, through
    the store its :class:`SyncContext` carries (fenced by the job's claim)."""

    source_type = "echo"

    def __init__(self, settings: EchoSettings) -> None:
        self.settings = settings

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        """Write the page's document (unchanged content is not rewritten)."""
        payload: dict[str, Any] = job.payload
        outcome = await context.writer().upsert(
            Document(
                source_type="echo",
                document_id=job.source_page_id,
                source_page_id=job.source_page_id,
                title=str(payload.get("title") or "Untitled"),
                content=str(payload.get("text") or "") + "\n",
            )
        )
        unchanged = outcome is WriteOutcome.UNCHANGED
        return SyncResult(written=0 if unchanged else 1, unchanged=1 if unchanged else 0)

    async def aclose(self) -> None:
        """Nothing to release (a real source closes its SDK clients here)."""


SOURCE = Source(
    source_type="echo",
    create=EchoSyncer,
    webhooks=EchoWebhooks,
    settings_type=EchoSettings,
    window=SourceWindow(debounce_seconds=5.0, max_wait_seconds=60.0),
    secret_setting="echo_signing_secret",
    sign=sign,
)
