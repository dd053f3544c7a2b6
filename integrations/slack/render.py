"""Slack messages as Markdown: mrkdwn conversion, one document per thread, fingerprints.

Pure functions over Slack message objects (https://docs.slack.dev/reference/objects/message-object
shapes as ``conversations.history``/``replies`` return them) and Slack ``ts`` strings
(``"<unix seconds>.<6 digits>"``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from debounce.contract import Document
from integrations.slack.blocks import _join, _trim, attachment, block, file_line
from integrations.slack.mrkdwn import (
    Piece,
    cut_title,
    escape_markdown,
    harvest_names,
    md_of,
    mrkdwn,
    plain_of,
    words,
)

__all__ = [
    "DELETED",
    "NO_CONTENT_SUBTYPES",
    "SOURCE_TYPE",
    "TITLE_LIMIT",
    "has_content",
    "message_body",
    "render_thread",
]

SOURCE_TYPE = "slack"
#: Longest title, in characters of its plain reading (the Markdown may add escapes).
TITLE_LIMIT = 80


# --------------------------------------------------------------------------- small helpers


def _ts_key(ts: str) -> tuple[int, int]:
    """Sort key of a Slack ``ts`` (``"<unix seconds>.<6 digits>"``)."""
    sec, _, frac = ts.partition(".")
    return int(sec), int((frac or "0").ljust(6, "0")[:6])


def _ts_minus(ts: str, seconds: float) -> str:
    sec, frac = _ts_key(ts)
    return f"{max(0, sec - round(seconds))}.{frac:06d}"


def _ts_datetime(ts: str) -> datetime:
    """Aware UTC datetime of a Slack ``ts``."""
    sec, frac = _ts_key(ts)
    return datetime.fromtimestamp(sec, UTC) + timedelta(microseconds=frac)


def _fmt_time(ts: str) -> str:
    return _ts_datetime(ts).strftime("%Y-%m-%d %H:%M:%S UTC")


def _max_ts(values: Iterable[str | None]) -> str | None:
    best: str | None = None
    for v in values:
        if v and (best is None or _ts_key(v) > _ts_key(best)):
            best = v
    return best


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_root(msg: Mapping[str, Any]) -> bool:
    thread_ts = msg.get("thread_ts")
    return thread_ts is None or thread_ts == msg.get("ts")


# --------------------------------------------------------------------------- rendering

#: Message subtypes that are system notices, not content: joins and leaves, bots added or
#: removed, archiving, pins (https://docs.slack.dev/reference/events/message#subtypes). They
#: get no document and no line, and their events no job. Topic, purpose and name changes are
#: content (they say what the channel is about) and are kept.
NO_CONTENT_SUBTYPES = frozenset(
    {
        "channel_join",
        "channel_leave",
        "group_join",
        "group_leave",
        "bot_add",
        "bot_remove",
        "bot_enable",
        "bot_disable",
        "channel_archive",
        "channel_unarchive",
        "group_archive",
        "group_unarchive",
        "pinned_item",
        "unpinned_item",
        "ekm_access_denied",
        "channel_posting_permissions",
        "app_conversation_join",
        "app_conversation_leave",
    }
)

#: A deleted thread parent (``subtype: "tombstone"``, or absent while its replies remain).
DELETED = Piece("_(message deleted)_", "")


def _author(msg: Mapping[str, Any]) -> str:
    return _str(msg.get("user")) or _str(msg.get("bot_id")) or "unknown"


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _text_and_blocks(msg: Mapping[str, Any], names: Mapping[str, str]) -> list[list[Piece]]:
    """``text`` and ``blocks``, without saying the same thing twice. Slack sets ``text`` as the
    fallback of ``blocks`` (https://docs.slack.dev/reference/methods/chat.postMessage#text-usage):
    when the words of ``text`` already appear in the blocks (or it has no words and a
    ``rich_text`` block says it), the blocks alone are rendered; otherwise ``text`` comes first
    and each block whose words it does not already contain follows."""
    raw = msg.get("text") if isinstance(msg.get("text"), str) else ""
    assert isinstance(raw, str)
    text = _trim(mrkdwn(raw, names))
    rendered = [(b.get("type"), _trim(block(b, names))) for b in _maps(msg.get("blocks"))]
    rendered = [(kind, pieces) for kind, pieces in rendered if pieces]
    if not rendered:
        return [text]
    every = [pieces for _, pieces in rendered]
    if not raw.strip():
        return every
    said = words(plain_of(text))
    if (said and said in words(plain_of(_join(every)))) or (
        not said and any(kind == "rich_text" for kind, _ in rendered)
    ):
        return every
    parts = [text]
    for _, pieces in rendered:
        new = words(plain_of(pieces))
        if new and new not in said:
            parts.append(pieces)
            said += new
    return parts


def message_body(msg: Mapping[str, Any], names: Mapping[str, str] | None = None) -> list[Piece]:
    """What a message says, as pieces (empty: nothing at all). ``text``/``blocks`` as
    :func:`_text_and_blocks` decides, then each attachment whose words are not already there
    (:func:`~integrations.slack.blocks.attachment`), then files. A ``tombstone`` is
    :data:`DELETED`; a huddle with nothing else ``_(huddle)_``; a system notice of
    :data:`NO_CONTENT_SUBTYPES` nothing."""
    names = names or {}
    if msg.get("subtype") == "tombstone":
        return [DELETED]
    if msg.get("subtype") in NO_CONTENT_SUBTYPES:
        return []
    parts = _text_and_blocks(msg, names)
    said = words(plain_of(_join(parts)))
    for att in _maps(msg.get("attachments")):
        pieces = _trim(attachment(att, names))
        new = words(plain_of(pieces))
        if pieces and not (new and new in said):
            parts.append(pieces)
            said += new
    parts.extend(file_line(f) for f in _maps(msg.get("files")))
    body = _join(parts)
    if not body and msg.get("subtype") == "huddle_thread":
        return [Piece("_(huddle)_", "")]
    return body


def has_content(msg: Mapping[str, Any]) -> bool:
    """Whether a message says anything of its own (a tombstone does not)."""
    return msg.get("subtype") != "tombstone" and bool(message_body(msg, harvest_names([msg])))


def _render_message(
    msg: Mapping[str, Any], names: Mapping[str, str], author: str | None = None
) -> str | None:
    body = message_body(msg, names)
    if not body:
        return None
    author = author or _author(msg)
    head = f"**{author}**"
    username = _str(msg.get("username"))
    if username and not _str(msg.get("user")):
        head += f" ({escape_markdown(username, literal=True)})"
    elif author in names and msg.get("subtype") != "tombstone":
        head += f" ({escape_markdown(names[author], literal=True)})"
    head += f" · {_fmt_time(str(msg['ts']))}"
    edited = msg.get("edited")
    if isinstance(edited, Mapping) and _str(edited.get("ts")):
        head += f" · edited {_fmt_time(str(edited['ts']))}"
    text = re.sub(r"(?m)^(>[> ]*?) +$", r"\1", md_of(body))
    return f"{head}\n\n{text}\n"


def render_thread(channel: str, messages: Sequence[Mapping[str, Any]]) -> Document:
    """Render one thread as a :class:`Document`.

    ``messages``: the thread parent first, then its replies oldest first (Slack message
    objects with ``ts``, ``text``, ``user`` or ``bot_id``, optionally ``edited.ts``,
    ``reply_count``, ``blocks``, ``attachments``, ``files``, ``user_profile``). The content is a
    Markdown transcript: per message with content a line
    ``**<author id>**[ (<name>)] · <YYYY-MM-DD HH:MM:SS UTC>[ · edited <time>]``, a blank line,
    its :func:`message_body`, messages separated by a blank line (a message without content has
    no line; a ``tombstone`` parent reads ``_(message deleted)_`` under its replies'
    ``parent_user_id``). Mentions use the names the thread's messages give
    (:func:`~integrations.slack.mrkdwn.harvest_names`). The title is the first line of the first
    message with text (:func:`~integrations.slack.mrkdwn.cut_title`, :data:`TITLE_LIMIT`).
    ``source_updated_at`` is the latest post or edit time (aware UTC); ``url`` is
    Slack's permalink shape ``https://slack.com/archives/<channel>/p<ts without dot>``
    (https://docs.slack.dev/reference/methods/chat.getPermalink), which Slack redirects to
    the signed-in workspace. ``anchors``: where each message's text starts and its ``ts``: the
    service cuts the document's sections there, so a consumer re-embeds one message when one
    is edited or added.
    """
    if not messages:
        raise ValueError("a thread has at least its parent message")
    root = messages[0]
    thread_ts = str(root["ts"])
    names = harvest_names(messages)
    authors: list[str] = []
    times: list[str | None] = [thread_ts]
    blocks: list[str] = []
    anchors: list[tuple[int, str]] = []
    anchored: set[str] = set()
    offset = 0
    title: str | None = None
    for m in messages:
        author = _author(m)
        if m.get("subtype") == "tombstone":  # Slack's stand-in is by USLACKBOT; replies know better
            author = next((p for r in messages[1:] if (p := _str(r.get("parent_user_id")))), "")
        rendered = _render_message(m, names, author or "unknown")
        if rendered is None:
            continue
        if rendered and str(m["ts"]) not in anchored:
            anchors.append((offset, str(m["ts"])))
            anchored.add(str(m["ts"]))
        blocks.append(rendered)
        offset += len(rendered) + 1  # the "\n" joining the blocks
        if author and author not in authors:
            authors.append(author)
        times.append(str(m["ts"]))
        edited = m.get("edited")
        if isinstance(edited, Mapping):
            times.append(_str(edited.get("ts")))
        if title is None:
            title = cut_title(plain_of(message_body(m, names)), TITLE_LIMIT)
    latest = _max_ts(times) or thread_ts
    reply_count = root.get("reply_count")
    return Document(
        source_type=SOURCE_TYPE,
        document_id=f"{channel}/{thread_ts}",
        source_page_id=channel,
        title=title or f"Message by {_author(root)} in {channel}",
        content="\n".join(blocks),
        url=f"https://slack.com/archives/{channel}/p{thread_ts.replace('.', '')}",
        metadata={
            "channel": channel,
            "thread_ts": thread_ts,
            "authors": authors,
            "reply_count": int(reply_count) if isinstance(reply_count, int) else len(messages) - 1,
        },
        source_updated_at=_ts_datetime(latest),
        anchors=tuple(anchors),
    )


def _fingerprint(msg: Mapping[str, Any]) -> str:
    """What of a history message decides its document: its rendering plus thread counters."""
    raw = json.dumps(
        [
            _render_message(msg, harvest_names([msg])),
            msg.get("subtype"),
            msg.get("reply_count"),
            msg.get("latest_reply"),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]
