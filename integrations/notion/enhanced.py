"""Notion's enhanced Markdown → the Markdown the block walk writes (CommonMark + GFM).

The markdown endpoint (``pages.retrieve_markdown``) answers Notion's *enhanced* Markdown
(https://developers.notion.com/guides/data-apis/enhanced-markdown): tab-indented children,
XML-like block tags, ``{color="…"}`` attribute lists, mention tags. We do not store that
dialect: :func:`enhanced_to_markdown` parses it back into the block tree it describes
(:class:`~integrations.notion.render.BlockNode` objects shaped like ``blocks.children.list``'s
answers) and renders that tree with the block walk's own renderer
(:func:`~integrations.notion.render.render_blocks`), so both paths write the same Markdown
by construction. Rich text goes through :mod:`.enhanced_inline`.

Blocks understood (every construct of the reference, plus the stand-in's and older spellings):
text (with ``{color}``), headings 1–6 (5, 6 → 4; ``{toggle="true"}`` with indented children),
bulleted / numbered / to-do items, quotes, ``<details><summary>`` toggles, ``<callout icon
color>`` and ``::: callout {icon color}`` fenced callouts, fenced code with its language,
``$$`` equations, ``---`` dividers, ``<table header-row header-column>`` with ``<colgroup>``,
``<tr>``, ``<td>`` (colours ignored), ``<columns>``/``<column>``, ``<page url>``,
``<database url|data-source-url>``, ``<audio|video|file|pdf src>``, ``![caption](url)``,
``<table_of_contents/>``, ``<breadcrumb/>``, ``<synced_block>`` and
``<synced_block_reference>``, ``<tabs>``/``<tab title>``, ``<meeting-notes>`` (title,
``<summary>``, ``<notes>``, ``<transcript>``), ``<empty-block/>``, ``<unknown url alt/>``, a
line holding only ``<mention-page|database url/>`` (a ``link_to_page``), and the children of
any block indented one tab deeper. Differences that remain (information the endpoint does not
send) are listed in ``docs/notion.md``, "One Markdown".
"""

from __future__ import annotations

import re
from typing import Any

from integrations.notion.enhanced_inline import notion_id, parse_attrs, parse_rich_text
from integrations.notion.render import BlockNode, render_blocks

__all__ = ["enhanced_to_markdown", "parse_enhanced"]

_ATTR_LIST = re.compile(r"(?<!\\)\s*\{\s*(?:[A-Za-z][\w-]*\s*=\s*\"[^\"]*\"\s*)+\}\s*$")
_OPEN = re.compile(r"^<([A-Za-z][\w-]*)((?:\s[^>]*?)?)\s*>$")
_SELF_CLOSING = re.compile(r"^<([A-Za-z][\w-]*)((?:\s[^>]*?)?)\s*/>$")
_ONE_LINE = re.compile(r"^<([A-Za-z][\w-]*)((?:\s[^>]*?)?)>(.*)</\1>$")
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_DIV = re.compile(r"^(:{3,})\s*(\w[\w-]*)?\s*(\{.*\})?\s*$")
_HEADING = re.compile(r"^(#{1,6})(?:[ \t]+(.*))?$")
_TODO = re.compile(r"^-[ \t]+\[([ xX])\](?:[ \t]+(.*))?$")
_BULLET = re.compile(r"^-(?:[ \t]+(.*))?$")
_NUMBER = re.compile(r"^\d{1,9}[.)](?:[ \t]+(.*))?$")
_QUOTE = re.compile(r"^>(?:[ \t]?(.*))?$")
_IMAGE = re.compile(r"^!\[((?:\\.|[^\]\\])*)\]\((.*)\)$")
_DIVIDER = re.compile(r"^(?:-[ \t]*){3,}$|^(?:\*[ \t]*){3,}$|^(?:_[ \t]*){3,}$")
_TR = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.DOTALL)
_TD = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.DOTALL)

#: Tags that open on a line of their own and close with ``</tag>`` on a later line.
_CONTAINERS = frozenset(
    {
        "details",
        "callout",
        "columns",
        "column",
        "synced_block",
        "synced_block_reference",
        "tabs",
        "tab",
        "meeting-notes",
        "summary",
        "notes",
        "transcript",
        "table",
    }
)
_MEDIA_TAGS = frozenset({"audio", "video", "file", "pdf", "image"})
_LINK_TAGS = frozenset({"bookmark", "embed", "link_preview", "link-preview"})


def _node(
    block_type: str,
    data: dict[str, Any],
    children: list[BlockNode] | None = None,
    block_id: str | None = None,
) -> BlockNode:
    block: dict[str, Any] = {"type": block_type, block_type: data}
    if block_id:
        block["id"] = block_id
    return BlockNode(block, children or [])


def _strip_attrs(text: str) -> tuple[str, dict[str, str]]:
    """A line without its trailing ``{name="value" …}`` attribute list, and the list."""
    match = _ATTR_LIST.search(text)
    if match is None:
        return text, {}
    return text[: match.start()], parse_attrs(match.group(0))


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip("\t"))


def _text_block(text: str, **extra: Any) -> dict[str, Any]:
    return {"rich_text": parse_rich_text(text), "color": "default", **extra}


def _paragraph(text: str, children: list[BlockNode] | None = None) -> BlockNode:
    return _node("paragraph", _text_block(text), children)


#: Tags that v2 (Notion-flavored Markdown) gives a block with children: the block's text, a
#: blank line, its children (https://developers.notion.com/guides/data-apis/
#: migrate-to-notion-flavored-markdown: "A block that has children uses its tag form, such as
#: <p>, <quote>, or <toggle>, with the children after a blank line").
_V2_CONTAINERS = frozenset({"p", "quote", "toggle"})


class _Parser:
    """Parses the lines of one answer into block nodes (see the module doc); ``version``:
    the answer's ``markdown_version`` (``v1`` enhanced Markdown, ``v2`` Notion-flavored)."""

    def __init__(self, markdown: str, version: str = "v1") -> None:
        self.lines = markdown.split("\n")
        self.v2 = version == "v2"

    def body(self, index: int) -> str:
        return self.lines[index].lstrip("\t").strip()

    def blocks(self, start: int, end: int) -> list[BlockNode]:
        out: list[BlockNode] = []
        i = start
        while i < end:
            if not self.body(i):
                i += 1
                continue
            nodes, i = self.block(i, end)
            out.extend(nodes)
        return out

    def children_end(self, index: int, end: int) -> int:
        """The end of the lines indented deeper than line ``index`` that follow it."""
        depth = _depth(self.lines[index])
        j, last = index + 1, index + 1
        while j < end:
            if self.body(j):
                if _depth(self.lines[j]) <= depth:
                    break
                last = j + 1
            j += 1
        return last

    def closing(self, index: int, end: int, tag: str) -> int:
        """The line closing the ``<tag>`` opened on line ``index`` (nested ones counted);
        ``end`` if it is never closed."""
        level = 0
        for j in range(index, end):
            body = self.body(j)
            if body == f"</{tag}>":
                level -= 1
                if level == 0:
                    return j
            elif (m := _OPEN.match(body)) and m.group(1) == tag:
                level += 1
        return end

    def block(self, i: int, end: int) -> tuple[list[BlockNode], int]:
        """The block starting on line ``i`` and the index after it."""
        line = self.lines[i]
        depth = _depth(line)
        body = line.lstrip("\t").strip()
        if fence := _FENCE.match(body):
            return self.code(i, end, depth, fence.group(1), fence.group(2))
        if body == "$$" or (body.startswith("$$") and body.endswith("$$") and len(body) > 4):
            return self.equation(i, end, depth, body)
        if (div := _DIV.match(body)) and div.group(2):
            return self.fenced_div(i, end, div.group(1), div.group(2), div.group(3) or "")
        if (opened := _OPEN.match(body)) and (
            opened.group(1).lower() in _CONTAINERS or opened.group(1).lower() in _V2_CONTAINERS
        ):
            tag = opened.group(1)
            close = self.closing(i, end, tag)
            node = self.container(tag.lower(), parse_attrs(opened.group(2)), i + 1, close)
            return ([node] if node else []), min(close + 1, end)
        node = self.line_block(body, depth)
        stop = self.children_end(i, end)
        if self.v2 and node.type == "paragraph" and stop == i + 1 and not body.startswith("<"):
            # v2: "a single newline doesn't start a new block": the next lines of plain text
            # are this paragraph's, after a line break.
            texts = [body]
            while (
                stop < end
                and self.body(stop)
                and _depth(self.lines[stop]) == depth
                and self._plain(self.body(stop), depth)
            ):
                texts.append(self.body(stop))
                stop += 1
            return [_paragraph("<br>".join(texts)) if len(texts) > 1 else node], stop
        node.children.extend(self.blocks(i + 1, stop))
        return [node], stop

    def _plain(self, body: str, depth: int) -> bool:
        """Whether a line is plain text (a paragraph of its own in v1), not a block's start."""
        if _FENCE.match(body) or body.startswith("$$") or _DIV.match(body) or _OPEN.match(body):
            return False
        return self.line_block(body, depth).type == "paragraph" and not body.startswith("<")

    # -- multi-line constructs ------------------------------------------------------------

    def code(self, i: int, end: int, depth: int, fence: str, info: str) -> tuple[list[BlockNode], int]:
        j = i + 1
        while j < end:
            body = self.body(j)
            if body.startswith(fence[0] * len(fence)) and not body.strip(fence[0]):
                break
            j += 1
        source = "\n".join(_dedent(self.lines[k], depth) for k in range(i + 1, min(j, end)))
        language = info.strip().split("{", 1)[0].strip()
        data = {"rich_text": [_plain_item(source)] if source else [], "language": language, "caption": []}
        return [_node("code", data)], min(j + 1, end)

    def equation(self, i: int, end: int, depth: int, body: str) -> tuple[list[BlockNode], int]:
        if body != "$$":
            return [_node("equation", {"expression": body[2:-2].strip()})], i + 1
        j = i + 1
        while j < end and self.body(j) != "$$":
            j += 1
        expression = "\n".join(_dedent(self.lines[k], depth) for k in range(i + 1, min(j, end)))
        return [_node("equation", {"expression": expression.strip("\n")})], min(j + 1, end)

    def fenced_div(
        self, i: int, end: int, colons: str, name: str, attr_text: str
    ) -> tuple[list[BlockNode], int]:
        """``::: callout {icon="…" color="…"}`` … ``:::`` (Pandoc-style fenced div)."""
        level, j = 0, i
        while j < end:
            div = _DIV.match(self.body(j))
            if div and len(div.group(1)) >= 3:
                level += 1 if div.group(2) else -1
                if level == 0:
                    break
            j += 1
        node = self.container(name.lower(), parse_attrs(attr_text), i + 1, j)
        return ([node] if node else []), min(j + 1, end)

    def container(self, tag: str, attrs: dict[str, str], start: int, end: int) -> BlockNode | None:
        if tag == "table":
            return self.table(attrs, start, end)
        if tag == "details":
            return self.toggle(start, end)
        kids = self.blocks(start, end)
        if tag in _V2_CONTAINERS:
            return _v2_block(tag, kids)
        if tag == "callout":
            return _callout(attrs, kids)
        if tag == "columns":
            return _node("column_list", {}, kids)
        if tag == "column":
            return _node("column", {}, kids)
        if tag in ("synced_block", "synced_block_reference"):
            return _node("synced_block", {"synced_from": None}, kids)
        if tag == "tabs":
            return _node("tab", {}, kids)
        if tag == "tab":
            return _tab(attrs, kids)
        if tag == "meeting-notes":
            title: list[dict[str, Any]] = []
            if kids and kids[0].type == "paragraph":
                first = kids.pop(0)
                title = first.data.get("rich_text") or []
                kids = first.children + kids
            return _node("meeting_notes", {"title": title}, kids)
        return _node("column", {}, kids)  # summary / notes / transcript: their blocks

    def toggle(self, start: int, end: int) -> BlockNode:
        summary = ""
        first = start
        while first < end and not self.body(first):
            first += 1
        if first < end and (m := _ONE_LINE.match(self.body(first))) and m.group(1) == "summary":
            summary = m.group(3)
            first += 1
        return _node("toggle", _text_block(summary), self.blocks(first, end))

    def table(self, attrs: dict[str, str], start: int, end: int) -> BlockNode:
        inner = "\n".join(self.lines[start:end])
        rows = []
        for row in _TR.finditer(inner):
            cells = [parse_rich_text(_cell_text(c.group(1))) for c in _TD.finditer(row.group(1))]
            rows.append(_node("table_row", {"cells": cells}))
        data = {
            "table_width": max((len(r.data["cells"]) for r in rows), default=0),
            "has_column_header": attrs.get("header-row") == "true",
            "has_row_header": attrs.get("header-column") == "true",
        }
        return _node("table", data, rows)

    # -- one-line blocks --------------------------------------------------------------------

    def line_block(self, body: str, depth: int) -> BlockNode:
        if m := _SELF_CLOSING.match(body):
            return _self_closing(m.group(1).lower(), parse_attrs(m.group(2)))
        if (m := _ONE_LINE.match(body)) and (
            node := _tagged(m.group(1).lower(), parse_attrs(m.group(2)), m.group(3))
        ):
            return node
        # v2 "saves {color="..."} as literal" text: an attribute list is v1's alone.
        text, attrs = (body, {}) if self.v2 else _strip_attrs(body)
        if m := _HEADING.match(text):
            level = min(len(m.group(1)), 4)
            return _node(
                f"heading_{level}", _text_block(m.group(2) or "", is_toggleable=attrs.get("toggle") == "true")
            )
        if _DIVIDER.match(text):
            return _node("divider", {})
        if m := _TODO.match(text):
            return _node("to_do", _text_block(m.group(2) or "", checked=m.group(1) != " "))
        if m := _BULLET.match(text):
            return _node("bulleted_list_item", _text_block(m.group(1) or ""))
        if m := _NUMBER.match(text):
            return _node("numbered_list_item", _text_block(m.group(1) or ""))
        if m := _QUOTE.match(text):
            return _node("quote", _text_block(m.group(1) or ""))
        if m := _IMAGE.match(text):
            return _media("image", m.group(2).strip().split(" ", 1)[0], m.group(1))
        return _paragraph(text)


def _dedent(line: str, depth: int) -> str:
    """``line`` without up to ``depth`` leading tabs (a code line keeps deeper indentation)."""
    strip = min(depth, _depth(line))
    return line[strip:]


def _plain_item(value: str) -> dict[str, Any]:
    return {"type": "text", "text": {"content": value}, "plain_text": value, "href": None, "annotations": {}}


def _cell_text(raw: str) -> str:
    return " ".join(part.strip() for part in raw.split("\n") if part.strip())


def _callout(attrs: dict[str, str], kids: list[BlockNode]) -> BlockNode:
    """A callout: its first paragraph is its rich text, the rest its children; the ``icon``
    an emoji or ``:custom:`` (a URL or Notion icon path has no text, as on the walk)."""
    rich: list[dict[str, Any]] = []
    if kids and kids[0].type == "paragraph" and kids[0].data.get("rich_text"):
        first = kids.pop(0)
        rich = first.data["rich_text"]
        kids = first.children + kids
    icon_text = attrs.get("icon", "").strip()
    icon = None
    if icon_text and not icon_text.startswith(("http://", "https://", "/")):
        icon = {"type": "emoji", "emoji": icon_text}
    return _node("callout", {"rich_text": rich, "icon": icon, "color": "default"}, kids)


def _v2_block(tag: str, kids: list[BlockNode]) -> BlockNode:
    """v2's ``<p>``, ``<quote>``, ``<toggle>`` (colour attributes dropped): the first
    paragraph inside (or ``<summary>`` of a toggle) is the block's text, the rest its
    children."""
    rich: list[dict[str, Any]] = []
    if kids and kids[0].type == "paragraph":
        first = kids.pop(0)
        rich = first.data.get("rich_text") or []
        kids = first.children + kids
    block_type = {"p": "paragraph", "quote": "quote", "toggle": "toggle"}[tag]
    return _node(block_type, {"rich_text": rich, "color": "default"}, kids)


def _tab(attrs: dict[str, str], kids: list[BlockNode]) -> BlockNode:
    """One tab of ``<tabs>``: a paragraph holding its title (and icon), its blocks below."""
    data = _text_block(attrs.get("title", ""))
    if attrs.get("icon"):
        data["icon"] = {"type": "emoji", "emoji": attrs["icon"]}
    return _node("paragraph", data, kids)


def _media(kind: str, url: str, caption: str, document: str | None = None) -> BlockNode:
    """A media block; ``document``: the file document a Notion-hosted file's tag named
    (``data-document``, written by :func:`~integrations.notion.markdown.clean_markdown`)."""
    data: dict[str, Any] = {"type": "external", "external": {"url": url}, "caption": parse_rich_text(caption)}
    if document:
        data["document"] = document
    return _node(kind, data)


def _reference(kind: str, attrs: dict[str, str], inner: str) -> BlockNode:
    """``<page url>Title</page>`` / ``<database url>Title</database>``: a child page or
    database (not entered); a URL without an id becomes the same line as a link."""
    url = attrs.get("url") or attrs.get("data-source-url") or ""
    title = "".join(i.get("plain_text", "") for i in parse_rich_text(inner))
    block_type = "child_page" if kind == "page" else "child_database"
    object_id = notion_id(url) if url else None
    if object_id:
        return _node(block_type, {"title": title}, block_id=object_id)
    label = "Page" if kind == "page" else "Database"
    default = "Untitled" if kind == "page" else "Untitled database"
    items = [_plain_item(f"{label}: "), {**_plain_item(title or default), "href": url or None}]
    return _node("paragraph", {"rich_text": items})


def _tagged(tag: str, attrs: dict[str, str], inner: str) -> BlockNode | None:
    """A block written as one ``<tag …>inner</tag>`` line; ``None`` for inline tags (a
    paragraph that starts and ends with a mention or span)."""
    if tag in ("page", "database"):
        return _reference(tag, attrs, inner)
    if tag in _MEDIA_TAGS:
        return _media(tag, attrs.get("src") or attrs.get("url") or "", inner, attrs.get("data-document"))
    if tag in _LINK_TAGS:
        kind = "link_preview" if tag.startswith("link") else tag
        url = attrs.get("url") or attrs.get("src") or ""
        return _node(kind, {"url": url, "caption": parse_rich_text(inner)})
    if tag == "column":
        return _node("column", {}, [_paragraph(inner)])
    if tag == "summary":
        return _paragraph(inner)
    if tag in _V2_CONTAINERS:
        return _v2_block(tag, [_paragraph(inner)])
    return None


def _self_closing(tag: str, attrs: dict[str, str]) -> BlockNode:
    if tag in ("table_of_contents", "breadcrumb"):
        return _node(tag, {})
    if tag == "empty-block":
        return _paragraph("")
    if tag in ("unknown", "unsupported"):
        return _node("unsupported", {"block_type": attrs.get("alt") or attrs.get("type") or "unknown"})
    if tag in ("mention-page", "mention-database", "mention-data-source"):
        url = attrs.get("url", "")
        object_id = notion_id(url)
        if object_id:
            kind = "page_id" if tag == "mention-page" else "database_id"
            return _node("link_to_page", {"type": kind, kind: object_id})
    if tag in _MEDIA_TAGS or tag in _LINK_TAGS:
        node = _tagged(tag, attrs, "")
        if node is not None:
            return node
    return _paragraph("")  # a tag of no block we know, with no text: nothing to keep


def parse_enhanced(markdown: str, version: str = "v1") -> list[BlockNode]:
    """The block tree an enhanced-Markdown text describes (see the module doc); ``version``
    the ``markdown_version`` it was asked in (``v2``: Notion-flavored Markdown's shapes — blank
    lines between blocks, one newline a line break, ``<p>``/``<quote>``/``<toggle>`` with
    children, ``{color=…}`` as text). Never raises: what is not understood becomes a
    paragraph of its text (tags dropped)."""
    text = markdown.replace("\r\n", "\n")
    return _Parser(text, version).blocks(0, len(text.split("\n")))


def enhanced_to_markdown(markdown: str, page_id: str | None = None, version: str = "v1") -> str:
    """Enhanced Markdown as the block walk's Markdown (one trailing newline, or ``""``):
    :func:`parse_enhanced` then :func:`~integrations.notion.render.render_blocks` with the
    page id (for links to blocks of the page)."""
    return render_blocks(parse_enhanced(markdown, version), page_id=page_id)
