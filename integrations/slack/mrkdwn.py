"""Slack text as Markdown: entities, references, escaping, titles.

Slack's ``mrkdwn`` (https://docs.slack.dev/messaging/formatting-message-text) escapes exactly
three characters in text, ``&`` ``<`` ``>`` as ``&amp;`` ``&lt;`` ``&gt;``, so a raw ``<`` in a
message's ``text`` always opens a reference: ``<@U1>``/``<@U1|name>`` (user),
``<#C1>``/``<#C1|name>`` (channel), ``<!here>``/``<!channel>``/``<!everyone>``,
``<!subteam^S1|@team>`` (user group), ``<!date^<unix s>^<format>[^<link>]|<fallback>>``,
``<https://…|label>``, ``<mailto:…|label>``. Everything here turns such text into
:class:`Piece` lists: each piece is its Markdown *and* its plain reading (what a person reads in
Slack), so the same rendering yields the document body, the title and the text used to spot
duplicated content.

Text is unescaped first, then escaped for Markdown, so ``&lt;MARQUEE&gt;`` stays the text
``<MARQUEE>`` (``\\<MARQUEE>``) instead of becoming HTML. Slack's emphasis marks (``*bold*``,
``_italic_``, ``~strike~``) are left as written in ``text`` (see ``docs/slack.md``); text that is
literal by construction (``rich_text`` elements, ``plain_text`` objects, titles) has those marks
escaped too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "Piece",
    "code_block",
    "code_span",
    "cut_title",
    "escape_markdown",
    "harvest_names",
    "link",
    "literal",
    "md_of",
    "mrkdwn",
    "plain_of",
    "unescape_slack",
    "words",
]


@dataclass(frozen=True)
class Piece:
    """A run of rendered text: ``md`` is its Markdown, ``plain`` what a reader sees (no markup)."""

    md: str
    plain: str


#: Names the messages themselves give, by id: ``"U1" → "ann"``, ``"C1" → "general"``,
#: ``"S1" → "oncall"`` (see :func:`harvest_names`).
Names = Mapping[str, str]


def md_of(pieces: Iterable[Piece]) -> str:
    """The Markdown of ``pieces``."""
    return "".join(p.md for p in pieces)


def plain_of(pieces: Iterable[Piece]) -> str:
    """The plain reading of ``pieces``."""
    return "".join(p.plain for p in pieces)


# --------------------------------------------------------------------------- escaping

_SLACK_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}


def unescape_slack(text: str) -> str:
    """Undo Slack's escaping of ``&``, ``<``, ``>`` (one pass, so ``&amp;lt;`` → ``&lt;``)."""
    return _SLACK_ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
_HTML_ENTITY = re.compile(r"&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")
_LINK_OPEN = re.compile(r"!?\[(?=[^\[\]\n]*\][(\[:])")
_HEADING = re.compile(r"^([ \t]{0,3})(#{1,6})(?=[ \t]|$)", re.M)
_QUOTE = re.compile(r"^([ \t]{0,3})>", re.M)
_LIST = re.compile(r"^([ \t]{0,3})(?:([-+])|([0-9]{1,9})([.)]))(?=[ \t]|$)", re.M)
_RULE = re.compile(r"^([ \t]{0,3})([-=_])(?=[ \t]*(?:\2[ \t]*){2,}$)", re.M)
_INTRAWORD_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def escape_markdown(text: str, *, literal: bool = False) -> str:
    """Escape ``text`` so Markdown (CommonMark/GFM) shows it as text.

    Always: a backslash before punctuation, ``<`` (no HTML, no autolink), ``&`` that would read as
    an HTML entity, ``[`` that would open a link or image, ``#`` that would start a heading.
    With ``literal=True`` also ``*``, ``` ` ```, ``~``, ``_`` at word edges, ``>`` and list
    markers at the start of a line, and thematic-break lines: for text whose marks are not
    Slack's formatting (``rich_text``, ``plain_text``, titles).
    """
    out = _BACKSLASH.sub(r"\\\\", text)
    out = out.replace("<", "\\<")
    out = _HTML_ENTITY.sub(r"\\&", out)
    out = _LINK_OPEN.sub(lambda m: m.group(0)[:-1] + "\\[", out)
    out = _HEADING.sub(r"\1\\\2", out)
    if literal:
        out = out.replace("*", "\\*").replace("`", "\\`").replace("~", "\\~")
        out = _INTRAWORD_UNDERSCORE.sub(r"\\_", out)
        out = _QUOTE.sub(r"\1\\>", out)
        out = _LIST.sub(
            lambda m: m.group(1) + (f"\\{m.group(2)}" if m.group(2) else f"{m.group(3)}\\{m.group(4)}"), out
        )
        out = _RULE.sub(r"\1\\\2", out)
    return out


def _escape_label(text: str) -> str:
    return escape_markdown(text).replace("[", "\\[").replace("]", "\\]")


def literal(text: str) -> Piece:
    """Text shown as is (``plain_text``, ``rich_text`` text, names)."""
    return Piece(escape_markdown(text, literal=True), text)


def _destination(url: str) -> str:
    if re.search(r"[\s()<>]", url) or not url:
        return "<" + re.sub(r"[\s<>]", lambda m: f"%{ord(m.group(0)):02X}", url) + ">"
    return url


def link(url: str, label: str | None) -> Piece:
    """A link: ``[label](url)``, or the autolink ``<url>`` when there is no other label
    (``mailto:`` links read as the address)."""
    shown = url[len("mailto:") :] if url.startswith("mailto:") else url
    if not label or label == url or label == shown:
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*", url):
            return Piece(f"<{url}>", shown)
        return Piece(f"[{_escape_label(shown)}]({_destination(url)})", shown)
    return Piece(f"[{_escape_label(label)}]({_destination(url)})", label)


def code_span(text: str) -> Piece:
    """Inline code, with a backtick fence longer than any run inside."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or text.strip() == "" else ""
    return Piece(f"{fence}{pad}{text}{pad}{fence}", text)


def code_block(text: str) -> Piece:
    """A fenced code block on lines of its own (``text`` without its outer newlines)."""
    longest = max((len(r) for r in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return Piece(f"{fence}\n{text}\n{fence}", text)


# --------------------------------------------------------------------------- references

_REF_OR_CODE = re.compile(r"```(?P<block>.*?)```|`(?P<code>[^`\n]+)`|<(?P<ref>[^<>\n]*)>", re.S)
_LABELLED = re.compile(r"<([@#])([A-Z0-9]+)\|([^<>|\n]+)>|<!subteam\^([A-Z0-9]+)\|@?([^<>|\n]+)>")


def _date(ts: str, fmt: str | None = None) -> str:
    try:
        when = datetime.fromtimestamp(int(ts), UTC)
    except (ValueError, OverflowError, OSError):
        return ts
    if fmt and "{time" not in fmt and "{date" in fmt:
        return when.strftime("%Y-%m-%d")
    return when.strftime("%Y-%m-%d %H:%M UTC")


def date_text(ts: Any, fallback: Any = None, fmt: Any = None) -> str:
    """The reading of a Slack date token: its ``fallback``, else the UTC time of ``ts``
    (https://docs.slack.dev/messaging/formatting-message-text#date-formatting)."""
    if isinstance(fallback, str) and fallback:
        return fallback
    return _date(str(ts), fmt if isinstance(fmt, str) else None)


def _reference(inner: str, names: Names) -> Piece:
    target, _, label = inner.partition("|")
    label = unescape_slack(label)
    if target.startswith("@"):
        uid = target[1:]
        return literal("@" + (label.lstrip("@") or names.get(uid) or uid))
    if target.startswith("#"):
        cid = target[1:]
        return literal("#" + (label.lstrip("#") or names.get(cid) or cid))
    if target.startswith("!"):
        kind, _, rest = target[1:].partition("^")
        if kind == "subteam":
            return literal("@" + (label.lstrip("@") or names.get(rest) or rest))
        if kind == "date":
            ts, _, tail = rest.partition("^")
            fmt, _, url = tail.partition("^")
            shown = date_text(ts, label, fmt)
            return link(unescape_slack(url), shown) if url else literal(shown)
        return literal(label or "@" + kind)
    url = unescape_slack(target)
    if not re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", url):
        return literal(f"<{inner}>")
    return link(url, label or None)


def _plain_refs(text: str, names: Names) -> str:
    """Code content: references read as plain text (a link as its URL), entities unescaped."""

    def one(m: re.Match[str]) -> str:
        target, _, label = m.group(1).partition("|")
        if target.startswith(("@", "#", "!")):
            return _reference(m.group(1), names).plain
        url = unescape_slack(target)
        label = unescape_slack(label)
        return url if not label or label == url else f"{label} ({url})"

    return unescape_slack(re.sub(r"<([^<>\n]*)>", one, text))


_EMPHASIS = re.compile(r"(?<![\w*_~])([*_~])(?=\S)([^\n]*?\S)\1(?![\w*_~])")


def _text_piece(text: str) -> Piece:
    raw = unescape_slack(text)
    return Piece(escape_markdown(raw), _EMPHASIS.sub(r"\2", raw))


def mrkdwn(text: str, names: Names | None = None) -> list[Piece]:
    """Slack ``mrkdwn`` (a message's ``text``, an ``mrkdwn`` text object, attachment text) as
    pieces. References read as in Slack (``@name`` when ``names`` or the reference's label has
    one, else ``@U123``; ``#name``; ``[label](url)``); ```` ```code``` ```` and `` `code` `` stay
    code (multi-line code becomes a fenced block on lines of its own)."""
    names = names or {}
    out: list[Piece] = []
    pos = 0
    for m in _REF_OR_CODE.finditer(text):
        if m.start() > pos:
            out.append(_text_piece(text[pos : m.start()]))
        if m.group("block") is not None:
            body = _plain_refs(m.group("block"), names)
            if "\n" in body.strip("\n"):
                before = "" if not out or out[-1].md.endswith("\n") else "\n"
                block = code_block(body.strip("\n"))
                out.append(Piece(before + block.md + "\n", block.plain + "\n"))
                pos = m.end()
                if text[pos : pos + 1] == "\n":
                    pos += 1
                continue
            out.append(code_span(body.strip("\n")))
        elif m.group("code") is not None:
            out.append(code_span(_plain_refs(m.group("code"), names)))
        else:
            out.append(_reference(m.group("ref"), names))
        pos = m.end()
    if pos < len(text):
        out.append(_text_piece(text[pos:]))
    return out


def harvest_names(messages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Names the messages themselves give, by id: each author's ``user_profile``
    (``display_name``, else ``real_name``, else ``name``; https://docs.slack.dev/reference/
    objects/message-object) and the labels of ``<@U1|ann>``, ``<#C1|general>``,
    ``<!subteam^S1|@oncall>`` in their ``text`` (the fallback Slack writes for ``rich_text``)."""
    names: dict[str, str] = {}
    for msg in messages:
        profile = msg.get("user_profile")
        user = msg.get("user")
        if isinstance(profile, Mapping) and isinstance(user, str):
            for key in ("display_name", "real_name", "name"):
                value = profile.get(key)
                if isinstance(value, str) and value.strip():
                    names.setdefault(user, value.strip())
                    break
        text = msg.get("text")
        if isinstance(text, str):
            for m in _LABELLED.finditer(text):
                key, value = (m.group(2), m.group(3)) if m.group(2) else (m.group(4), m.group(5))
                names.setdefault(key, unescape_slack(value).lstrip("@#"))
    return names


# --------------------------------------------------------------------------- titles, comparison


def cut_title(plain: str, limit: int = 80) -> str | None:
    """The title of a plain reading: its first non-empty line, whitespace collapsed, at most
    ``limit`` characters (cut at a word boundary with ``…``), escaped for Markdown. The cut is
    made on the plain text, so it never falls inside a link or an escape. ``None``: no text."""
    for line in plain.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        if len(line) > limit:
            head = line[: limit - 1]
            if line[limit - 1] != " ":
                space = head.rfind(" ")
                if space > 0:
                    head = head[:space]
            line = head.rstrip(" ,;:.-–—") + "…"
        return escape_markdown(line, literal=True)
    return None


_SHORTCODE = re.compile(r":[a-z0-9_+\-']+(?:::skin-tone-[2-6])?:")


def words(plain: str) -> str:
    """``plain`` reduced to its words (letters and digits, case-folded, emoji short codes
    dropped), space separated and padded: ``words(a) in words(b)`` says ``b`` already reads as
    ``a`` whatever the markup, bullets or emoji of either."""
    found = re.findall(r"[^\W_]+", _SHORTCODE.sub(" ", plain).casefold())
    return " " + " ".join(found) + " " if found else ""
