"""One line of Notion's enhanced Markdown (rich text) as Notion rich text items, so that the
block walk's renderer (:func:`integrations.notion.richtext.render_rich_text`) writes it.

Format: https://developers.notion.com/guides/data-apis/enhanced-markdown ("Rich text
formatting", "Mentions", "Custom emoji", "Citations"): ``**bold**``, ``*italic*``,
``~~strike~~``, `` `code` ``, ``[text](url)``, ``$equation$``, ``<br>`` (a line break inside the
block), ``<span color="…">`` / ``<span underline="true">`` (colours and underline: dropped, as
the block walk drops them), ``<mention-user|page|database|data-source|agent|…
url="…">Name</mention-…>`` or self-closing, ``<mention-date start="…" end="…" startTime="…"
endTime="…" timeZone="…"/>``, ``:custom_emoji:`` (text), citations ``[^URL]``; the characters
``\\ * ~ ` $ [ ] < > { } | ^`` are backslash-escaped.

Parsed with markdown-it-py (CommonMark inline rules, strikethrough, raw inline HTML as tokens,
``$…$`` from mdit-py-plugins' dollarmath); ``_`` is not an emphasis marker in this dialect (it
is not escaped by Notion), entities are not decoded (``&`` is not escaped either), and link
destinations are taken verbatim.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

__all__ = ["notion_id", "parse_attrs", "parse_rich_text"]

#: Stands in for ``_`` while markdown-it parses (so ``_`` never opens emphasis).
_UNDERSCORE = "\ue05f"
_TAG = re.compile(r"^<(/?)([A-Za-z][A-Za-z0-9_-]*)((?:\s[^>]*?)?)\s*(/?)>$", re.DOTALL)
_ATTR = re.compile(r"([A-Za-z_:][-\w:.]*)\s*=\s*\"([^\"]*)\"")
#: A line without any of these is plain text: no parse needed.
_MARKUP = re.compile(r"[\\*~`$\[<]")
_CITATION = re.compile(r"\[\^([^\]\s]+)\]")
_ID = re.compile(r"([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})")
#: Mentions whose ``plain_text`` on the block walk is ``@`` + the name.
_AT_MENTIONS = frozenset({"user", "agent"})
_MENTION_KINDS = {"page": "page", "database": "database", "data-source": "database"}


class _Parser(MarkdownIt):
    """markdown-it-py taking link destinations as written (no normalisation, no validation:
    nothing here is rendered to HTML)."""

    def normalizeLink(self, url: str) -> str:
        return url

    def normalizeLinkText(self, link: str) -> str:
        return link

    def validateLink(self, url: str) -> bool:
        return True


def _make_parser() -> MarkdownIt:
    md = _Parser("commonmark", {"html": True})
    md.enable("strikethrough")
    md.disable(["entity", "autolink", "linkify"], ignoreInvalid=True)
    dollarmath_plugin(
        md,
        allow_labels=False,
        allow_space=True,
        allow_digits=True,
        allow_blank_lines=False,
        double_inline=False,
    )
    return md


_MD = _make_parser()


def parse_attrs(text: str) -> dict[str, str]:
    """``name="value"`` pairs of a tag or attribute list, values HTML-unescaped."""
    return {m.group(1): html.unescape(m.group(2)) for m in _ATTR.finditer(text)}


def notion_id(url: str) -> str | None:
    """The 32-hex object id at the end of a Notion URL's path (a slug before it allowed),
    dashed lower case; ``None`` if there is none."""
    path = url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    match = _ID.search(path.rsplit("/", 1)[-1])
    if match is None:
        return None
    raw = match.group(1).replace("-", "").lower()
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def _restore(value: str) -> str:
    return value.replace(_UNDERSCORE, "_")


class _Items:
    """Builds the rich text array while walking markdown-it's inline tokens."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.bold = self.italic = self.strike = 0
        self.links: list[str] = []
        #: An open ``<mention-…>``: (kind, attributes, collected text).
        self.mention: tuple[str, dict[str, str], list[str]] | None = None

    def annotations(self, code: bool = False) -> dict[str, Any]:
        return {
            "bold": self.bold > 0,
            "italic": self.italic > 0,
            "strikethrough": self.strike > 0,
            "underline": False,
            "code": code,
            "color": "default",
        }

    def text(self, value: str, *, code: bool = False, href: str | None = None) -> None:
        if not value:
            return
        if self.mention is not None:
            self.mention[2].append(value)
            return
        link = href if href is not None else (self.links[-1] if self.links else None)
        self.items.append(
            {
                "type": "text",
                "text": {"content": value},
                "plain_text": value,
                "href": link or None,
                "annotations": self.annotations(code),
            }
        )

    def equation(self, expression: str) -> None:
        self.items.append(
            {
                "type": "equation",
                "equation": {"expression": expression},
                "plain_text": expression,
                "href": None,
                "annotations": self.annotations(),
            }
        )

    def plain(self, value: str) -> None:
        """Text with citations ``[^URL]`` made links labelled by their URL."""
        last = 0
        for match in _CITATION.finditer(value):
            self.text(value[last : match.start()])
            target = match.group(1)
            self.text(target, href=target if re.match(r"https?://", target) else None)
            last = match.end()
        self.text(value[last:])

    def mention_item(self, kind: str, attrs: dict[str, str], inner: str) -> None:
        url = attrs.get("url", "")
        href = url if url.startswith(("http://", "https://", "/")) else None
        if kind == "date":
            plain = _date_text(attrs) or inner
            href = None
        elif kind in _AT_MENTIONS:
            name = inner or kind
            plain = name if name.startswith("@") else f"@{name}"
            href = None
        else:
            plain = inner or url
        if not plain:
            return
        item: dict[str, Any] = {
            "type": "mention",
            "plain_text": plain,
            "href": href,
            "annotations": self.annotations(),
        }
        target = _MENTION_KINDS.get(kind)
        object_id = notion_id(url) if target and url else None
        if target and object_id:
            item["mention"] = {"type": target, target: {"id": object_id}}
        if self.links and not href:
            item["href"] = self.links[-1]
        self.items.append(item)

    def tag(self, raw: str) -> None:
        match = _TAG.match(raw.strip())
        if match is None:
            self.text(raw)  # not a tag after all (markdown-it said it was): keep the words
            return
        closing, name, attr_text, self_closing = match.groups()
        name = name.lower()
        if name == "br":
            if self.mention is not None:
                self.mention[2].append(" ")
            else:
                self.text("\n")
            return
        if not name.startswith("mention-"):
            return  # <span color|underline>, anything else: no Markdown for it, drop the tag
        kind = name[len("mention-") :]
        if closing:
            if self.mention is not None and self.mention[0] == kind:
                open_kind, attrs, parts = self.mention
                self.mention = None
                self.mention_item(open_kind, attrs, "".join(parts).strip())
            return
        attrs = parse_attrs(attr_text)
        if self_closing:
            self.mention_item(kind, attrs, "")
        else:
            self.mention = (kind, attrs, [])


def _date_text(attrs: dict[str, str]) -> str:
    """``start`` (with ``startTime``) and `` → end`` (with ``endTime``) as the API's
    ``plain_text`` of a date mention writes them."""
    start = attrs.get("start", "")
    if not start:
        return ""
    if attrs.get("startTime"):
        start = f"{start}T{attrs['startTime']}"
    end = attrs.get("end", "")
    if end and attrs.get("endTime"):
        end = f"{end}T{attrs['endTime']}"
    elif not end and attrs.get("endTime"):
        end = f"{attrs.get('start')}T{attrs['endTime']}"
    return f"{start} → {end}" if end else start


def _walk(tokens: Sequence[Token], out: _Items) -> None:
    for tok in tokens:
        kind = tok.type
        if kind == "text":
            out.plain(_restore(tok.content))
        elif kind in ("softbreak", "hardbreak"):
            out.text("\n")
        elif kind == "code_inline":
            out.text(_restore(tok.content), code=True)
        elif kind in ("math_inline", "math_inline_double"):
            out.equation(_restore(tok.content))
        elif kind == "strong_open":
            out.bold += 1
        elif kind == "strong_close":
            out.bold -= 1
        elif kind == "em_open":
            out.italic += 1
        elif kind == "em_close":
            out.italic -= 1
        elif kind == "s_open":
            out.strike += 1
        elif kind == "s_close":
            out.strike -= 1
        elif kind == "link_open":
            out.links.append(_restore(str(tok.attrs.get("href", ""))))
        elif kind == "link_close":
            if out.links:
                out.links.pop()
        elif kind == "image":
            src = _restore(str(tok.attrs.get("src", "")))
            label = _restore("".join(c.content for c in tok.children or []))
            out.text(label or src, href=src or None)
        elif kind == "html_inline":
            out.tag(_restore(tok.content))
        elif tok.children:
            _walk(tok.children, out)
        elif tok.content:
            out.text(_restore(tok.content))


def parse_rich_text(source: str) -> list[dict[str, Any]]:
    """Enhanced-Markdown inline text (one block's rich text, ``<br>`` for its line breaks) as
    a Notion rich text array: ``text`` items with annotations and ``href``, ``equation``
    items, ``mention`` items (``plain_text`` as the API writes it: ``@Name`` for users,
    ``start → end`` for dates, the title for pages and databases, linked to their URL).
    Unknown tags are dropped, their text kept. Never raises; ``""`` gives ``[]``."""
    if not source.strip():
        return []
    if not _MARKUP.search(source):  # plain words (most lines): one text item, no parse
        out = _Items()
        out.text(source)
        return out.items
    tokens = _MD.parseInline(source.replace("_", _UNDERSCORE))
    out = _Items()
    for tok in tokens:
        _walk(tok.children or [], out)
    if out.mention is not None:  # an unclosed mention tag: keep what it held
        kind, attrs, parts = out.mention
        out.mention = None
        out.mention_item(kind, attrs, "".join(parts).strip())
    return out.items
