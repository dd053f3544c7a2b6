"""What a webhook delivery amounts to: the parse half of the contract (web process, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PageEvent", "WebhookResult", "header"]


@dataclass(frozen=True)
class PageEvent:
    """One webhook event mapped to the page it concerns.

    ``source_page_id`` is the job key (a Notion page/database id, a Slack channel id);
    ``event_id`` the source's id of the event (the idempotency key; ``None`` if it has none);
    ``payload`` the JSON the job keeps as its latest event; ``kinds``: what the event says
    changed, in the source's own words (Notion: ``"content"``, ``"properties"``), merged by the
    enqueue into the job's :attr:`~debounce.contract.SyncJob.change_kinds` (the union over the
    events it absorbed); ``()``: the event does not say (the sync fetches everything), and
    that absorbs every other kind of the job.
    """

    source_page_id: str
    event_id: str | None
    payload: dict[str, Any]
    kinds: tuple[str, ...] = ()
    #: The source's id of the workspace the event came from (Notion ``workspace_id``, Slack
    #: ``team_id``) and, for a Slack Enterprise Grid org, its ``enterprise_id``: routing
    #: metadata, read from the payload, so not part of the event's equality.
    workspace: str | None = field(default=None, compare=False)
    enterprise: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class WebhookResult:
    """What a verified webhook delivery amounts to.

    - ``events``: zero or more page events to enqueue (the web layer debounces them);
    - ``reply``: JSON body answered with 200 instead of the default acknowledgement (Slack's
      ``url_verification`` challenge);
    - ``verification_token``: a handshake secret the operator must see (Notion's verification
      request); the web layer logs it and stores it for ``debounce notion-token``;
    - ``note``: a short reason for an acknowledged delivery that enqueues nothing ("ignored
      event type reaction_added"), used in logs and metrics;
    - ``warning``: something the operator should hear about (Slack ``app_rate_limited``);
    - ``revoked_workspace``: the source says this workspace's token is gone (Slack
      ``app_uninstalled``, ``tokens_revoked``): the web marks it revoked.
    """

    events: list[PageEvent] = field(default_factory=list)
    reply: dict[str, Any] | None = None
    verification_token: str | None = None
    note: str | None = None
    warning: str | None = None
    revoked_workspace: str | None = None


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Value of header ``name`` in ``headers``, case-insensitively: Starlette's ``Headers`` are
    case-insensitive already; a plain dict (tests, an SDK response's headers) keeps its
    original casing."""
    if headers is None:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, val in headers.items():
        if key.lower() == lowered:
            return val
    return None
