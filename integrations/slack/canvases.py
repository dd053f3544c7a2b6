"""Slack canvases as documents (issue 39): one document per canvas, ``canvas:<file id>``.

A canvas is a file with its own id (``filetype: "quip"``, ``mimetype:
"application/vnd.slack-docs"``, ``pretty_type: "Canvas"``;
https://docs.slack.dev/reference/objects/file-object). Its job is keyed like its document,
``canvas:<file id>``; a sync of it reads

1. ``files.info`` (``files:read``, Tier 4): the title, the edit stamp, the permalink and the
   conversations it is shared in (``channels``, ``groups``, ``ims``), whose audience becomes
   the canvas's (:func:`canvas_audience`). A file it describes as another type (an
   attachment: those are documents of their message's conversation, docs/files.md) ends the
   sync here, with nothing written. A token without ``files:read`` (or a file it cannot
   read) still gets the canvas's text, without a title or an audience;
2. ``canvases.getContent`` (https://docs.slack.dev/reference/methods/canvases.getContent,
   scope ``canvases:read``, bot or user token): the whole canvas as Markdown in one call, no
   pagination; ``canvas_not_found`` when it is gone or the app may not see it — the document
   is marked deleted through the service's deletion guard, like every deletion (a revoked
   share looks like a deletion: the guard holds a burst of them). Only this answer deletes.

Two requests a sync of a canvas, one for a file that is no canvas. The canvas's Markdown is
Slack's canvas dialect of CommonMark: the house Markdown (docs/consumers.md, "One Markdown") but
for its mentions, ``![](@U…)`` for a user and
``![](#C…)`` for a channel, written as ``@U…`` and ``#C…`` (:func:`house_markdown`).

Events carry a file's id only (``file_created``, ``file_shared``, ``file_change``:
``{"file_id", "file": {"id"}}``), so the parser cannot tell a canvas from another file: every
such event becomes a canvas job unless the event's file object says it is another type
(:func:`maybe_canvas`). A job for a file that is no canvas costs its ``files.info`` call and
writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from debounce.contract import Audience, Document, DocumentWriter, SyncResult, WriteOutcome
from integrations.slack.audience import AudienceKeeper
from integrations.slack.client import SlackApiFailure, SlackCall, _ChannelGone

__all__ = [
    "CANVAS_KEY_PREFIX",
    "CANVAS_MEDIA_TYPE",
    "canvas_audience",
    "canvas_document",
    "canvas_key",
    "conversations_of",
    "house_markdown",
    "is_canvas",
    "maybe_canvas",
    "sync_canvas",
]

#: The prefix of a canvas's job key and document id (``canvas:<file id>``).
CANVAS_KEY_PREFIX = "canvas:"
#: The media type Slack gives a canvas file.
CANVAS_MEDIA_TYPE = "application/vnd.slack-docs"

#: At most this many of a canvas's conversations are asked for their audience.
AUDIENCE_CONVERSATIONS = 20

_MENTION = re.compile(r"!\[\]\(([@#])([A-Z0-9]{2,})\)")


def canvas_key(file_id: str) -> str:
    """The job key and document id of canvas ``file_id``: ``canvas:<file id>``."""
    return CANVAS_KEY_PREFIX + file_id


def is_canvas(f: Mapping[str, Any]) -> bool:
    """Whether the file object ``f`` is a canvas (``filetype`` ``quip`` or ``canvas``, the
    canvas media type, ``pretty_type`` ``Canvas`` or ``mode`` ``canvas``)."""
    return (
        f.get("filetype") in ("quip", "canvas")
        or f.get("mimetype") == CANVAS_MEDIA_TYPE
        or f.get("pretty_type") == "Canvas"
        or f.get("mode") == "canvas"
    )


def maybe_canvas(f: Mapping[str, Any]) -> bool:
    """Whether a file event's file object may be a canvas: it is one, or it says nothing of
    its type (Slack's file events carry the id only)."""
    if is_canvas(f):
        return True
    return not any(f.get(k) for k in ("filetype", "mimetype", "pretty_type", "mode"))


def house_markdown(content: str) -> str:
    """A canvas's Markdown (``canvases.getContent``) in the house dialect: mentions written
    ``@U…`` / ``#C…``, line endings ``\\n``, one final newline (``""`` for an empty canvas)."""
    text = _MENTION.sub(lambda m: m.group(1) + m.group(2), content.replace("\r\n", "\n"))
    text = "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")
    return text + "\n" if text else ""


def conversations_of(f: Mapping[str, Any]) -> list[str]:
    """The conversations the canvas file ``f`` is shared in: public channels first
    (``channels``), then private ones (``groups``), then DMs (``ims``), each once."""
    seen: list[str] = []
    for key in ("channels", "groups", "ims"):
        value = f.get(key)
        for c in value if isinstance(value, list) else []:
            if isinstance(c, str) and c and c not in seen:
                seen.append(c)
    return seen


def canvas_audience(audiences: list[Audience]) -> Audience | None:
    """The audience of a canvas shared in conversations of these ``audiences``: the whole
    team when one is a public channel, else the members of them all (the kind of the first);
    ``None`` (unknown) when it is shared in none — a canvas only its author and those it was
    shared with one by one can open, which the API does not list."""
    if not audiences:
        return None
    if any(a.kind == "public_channel" for a in audiences):
        return Audience("public_channel")
    members = {m for a in audiences for m in (a.members or ())}
    return Audience(audiences[0].kind, tuple(members))


def _stamp(f: Mapping[str, Any]) -> datetime | None:
    for key in ("updated", "timestamp", "created"):
        value = f.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return datetime.fromtimestamp(value, UTC)
    return None


def canvas_document(
    source_type: str, file_id: str, content: str, f: Mapping[str, Any] | None, audience: Audience | None
) -> Document:
    """The document of canvas ``file_id`` whose ``canvases.getContent`` answered ``content``,
    its file object ``f`` (``files.info``; ``None``: not readable) and its ``audience``.

    ``metadata``: ``{"kind": "canvas", "file_id", "conversations", "created_by",
    "edit_stamp"}``."""
    info = f or {}
    title = info.get("title") or info.get("name") or file_id
    stamp = info.get("updated") or info.get("timestamp") or info.get("created")
    return Document(
        source_type=source_type,
        document_id=canvas_key(file_id),
        source_page_id=canvas_key(file_id),
        title=str(title),
        content=house_markdown(content),
        url=info.get("permalink") if isinstance(info.get("permalink"), str) else None,
        metadata={
            "kind": "canvas",
            "file_id": file_id,
            "conversations": conversations_of(info),
            "created_by": info.get("user") if isinstance(info.get("user"), str) else None,
            "edit_stamp": None if stamp is None else str(stamp),
        },
        source_updated_at=_stamp(info),
        audience=audience,
    )


async def sync_canvas(
    source_type: str, call: SlackCall, store: DocumentWriter, audiences: AudienceKeeper, file_id: str
) -> SyncResult:
    """Sync canvas ``file_id`` into its document of ``source_type`` (module docstring):
    ``files.info`` (a file of another type: nothing more, nothing written), then
    ``canvases.getContent`` and the audience of its conversations (at most
    :data:`AUDIENCE_CONVERSATIONS`, from the cache while fresh); ``canvas_not_found`` marks its
    document deleted through the deletion guard.

    Raises:
        MissingScope: the token lacks ``canvases:read``.
        SlackApiFailure: an answer without ``content``; as
            :func:`~integrations.slack.client.call_api` otherwise.
    """
    info = await call.call("files.info", file=file_id)
    f = info.get("file") if info is not None else None
    found = f if isinstance(f, dict) else None
    if found is not None and not maybe_canvas(found):
        return SyncResult()  # an attachment: its message's conversation syncs it
    answer = await call.call("canvases.getContent", canvas_id=file_id)
    if answer is None:
        gone = await store.mark_deleted(source_type, [canvas_key(file_id)], why="answered canvas_not_found")
        return SyncResult(deleted=len(gone))
    content = answer.get("content")
    if not isinstance(content, str):
        raise SlackApiFailure(f"Slack canvases.getContent answered no content for {file_id}")
    known: list[Audience] = []
    for channel in conversations_of(found or {})[:AUDIENCE_CONVERSATIONS]:
        try:
            known.append(await audiences.for_sync(call, channel))
        except _ChannelGone:
            continue  # a conversation the app cannot see: it adds no reader it knows of
    doc = canvas_document(source_type, file_id, content, found, canvas_audience(known))
    outcome = await store.upsert(doc)
    written = outcome is not WriteOutcome.UNCHANGED
    return SyncResult(written=int(written), unchanged=int(not written))
