"""Notion blocks as Markdown (the page body).

Pure functions over the block objects ``blocks.children.list`` returns
(https://developers.notion.com/reference/block, every type of the reference of Notion-Version
2025-09-03 and later: paragraph, heading_1-4, list items, to_do, toggle, quote, callout, code,
equation, divider, table_of_contents, breadcrumb, column_list/column, table/table_row, tab,
image, video, audio, file, pdf, bookmark, embed, link_preview, link_to_page, child_page,
child_database, synced_block, template, meeting_notes/transcription, unsupported). Rich text is
:mod:`.richtext`; page properties are :mod:`.properties`. The rendering choices, with one
example per family, are in ``docs/notion.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from debounce.contract import FILE_KEY_PREFIX
from integrations.notion.richtext import (
    escape_markdown,
    link_target,
    notion_url,
    plain_text,
    render_rich_text,
)

__all__ = ["BlockNode", "render_blocks"]


@dataclass
class BlockNode:
    """A block object as ``blocks.children.list`` returns it, plus its fetched children."""

    block: dict[str, Any]
    children: list[BlockNode] = field(default_factory=list)

    @property
    def type(self) -> str:
        """The block ``type`` ("paragraph", "heading_1", …; "" if missing)."""
        value = self.block.get("type")
        return value if isinstance(value, str) else ""

    @property
    def data(self) -> dict[str, Any]:
        """The type-specific body (``block[block["type"]]``), ``{}`` if missing."""
        value = self.block.get(self.type)
        return value if isinstance(value, dict) else {}

    @property
    def id(self) -> str:
        """The block ``id`` ("" if missing)."""
        value = self.block.get("id")
        return value if isinstance(value, str) else ""


_BULLET_GROUP = frozenset({"bulleted_list_item", "to_do"})
_NUMBER_GROUP = frozenset({"numbered_list_item"})
#: Blocks whose children are separate Notion objects (synced as their own documents).
_NO_RECURSE = frozenset({"child_page", "child_database"})
#: Navigation-only blocks with no content of their own: rendered as nothing.
_SILENT = frozenset({"table_of_contents", "breadcrumb"})
#: Layout-only containers: their children, in order (columns left to right).
_CONTAINERS = frozenset({"column_list", "column", "synced_block", "tab"})
_HEADINGS = {"heading_1": 1, "heading_2": 2, "heading_3": 3, "heading_4": 4}
_MEDIA = frozenset({"image", "video", "audio", "file", "pdf"})
_MEDIA_LABELS = {"image": "Image", "video": "Video", "audio": "Audio", "file": "File", "pdf": "PDF"}


def hosted_file_document(data: Mapping[str, Any]) -> str | None:
    """The id of the file document of a media block's Notion-hosted file (``file:`` and the
    URL's path: its stable identity, :mod:`integrations.notion.files`), which the page's
    Markdown names so a consumer can follow it; the markdown path's tag carries it as
    ``document``. ``None`` for an external file or one without a URL."""
    named = data.get("document")
    if isinstance(named, str) and named.startswith(FILE_KEY_PREFIX):
        return named
    body = data.get("file") if data.get("type") == "file" else None
    url = body.get("url") if isinstance(body, Mapping) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    return FILE_KEY_PREFIX + urlsplit(url).path


_LINK_KINDS = {"page_id": "page", "database_id": "database", "comment_id": "comment"}
_CODE_LANGUAGE_ALIASES = {"plain text": "", "c++": "cpp", "c#": "csharp", "f#": "fsharp"}
#: Where an unknown block type may keep its text (checked in this order).
_TEXT_KEYS = ("rich_text", "text", "caption", "title")


def _list_group(block_type: str) -> str | None:
    if block_type in _BULLET_GROUP:
        return "bullet"
    if block_type in _NUMBER_GROUP:
        return "number"
    return None


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


def _quoted(lines: list[str]) -> list[str]:
    return [f"> {line}" if line else ">" for line in lines]


def _hard_breaks(text: str) -> list[str]:
    """Rendered rich text as Markdown lines: a line break inside the text becomes a hard
    break (``\\`` at the end of the line; an empty line becomes a lone ``\\`` so the block is
    not split). Lines are stripped (leading spaces would make indented code); leading and
    trailing empty lines are dropped."""
    lines = [line.strip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return [f"{line}\\" for line in lines[:-1]] + lines[-1:]


def _one_line(text: str) -> str:
    """Rendered rich text on one line (headings, labels): line breaks become spaces."""
    return " ".join(part.strip() for part in text.split("\n") if part.strip())


def _emoji(icon: Any) -> str:
    """An icon as text: the emoji, ``:name:`` for a custom emoji, else ``""`` (file and
    external icons are images; Notion's own icons have no text)."""
    if not isinstance(icon, dict):
        return ""
    if icon.get("type") == "emoji" and isinstance(icon.get("emoji"), str):
        return str(icon["emoji"])
    custom = icon.get("custom_emoji")
    if icon.get("type") == "custom_emoji" and isinstance(custom, dict) and custom.get("name"):
        return f":{custom['name']}:"
    return ""


def _bold_cell(cell: Any) -> Any:
    """A rich text array with every item bold (a row-header cell)."""
    if not isinstance(cell, list):
        return cell
    out: list[Any] = []
    for item in cell:
        if isinstance(item, dict):
            ann = item.get("annotations")
            item = {**item, "annotations": {**(ann if isinstance(ann, dict) else {}), "bold": True}}
        out.append(item)
    return out


def _collect_titles(nodes: Sequence[BlockNode], titles: dict[str, str]) -> None:
    """Titles known without a request: child pages/databases of the tree and the
    ``plain_text`` of page/database mentions, by compact id."""
    for node in nodes:
        if node.type in _NO_RECURSE and node.id:
            title = node.data.get("title")
            if isinstance(title, str) and title:
                titles.setdefault(node.id.replace("-", ""), title)
        _collect_mentions(node.data, titles)
        _collect_titles(node.children, titles)


def _collect_mentions(value: Any, titles: dict[str, str]) -> None:
    if isinstance(value, list):
        for item in value:
            _collect_mentions(item, titles)
    elif isinstance(value, dict):
        mention = value.get("mention")
        if value.get("type") == "mention" and isinstance(mention, dict):
            target = mention.get(str(mention.get("type")))
            text = value.get("plain_text")
            if mention.get("type") in ("page", "database") and isinstance(target, dict):
                if isinstance(target.get("id"), str) and isinstance(text, str) and text:
                    titles.setdefault(str(target["id"]).replace("-", ""), text)
            return
        for item in value.values():
            if isinstance(item, (list, dict)):
                _collect_mentions(item, titles)


class _Renderer:
    """Renders one page's block tree; knows the page id (for links to hosted files) and the
    titles found in the tree (for ``link_to_page``)."""

    def __init__(self, page_id: str | None, titles: Mapping[str, str]) -> None:
        self.page_id = page_id
        self.titles = titles

    # -- helpers ------------------------------------------------------------------------

    def text_lines(self, data: Mapping[str, Any], key: str = "rich_text") -> list[str]:
        return _hard_breaks(render_rich_text(data.get(key)))

    def with_children(self, lines: list[str], node: BlockNode) -> list[str]:
        """``lines`` then, after a blank line, the node's children (flattened, not indented)."""
        kids = self.nodes(node.children) if node.children else []
        if not kids:
            return lines
        return [*lines, "", *kids] if lines else kids

    def meeting_notes(self, node: BlockNode, data: Mapping[str, Any]) -> list[str]:
        """A ``meeting_notes`` block (API 2026-03-11; ``transcription`` before): ``Meeting
        notes: <title>``, then its summary and notes (the children its ``children`` object
        names, or every child when it names none), **without the transcript** (the child named
        ``transcript_block_id``): the markdown endpoint leaves transcripts out unless asked
        (``include_transcript``, default false), so both paths write the same document, and
        a transcript is long verbatim speech of the attendees, whose summary and notes are
        what a reader searches (docs/notion.md, "Meeting notes")."""
        title = _one_line(render_rich_text(data.get("title")))
        refs = data.get("children")
        transcript = refs.get("transcript_block_id") if isinstance(refs, Mapping) else None
        kept = [c for c in node.children if not transcript or c.id != transcript]
        shown = BlockNode(node.block, kept)
        return self.with_children([f"Meeting notes: {title}" if title else "Meeting notes"], shown)

    def block_link(self, node: BlockNode) -> str:
        """A stable link to the block in its page, ``""`` when the page is unknown."""
        return notion_url(self.page_id, node.id or None) if self.page_id else ""

    # -- block families -----------------------------------------------------------------

    def list_item(self, marker: str, node: BlockNode, indent: int | None = None) -> list[str]:
        """A list item: ``marker`` + text; continuation lines and children indented by
        ``indent`` spaces (default: the marker's width, CommonMark's content column)."""
        first, *rest = self.text_lines(node.data) or [""]
        pad = " " * (len(marker) if indent is None else indent)
        lines = [f"{marker}{first}".rstrip(), *_indent(rest, pad)]
        if node.children:
            kids = self.nodes(node.children)
            tight = _list_group(node.children[0].type) is not None
            lines += ([] if tight else [""]) + _indent(kids, pad)
        return lines

    def table(self, node: BlockNode) -> list[str]:
        """GFM table. ``has_column_header``: the first row is the header; otherwise an empty
        header row (GFM needs one). ``has_row_header``: each row's first cell is bold."""
        data = node.data
        row_header = bool(data.get("has_row_header"))
        rows: list[list[str]] = []
        for row in node.children:
            cells = row.data.get("cells")
            if row.type != "table_row" or not isinstance(cells, list):
                continue
            if row_header and cells and (rows or not data.get("has_column_header")):
                cells = [_bold_cell(cells[0]), *cells[1:]]
            rows.append([self.cell(cell) for cell in cells])
        if not rows:
            return []
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        if not data.get("has_column_header"):
            rows.insert(0, [""] * width)

        def fmt(cells: list[str]) -> str:
            return "| " + " | ".join(cells) + " |"

        return [fmt(rows[0]), fmt(["---"] * width), *(fmt(r) for r in rows[1:])]

    @staticmethod
    def cell(cell: Any) -> str:
        text = render_rich_text(cell, line_starts=False).strip()
        # A line break inside a cell: a space (GFM cells are one line; no raw <br>).
        return " ".join(part.strip() for part in text.replace("|", "\\|").split("\n") if part.strip())

    def media(self, node: BlockNode) -> list[str]:
        """Image, video, audio, file, pdf. An ``external`` file keeps its URL. A Notion-hosted
        file (``type: "file"``) has a signed URL that expires in about an hour and changes on
        every fetch: it is never written; the link goes to the block in its page instead."""
        t, data = node.type, node.data
        kind = data.get("type")
        body = data.get(kind) if isinstance(kind, str) else None
        url = ""
        if kind == "external" and isinstance(body, dict) and isinstance(body.get("url"), str):
            url = str(body["url"])
        hosted = kind != "external"
        caption = render_rich_text(data.get("caption"))
        name = data.get("name") if isinstance(data.get("name"), str) else ""
        if t == "image" and not hosted:
            alt = escape_markdown(_one_line(plain_text(data.get("caption")))) or "image"
            return [f"![{alt}]({link_target(url)})"]
        kind_label = _MEDIA_LABELS.get(t, t)
        label = _one_line(caption) or escape_markdown(str(name))
        if t == "image" and label:  # not shown as an image: say what it is
            label = f"{kind_label}: {label}"
        label = label or kind_label
        target = self.block_link(node) if hosted else url
        line = f"[{label}]({link_target(target)})" if target else label
        document = hosted_file_document(data)
        return [f"{line} · document `{document}`" if document else line]

    def link_to_page(self, node: BlockNode) -> list[str]:
        """``Link to page: [Title](url)`` when the title is in the tree, else
        ``[Link to page](url)`` (no request is spent on it); database and comment alike."""
        data = node.data
        kind = str(data.get("type") or "")
        target = data.get(kind)
        label = f"Link to {_LINK_KINDS.get(kind, 'page')}"
        if not isinstance(target, str) or not target:
            return [label]
        if kind == "comment_id":  # a comment has no URL of its own: link the block
            url = self.block_link(node)
            return [f"[{label}]({url})" if url else label]
        title = self.titles.get(target.replace("-", ""))
        if title:
            return [f"{label}: [{escape_markdown(title)}]({notion_url(target)})"]
        return [f"[{label}]({notion_url(target)})"]

    def unknown(self, node: BlockNode) -> list[str]:
        """A type this code does not know: its text if it has any (under ``rich_text``,
        ``text``, ``caption`` or ``title``), else a visible placeholder; children render."""
        data = node.data
        for key in _TEXT_KEYS:
            value = data.get(key)
            if isinstance(value, list) and plain_text(value).strip():
                return self.with_children(self.text_lines(data, key), node)
            if isinstance(value, str) and value.strip():
                return self.with_children(_hard_breaks(escape_markdown(value)), node)
        label = node.type or "unknown"
        if node.type == "unsupported" and isinstance(data.get("block_type"), str):
            label = str(data["block_type"])
        return self.with_children([f"[unsupported Notion block: {label}]"], node)

    # -- dispatch -----------------------------------------------------------------------

    def node(self, node: BlockNode, number: int) -> list[str]:
        """Markdown lines of one block (``number``: its position in a numbered list)."""
        t, data = node.type, node.data
        if t == "paragraph":
            lines = self.text_lines(data)
            icon = _emoji(data.get("icon"))
            if icon:
                lines = [f"{icon} {lines[0]}" if lines else icon, *lines[1:]]
            return self.with_children(lines, node)
        if t in _HEADINGS:
            text = _one_line(render_rich_text(data.get("rich_text")))
            return self.with_children([f"{'#' * _HEADINGS[t]} {text}".rstrip()], node)
        if t == "bulleted_list_item":
            return self.list_item("- ", node)
        if t == "numbered_list_item":
            return self.list_item(f"{number}. ", node)
        if t == "to_do":
            # A task item's content column is after "- ": nest its children by 2, not 6.
            return self.list_item("- [x] " if data.get("checked") else "- [ ] ", node, indent=2)
        if t == "toggle":
            # No HTML (<details> is not CommonMark/GFM and is shown as text where raw HTML is
            # off): the summary as a paragraph, then its children, as for toggle headings.
            return self.with_children(self.text_lines(data), node)
        if t in ("quote", "callout"):
            lines = self.text_lines(data)
            icon = _emoji(data.get("icon")) if t == "callout" else ""
            if icon:
                lines = [f"{icon} {lines[0]}" if lines else icon, *lines[1:]]
            return _quoted(self.with_children(lines, node))
        if t == "code":
            return self.code(data)
        if t == "divider":
            return ["---"]
        if t == "equation":
            return ["$$", str(data.get("expression") or ""), "$$"]
        if t == "table":
            return self.table(node)
        if t == "table_row":  # only reached outside a table
            cells = data.get("cells")
            return ["| " + " | ".join(self.cell(c) for c in cells or []) + " |"]
        if t in _MEDIA:
            return self.media(node)
        if t in ("bookmark", "embed", "link_preview"):
            url = str(data.get("url") or "")
            label = _one_line(render_rich_text(data.get("caption"))) or escape_markdown(url) or t
            return [f"[{label}]({link_target(url)})" if url else label]
        if t in _NO_RECURSE:
            default = "Untitled" if t == "child_page" else "Untitled database"
            title = escape_markdown(str(data.get("title") or default))
            kind = "Page" if t == "child_page" else "Database"
            return [f"{kind}: [{title}]({notion_url(node.id)})"]
        if t == "link_to_page":
            return self.link_to_page(node)
        if t in _CONTAINERS:
            return self.with_children([], node)
        if t == "template":
            return self.with_children(self.text_lines(data), node)
        if t in ("meeting_notes", "transcription"):
            return self.meeting_notes(node, data)
        if t in _SILENT:
            return []
        return self.unknown(node)

    @staticmethod
    def code(data: Mapping[str, Any]) -> list[str]:
        source = plain_text(data.get("rich_text"))
        raw_lang = str(data.get("language") or "").strip().lower()
        lang = _CODE_LANGUAGE_ALIASES.get(raw_lang, raw_lang.replace(" ", "-"))
        fence = "```"
        while fence in source:
            fence += "`"
        lines = [f"{fence}{lang}", *source.split("\n"), fence]
        caption = _hard_breaks(render_rich_text(data.get("caption")))
        return [*lines, "", *caption] if caption else lines

    def nodes(self, nodes: Sequence[BlockNode]) -> list[str]:
        out: list[str] = []
        prev_group: str | None = None
        prev_type: str | None = None
        number = 0
        for node in nodes:
            group = _list_group(node.type)
            same = node.type == "numbered_list_item" and prev_type == node.type
            number = number + 1 if same else 1
            lines = self.node(node, number)
            if lines:
                if out and (group is None or group != prev_group):
                    out.append("")
                out.extend(lines)
            prev_group, prev_type = group, node.type
        return out


def render_blocks(nodes: Sequence[BlockNode], *, page_id: str | None = None) -> str:
    """Markdown of a block tree (the page body), ending with one newline, or ``""``.

    ``page_id`` is the page the blocks belong to: a Notion-hosted file then links to
    ``https://www.notion.so/<page>#<block>`` (without it, only its name is written). Every
    block type of the reference renders (see the module doc and ``docs/notion.md``); an
    unknown type keeps its text, or becomes ``[unsupported Notion block: <type>]``, and its
    children still render. Never raises.
    """
    titles: dict[str, str] = {}
    _collect_titles(nodes, titles)
    lines = _Renderer(page_id, titles).nodes(nodes)
    return "\n".join(lines).strip("\n") + "\n" if lines else ""
