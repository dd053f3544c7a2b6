"""Notion rich text as Markdown, and the escaping that keeps plain text plain.

Shapes: https://developers.notion.com/reference/rich-text — an array of items of type
``text`` (``text.content``, ``text.link``), ``mention`` (``user``, ``page``, ``database``,
``date``, ``link_preview``, ``link_mention``, ``template_mention``, ``custom_emoji``) or
``equation`` (``equation.expression``); every item carries ``plain_text``, ``href`` (a URL,
*relative* — ``/fdc65179…`` — for Notion's links to its own pages) and ``annotations``.

Escaping (choice recorded in ``docs/notion.md``): text is Markdown-escaped so that it stays
text — ``\\`` ``*`` ``[`` ``]`` ``<`` ``~`` ``$`` `````` ` `````` always, ``_`` unless it sits
between two letters/digits (``snake_case`` cannot become emphasis), ``&`` only before an entity
(``&amp;``), and at the start of a line ``#``, ``>``, a list marker (``-``/``+`` then a space,
``1.``/``1)`` then a space) or a setext/thematic-break line (``---``, ``===``). Code spans and
equations are never escaped.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

__all__ = [
    "NOTION_BASE_URL",
    "absolute_url",
    "escape_markdown",
    "link_target",
    "notion_url",
    "plain_text",
    "render_rich_text",
]

#: Where Notion pages live; relative ``href``s and ids are resolved against it.
NOTION_BASE_URL = "https://www.notion.so"

_PUNCTUATION = frozenset(string.punctuation)
_ALWAYS_ESCAPED = frozenset("`*[]<~$")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ORDERED_MARKER = re.compile(r"[0-9]{1,9}(?=[.)](?:[ \t]|$))")
_DASH_RULE = re.compile(r"-[- \t]*$")
_EQUALS_RULE = re.compile(r"=+[ \t]*$")

#: (bold, italic, strikethrough, code)
_Key = tuple[bool, bool, bool, bool]


def notion_url(object_id: str, block_id: str | None = None) -> str:
    """``https://www.notion.so/<id without dashes>`` (a page or database), plus
    ``#<block id without dashes>`` to point at one block of that page."""
    url = f"{NOTION_BASE_URL}/{object_id.replace('-', '')}"
    return f"{url}#{block_id.replace('-', '')}" if block_id else url


def absolute_url(href: str) -> str:
    """``href`` made absolute: Notion's own links (``/fdc65179…``, ``/fdc65179…#block``) are
    relative to https://www.notion.so; ``//host/…`` gets ``https:``; others are unchanged."""
    if href.startswith("//"):
        return "https:" + href
    if href.startswith("/"):
        return NOTION_BASE_URL + href
    return href


def link_target(url: str) -> str:
    """``url`` safe as a Markdown link destination ``(…)``: spaces and angle brackets are
    percent-encoded, and parentheses too when they are unbalanced."""
    out = url.replace(" ", "%20").replace("<", "%3C").replace(">", "%3E")
    if out.count("(") != out.count(")"):
        out = out.replace("(", "%28").replace(")", "%29")
    return out


def escape_markdown(text: str) -> str:
    """``text`` with the inline Markdown characters backslash-escaped (see the module doc);
    no line-start rules (those are :func:`_escape_line_start`)."""
    out: list[str] = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch == "\\":
            nxt = text[i + 1] if i < last else ""
            # Only a backslash that could escape something (or end a line: a hard break).
            out.append("\\\\" if nxt in ("", "\n") or nxt in _PUNCTUATION else ch)
        elif ch in _ALWAYS_ESCAPED:
            out.append("\\" + ch)
        elif ch == "_":
            prev = text[i - 1] if i > 0 else ""
            nxt = text[i + 1] if i < last else ""
            out.append("_" if prev.isalnum() and nxt.isalnum() else "\\_")
        elif ch == "&" and _ENTITY.match(text, i):
            out.append("\\&")
        else:
            out.append(ch)
    return "".join(out)


def _escape_line_start(line: str) -> str:
    """Escape what would turn one line of text into a block: ``#`` (heading), ``>`` (quote),
    ``-``/``+``/``1.``/``1)`` followed by a space (list item), ``---``/``===`` (setext heading
    or thematic break)."""
    body = line.lstrip(" \t")
    pad = line[: len(line) - len(body)]
    if not body:
        return line
    first = body[0]
    if first in "#>":
        return f"{pad}\\{body}"
    if first in "-+" and (len(body) == 1 or body[1] in " \t" or _DASH_RULE.match(body)):
        return f"{pad}\\{body}"
    if _EQUALS_RULE.match(body):
        return f"{pad}\\{body}"
    marker = _ORDERED_MARKER.match(body)
    if marker:
        return f"{pad}{body[: marker.end()]}\\{body[marker.end() :]}"
    return line


def _item_text(item: Mapping[str, Any]) -> str:
    """The text of one rich text item: ``plain_text``, else what its body holds."""
    plain = item.get("plain_text")
    if isinstance(plain, str):
        return plain
    kind = item.get("type")
    body = item.get(kind) if isinstance(kind, str) else None
    if not isinstance(body, dict):
        return ""
    for key in ("content", "expression"):
        if isinstance(body.get(key), str):
            return str(body[key])
    if kind == "mention":
        return _mention_fallback(body)
    return ""


def _mention_fallback(mention: Mapping[str, Any]) -> str:
    """Text of a mention without ``plain_text`` (the API always sends it; fixtures may not)."""
    kind = mention.get("type")
    body = mention.get(kind) if isinstance(kind, str) else None
    if kind == "user" and isinstance(body, dict):
        return f"@{body.get('name') or 'user'}"
    if kind == "date" and isinstance(body, dict):
        start, end = body.get("start"), body.get("end")
        return f"{start} → {end}" if end else str(start or "")
    if kind == "link_preview" and isinstance(body, dict):
        return str(body.get("url") or "")
    if kind == "link_mention" and isinstance(body, dict):
        return str(body.get("title") or body.get("href") or "")
    if kind == "custom_emoji" and isinstance(body, dict):
        return f":{body.get('name') or 'emoji'}:"
    if kind == "template_mention" and isinstance(body, dict):
        value = body.get(str(body.get("type")))
        return f"@{str(value).capitalize()}" if value else ""
    return ""


def plain_text(items: Any) -> str:
    """Concatenated text of a rich text array, no Markdown and no escaping (``""`` if not a
    list)."""
    if not isinstance(items, list):
        return ""
    return "".join(_item_text(i) for i in items if isinstance(i, dict))


def _code_span(value: str) -> str:
    fence = "`"
    while fence in value:
        fence += "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _runs(items: list[Any]) -> list[tuple[str, _Key, str | None, bool]]:
    """(text, annotations, href, is_equation) runs; adjacent items with the same
    annotations and link are merged (Notion splits runs freely)."""
    runs: list[tuple[str, _Key, str | None, bool]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        raw_ann = item.get("annotations")
        ann: Mapping[str, Any] = raw_ann if isinstance(raw_ann, dict) else {}
        key = (
            bool(ann.get("bold")),
            bool(ann.get("italic")),
            bool(ann.get("strikethrough")),
            bool(ann.get("code")),
        )
        raw_href = item.get("href")
        href = absolute_url(raw_href) if isinstance(raw_href, str) and raw_href else None
        content = _item_text(item)
        if not content:
            continue
        if item.get("type") == "equation":
            runs.append((content, key, href, True))
        elif runs and not runs[-1][3] and runs[-1][1] == key and runs[-1][2] == href:
            runs[-1] = (runs[-1][0] + content, key, href, False)
        else:
            runs.append((content, key, href, False))
    return runs


def _decorate(segment: str, key: _Key, href: str | None, is_equation: bool) -> str:
    """One line of one run as Markdown; markers stay inside surrounding whitespace so
    ``**bold **`` never appears."""
    core = segment.strip()
    if not core:
        return segment
    lead = segment[: len(segment) - len(segment.lstrip())]
    trail = segment[len(segment.rstrip()) :]
    bold, italic, strike, is_code = key
    if is_equation:
        core = f"${core}$"
    elif is_code:
        core = _code_span(core)
    else:
        core = escape_markdown(core)
    if strike:
        core = f"~~{core}~~"
    if italic:
        core = f"*{core}*"
    if bold:
        core = f"**{core}**"
    if href:
        core = f"[{core}]({link_target(href)})"
    return f"{lead}{core}{trail}"


def render_rich_text(items: Any, *, line_starts: bool = True) -> str:
    """Markdown of a Notion rich text array; lines are separated by ``"\\n"`` (the caller
    decides what a line break becomes: a hard break, a space, ``<br>``).

    Annotations map to ``**bold**``, ``*italic*``, ``~~strike~~`` and `` `code` ``; a link
    (``href``, made absolute by :func:`absolute_url`) to ``[text](url)``; an inline equation
    to ``$expr$``; a mention to its ``plain_text``, linked when it has an ``href``. Underline
    and colours have no Markdown and are dropped. Each line of a run is decorated on its own
    (no emphasis or code span spans a line break). Text is escaped by
    :func:`escape_markdown`; with ``line_starts`` (default) also the line-start rules (off
    for table cells, where no line starts a block). Never raises; non-lists give ``""``.
    """
    if not isinstance(items, list):
        return ""
    parts: list[str] = []
    for content, key, href, is_equation in _runs(items):
        if is_equation:
            parts.append(_decorate(content.replace("\n", " "), key, href, True))
        else:
            parts.append("\n".join(_decorate(s, key, href, False) for s in content.split("\n")))
    text = "".join(parts)
    if not line_starts:
        return text
    return "\n".join(_escape_line_start(line) for line in text.split("\n"))
