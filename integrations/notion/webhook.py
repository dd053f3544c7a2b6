"""Notion webhooks: verify the signature, answer the verification request, map events to jobs.

https://developers.notion.com/reference/webhooks and
https://developers.notion.com/reference/webhooks-events-delivery:

- the first request to a new subscription is ``{"verification_token": "secret_..."}``, unsigned;
  it is answered 200 and the token surfaced to the operator (it becomes
  ``NOTION_WEBHOOK_SECRET``);
- every event carries ``X-Notion-Signature: sha256=<hex HMAC-SHA256 of the raw body keyed by
  that token>``; there is no timestamp, so replay protection is the event ``id`` (idempotency);
- ``page.*`` events → the page ``entity.id``; ``comment.*`` → the page ``data.page_id``;
  ``database.*`` / ``data_source.*`` → the ``entity.id``, synced as a document of its schema;
  anything else (``file_upload.*``, …) is acknowledged and ignored.

Nothing here does I/O (the web process answers inside the sender's timeout).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from debounce.contract import PageEvent, WebhookError, WebhookResult, header
from integrations.notion.settings import NotionSettings

__all__ = ["EVENT_KINDS", "SIGNATURE_HEADER", "event_kinds", "NotionWebhooks", "normalize_id"]

SIGNATURE_HEADER = "x-notion-signature"

#: Event type prefixes → what the job key is (https://developers.notion.com/reference/webhooks-events-delivery).
_ENTITY_PREFIXES = ("page.", "database.", "data_source.")
_COMMENT_PREFIX = "comment."

#: What each event type says changed (``PageEvent.kinds``; the table in docs/notion.md, "Which
#: event asks for what", with the reference of each type:
#: https://developers.notion.com/reference/webhooks-events-delivery). ``"content"``: the body
#: (the markdown request alone); ``"properties"``: the page object (``pages.retrieve`` alone:
#: title, properties, parent, trash state — so a deletion, a lock or a change of who may see
#: the page costs one small request). A type not listed (``page.created``, ``page.moved``,
#: ``page.undeleted``, ``database.*``, ``data_source.*``, any type Notion adds) says nothing:
#: ``()``, the sync fetches everything.
EVENT_KINDS: dict[str, tuple[str, ...]] = {
    "page.content_updated": ("content",),
    "page.transcript_deleted": ("content",),
    "page.properties_updated": ("properties",),
    "page.deleted": ("properties",),
    "page.locked": ("properties",),
    "page.unlocked": ("properties",),
    # Who may see the page changed: the event's own accessible_by (public connections) is
    # what debounce knows of that, so no request at all; without it (an internal
    # connection's event), the page object, which answers 404 once the page is unshared.
    # (Chosen per event in event_kinds.)
    "page.permissions_updated": ("properties",),
    # The page's open discussions (integrations/notion/comments.py): the comments listing
    # alone. A suggested edit is part of the body only once accepted, which Notion reports
    # as page.content_updated.
    "comment.created": ("comments",),
    "comment.updated": ("comments",),
    "comment.deleted": ("comments",),
    # Rows added, removed or edited: the data source's table from its stored row documents
    # and the rows edited since its watermark (integrations/notion/datasource.py).
    "data_source.content_updated": ("rows",),
}


#: What a verification token looks like (``secret_`` and letters and digits, as in Notion's
#: webhook reference); anything else in an unsigned body is refused rather than stored.
VERIFICATION_TOKEN = re.compile(r"secret_[A-Za-z0-9]{16,200}")


def normalize_id(raw: str) -> str:
    """Canonical form of a Notion id: dashed lower-case UUID (``153104cd-477e-…``).

    Notion accepts ids with or without dashes; the job key must be one spelling so a webhook
    and a manual re-sync of the same page share one job. A non-UUID is returned stripped.
    """
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        return raw.strip()


def _malformed(detail: str) -> WebhookError:
    return WebhookError(400, "malformed_body", detail)


def _load_json(body: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, reason)`` if ``body`` is not UTF-8 JSON."""
    try:
        return json.loads(body.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, f"body is not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return None, f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, "body is not valid JSON: nested too deeply"


def _required_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _malformed(f"event has no {where!r} (a non-empty string is required)")
    return value


class NotionWebhooks:
    """The Notion source's webhook parser (:class:`debounce.contract.WebhookParser`, web
    process, no I/O): reads ``settings.notion_webhook_secret``."""

    source_type = "notion"

    def __init__(self, settings: NotionSettings) -> None:
        self.settings = settings

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and map one Notion delivery (no I/O).

        ``headers``: case-insensitive mapping; ``body``: the raw request body (bytes).

        Returns a :class:`WebhookResult` with the verification token (the
        ``{"verification_token": ...}`` handshake: unsigned is accepted only while no secret
        is configured), one :class:`PageEvent` (job key, event ``id``, the whole event as
        payload), or none and a ``note`` for ignored event types.

        Raises:
            WebhookError: 503 ``not_configured`` (``NOTION_WEBHOOK_SECRET`` unset), 401
                ``invalid_signature`` (``X-Notion-Signature`` missing or wrong, including on a
                handshake once a secret is configured), 400 ``malformed_body`` (not a JSON
                object; ``type``/``id``/``entity.id``/``data.page_id`` missing; a
                verification token that does not look like Notion's).
        """
        value, json_error = _load_json(body)
        if (
            isinstance(value, dict)
            and "type" not in value
            and isinstance(value.get("verification_token"), str)
            and value["verification_token"]
        ):
            return self._handshake(headers, body, value["verification_token"])
        self._verify_signature(headers, body)
        if json_error is not None:
            raise _malformed(json_error)
        if not isinstance(value, dict):
            raise _malformed(f"body must be a JSON object, got {type(value).__name__}")
        return self._map_event(value)

    def _handshake(self, headers: Mapping[str, str], body: bytes, token: str) -> WebhookResult:
        """Notion's verification request. It arrives unsigned, before any secret can exist;
        once ``NOTION_WEBHOOK_SECRET`` is set, anyone could send one, so it must then be signed
        like an event (a new subscription's token is read by unsetting the secret first)."""
        if self.settings.notion_webhook_secret:
            if not header(headers, SIGNATURE_HEADER):
                raise WebhookError(
                    401,
                    "invalid_signature",
                    "unsigned verification request refused: NOTION_WEBHOOK_SECRET is already "
                    "set (to verify a new subscription, unset it and restart first)",
                )
            self._verify_signature(headers, body)
        if not VERIFICATION_TOKEN.fullmatch(token):
            raise _malformed("verification_token must be 'secret_' followed by 16 to 200 letters or digits")
        return WebhookResult(verification_token=token, note="verification request")

    def _verify_signature(self, headers: Mapping[str, str], body: bytes) -> None:
        secret = self.settings.notion_webhook_secret
        if not secret:
            raise WebhookError(
                503,
                "not_configured",
                "Notion webhooks are not configured: set NOTION_WEBHOOK_SECRET to the "
                "verification token Notion sent to this endpoint (it was logged when the "
                "verification request arrived) and restart.",
            )
        given = header(headers, SIGNATURE_HEADER)
        if not given:
            raise WebhookError(401, "invalid_signature", "missing X-Notion-Signature header")
        scheme, _, digest = given.strip().partition("=")
        if scheme.lower() != "sha256" or not digest:
            raise WebhookError(
                401, "invalid_signature", "malformed X-Notion-Signature (expected sha256=<hex>)"
            )
        expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode("ascii"), digest.lower().encode("utf-8")):
            raise WebhookError(
                401,
                "invalid_signature",
                "X-Notion-Signature does not match the body signed with NOTION_WEBHOOK_SECRET",
            )

    @staticmethod
    def _map_event(event: dict[str, Any]) -> WebhookResult:
        event_type = _required_str(event, "type", "type")
        event_id = _required_str(event, "id", "id")
        if event_type.startswith(_COMMENT_PREFIX):
            data = event.get("data")
            page_id = data.get("page_id") if isinstance(data, dict) else None
            if not isinstance(page_id, str) or not page_id.strip():
                raise _malformed(f"{event_type} event has no 'data.page_id'")
            key = page_id
        elif event_type.startswith(_ENTITY_PREFIXES):
            entity = event.get("entity")
            if not isinstance(entity, dict):
                raise _malformed(f"{event_type} event has no 'entity' object")
            entity_id = entity.get("id")
            if not isinstance(entity_id, str) or not entity_id.strip():
                raise _malformed(f"{event_type} event has no 'entity.id'")
            key = entity_id
        else:
            return WebhookResult(note=f"ignored event type {event_type}")
        return WebhookResult(
            events=[
                PageEvent(
                    source_page_id=normalize_id(key),
                    event_id=event_id,
                    payload=event,
                    kinds=event_kinds(event_type, event),
                    workspace=_text(event.get("workspace_id")),
                )
            ]
        )


def event_kinds(event_type: str, event: Mapping[str, Any]) -> tuple[str, ...]:
    """The event's kinds (:data:`EVENT_KINDS`); a ``page.permissions_updated`` that carries
    ``accessible_by`` (a list, public connections only:
    https://developers.notion.com/reference/webhooks/page-permissions-updated) is
    ``audience``: the sync writes that list without a request."""
    if event_type == "page.permissions_updated" and isinstance(event.get("accessible_by"), list):
        return ("audience",)
    return EVENT_KINDS.get(event_type, ())


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
