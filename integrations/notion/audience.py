"""Who may read a Notion document, as far as the public API says (docs/notion.md, "Audience").

Notion's API has no per-page sharing list: a page's permissions (members, guests, teamspace
access, "share to web") are not readable through it. What debounce records:

- kind ``workspace``: the document belongs to its workspace (the row's ``workspace_id``);
- ``accessible_by``: webhook events sent to *public* integrations carry ``accessible_by``, a
  list of partial user objects (``{"id": …, "type": "person" | "bot"}``) naming who has access
  to the event's entity (https://developers.notion.com/reference/webhooks-events-delivery,
  "Event properties"; internal integrations' events do not have it). The ids of the job's
  latest event are carried into the document's audience; an event without the field (an
  internal integration, a manual re-sync, a backfill) leaves the stored list as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from debounce.contract import Audience

__all__ = ["accessible_by", "audience_of_event"]


def accessible_by(payload: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The user and bot ids of an event's ``accessible_by`` list, ``None`` when the event has
    none (or it is not a list)."""
    listed = payload.get("accessible_by")
    if not isinstance(listed, list):
        return None
    return tuple(
        str(u["id"]) for u in listed if isinstance(u, Mapping) and isinstance(u.get("id"), str) and u["id"]
    )


def audience_of_event(payload: Mapping[str, Any]) -> Audience:
    """The audience of a document synced for a job whose latest event is ``payload``: kind
    ``workspace``, with the event's ``accessible_by`` ids when it has them."""
    return Audience("workspace", None, accessible_by(payload))
