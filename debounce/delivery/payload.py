"""The body of one batch (docs/consumers.md, "Push delivery"):
``{"type": "documents.changed", "timestamp": …, "data": {"changes": [...], "cursor": …}}``.

Thin by default: each change as the feed serves it (ids, op, content hash, its own cursor),
the consumer reads documents through the read API. With full content each upsert also carries
the document's ``title``, ``url`` and ``content`` when they fit. A body stays under
:data:`MAX_BODY_BYTES` (Standard Webhooks: "under about 20 kB"): a batch ends before the
change that would cross it, and a document too large to fit even alone is sent thin with
``"content_omitted": true``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from debounce.documents.feed import Change, Cursor

__all__ = ["EVENT_TYPE", "MAX_BODY_BYTES", "Batch", "build"]

#: The payload's ``type``.
EVENT_TYPE = "documents.changed"
#: Largest body of a batch, bytes.
MAX_BODY_BYTES = 20_000


@dataclass(frozen=True)
class Batch:
    """A body ready to send: ``body`` (UTF-8 JSON text), the ``count`` of changes it holds
    (a prefix of those given) and ``cursor``, the position after them."""

    body: str
    count: int
    cursor: Cursor


def _frame(timestamp: datetime, cursor: Cursor) -> bytes:
    return orjson.dumps(
        {
            "type": EVENT_TYPE,
            "timestamp": timestamp.isoformat(),
            "data": {"changes": [], "cursor": cursor.encode()},
        }
    )


def build(
    changes: Sequence[Change],
    end: Cursor,
    timestamp: datetime,
    documents: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    max_bytes: int = MAX_BODY_BYTES,
) -> Batch:
    """The body of the longest prefix of ``changes`` (feed order, at least one) that fits
    ``max_bytes``; its cursor is ``end`` (the read's next cursor, past changes the filters
    skipped) when every change fits, else the last change's. ``documents``: the full content
    by ``(source, document_id)`` (``None``: thin).

    Raises:
        ValueError: ``changes`` is empty.
    """
    if not changes:
        raise ValueError("a batch holds at least one change")
    # the frame's size with the longest cursor text of this batch: the cursors have one epoch
    room = max_bytes - len(_frame(timestamp, end)) - 8
    items: list[dict[str, Any]] = []
    size = 0
    for change in changes:
        item = change.to_json()
        doc = documents.get((change.source, change.document_id)) if documents is not None else None
        if doc is not None and change.op == "upsert":
            full = {**item, "title": doc["title"], "url": doc["url"], "content": doc["content"]}
            encoded = len(orjson.dumps(full)) + 1
            if size + encoded <= room:
                item = full
            elif not items:
                item = {**item, "content_omitted": True}
            else:
                break
        encoded = len(orjson.dumps(item)) + 1
        if items and size + encoded > room:
            break
        items.append(item)
        size += encoded
    cursor = end if len(items) == len(changes) else changes[len(items) - 1].cursor
    body = orjson.dumps(
        {
            "type": EVENT_TYPE,
            "timestamp": timestamp.isoformat(),
            "data": {"changes": items, "cursor": cursor.encode()},
        }
    ).decode()
    return Batch(body, len(items), cursor)
