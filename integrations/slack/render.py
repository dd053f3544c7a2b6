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

from debounce.documents import Document

__all__ = ["SOURCE_TYPE", "mrkdwn_to_markdown", "render_thread"]

SOURCE_TYPE = "slack"


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

_LINK = re.compile(r"<([^<>\n]+)>")


def mrkdwn_to_markdown(text: str) -> str:
    """Convert Slack ``mrkdwn`` entities to Markdown.

    ``<@U1>``/``<@U1|name>`` → ``@U1``; ``<#C1|general>`` → ``#general``; ``<!here>`` →
    ``@here``; ``<!subteam^S1|@team>`` → ``@team``; ``<url|label>`` → ``[label](url)``;
    ``<url>`` → ``<url>``; then ``&lt;``, ``&gt;``, ``&amp;`` are unescaped
    (https://docs.slack.dev/messaging/formatting-message-text). Emphasis marks are left
    as Slack wrote them.
    """

    def one(m: re.Match[str]) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return target
        if target.startswith("#"):
            return f"#{label}" if label else target
        if target.startswith("!"):
            if label:
                return label
            name = target[1:].split("^", 1)[0]
            return f"@{name}"
        if label:
            return f"[{label}]({target})"
        return f"<{target}>"

    out = _LINK.sub(one, text)
    return out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _author(msg: Mapping[str, Any]) -> str:
    return _str(msg.get("user")) or _str(msg.get("bot_id")) or "unknown"


def _body(msg: Mapping[str, Any]) -> str:
    text = mrkdwn_to_markdown(msg.get("text") or "").strip()
    extras: list[str] = []
    for f in msg.get("files") or []:
        if isinstance(f, Mapping):
            extras.append(f"_(file: {f.get('name') or f.get('title') or f.get('id')})_")
    if not text:
        for a in msg.get("attachments") or []:
            if isinstance(a, Mapping):
                fallback = a.get("fallback") or a.get("text")
                if fallback:
                    extras.append(mrkdwn_to_markdown(str(fallback)).strip())
    parts = [p for p in [text, *extras] if p]
    return "\n\n".join(parts) if parts else "_(no text)_"


def _render_message(msg: Mapping[str, Any]) -> str:
    head = f"**{_author(msg)}**"
    username = _str(msg.get("username"))
    if username and not _str(msg.get("user")):
        head += f" ({username})"
    head += f" · {_fmt_time(str(msg['ts']))}"
    edited = msg.get("edited")
    if isinstance(edited, Mapping) and _str(edited.get("ts")):
        head += f" · edited {_fmt_time(str(edited['ts']))}"
    return f"{head}\n\n{_body(msg)}\n"


def _title(channel: str, root: Mapping[str, Any], limit: int = 80) -> str:
    text = mrkdwn_to_markdown(root.get("text") or "")
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return f"Message by {_author(root)} in {channel}"


def render_thread(channel: str, messages: Sequence[Mapping[str, Any]]) -> Document:
    """Render one thread as a :class:`Document`.

    ``messages``: the thread parent first, then its replies oldest first (Slack message
    objects with ``ts``, ``text``, ``user`` or ``bot_id``, optionally ``edited.ts``,
    ``reply_count``). The content is a Markdown transcript: per message a line
    ``**<author id>** · <YYYY-MM-DD HH:MM:SS UTC>[ · edited <time>]``, a blank line, the
    text (mrkdwn converted by :func:`mrkdwn_to_markdown`), messages separated by a blank
    line. ``source_updated_at`` is the latest post or edit time (aware UTC); ``url`` is
    Slack's permalink shape ``https://slack.com/archives/<channel>/p<ts without dot>``
    (https://docs.slack.dev/reference/methods/chat.getPermalink), which Slack redirects to
    the signed-in workspace.
    """
    if not messages:
        raise ValueError("a thread has at least its parent message")
    root = messages[0]
    thread_ts = str(root["ts"])
    authors: list[str] = []
    times: list[str | None] = []
    for m in messages:
        a = _author(m)
        if a not in authors:
            authors.append(a)
        times.append(str(m["ts"]))
        edited = m.get("edited")
        if isinstance(edited, Mapping):
            times.append(_str(edited.get("ts")))
    latest = _max_ts(times) or thread_ts
    reply_count = root.get("reply_count")
    return Document(
        source_type=SOURCE_TYPE,
        document_id=f"{channel}/{thread_ts}",
        source_page_id=channel,
        title=_title(channel, root),
        content="\n".join(_render_message(m) for m in messages),
        url=f"https://slack.com/archives/{channel}/p{thread_ts.replace('.', '')}",
        metadata={
            "channel": channel,
            "thread_ts": thread_ts,
            "authors": authors,
            "reply_count": int(reply_count) if isinstance(reply_count, int) else len(messages) - 1,
        },
        source_updated_at=_ts_datetime(latest),
    )


def _fingerprint(msg: Mapping[str, Any]) -> str:
    """What of a history message decides its document: its rendering plus thread counters."""
    raw = json.dumps(
        [
            _render_message(msg),
            msg.get("subtype"),
            msg.get("reply_count"),
            msg.get("latest_reply"),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]

