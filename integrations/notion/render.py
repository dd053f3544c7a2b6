"""Notion content as Markdown: blocks, rich text, page properties, database schemas.

Pure functions; shapes: https://developers.notion.com/reference/block,
https://developers.notion.com/reference/rich-text,
https://developers.notion.com/reference/page-property-values and
https://developers.notion.com/reference/data-source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["BlockNode", "render_blocks", "render_rich_text"]


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


def _plain(items: Any) -> str:
    """Concatenated ``plain_text`` of a rich text array (no Markdown)."""
    if not isinstance(items, list):
        return ""
    return "".join(_item_text(i) for i in items if isinstance(i, dict))


def _item_text(item: Mapping[str, Any]) -> str:
    plain = item.get("plain_text")
    if isinstance(plain, str):
        return plain
    kind = item.get("type")
    body = item.get(kind) if isinstance(kind, str) else None
    if isinstance(body, dict):
        if isinstance(body.get("content"), str):
            return str(body["content"])
        if isinstance(body.get("expression"), str):
            return str(body["expression"])
    return ""


def _code_span(value: str) -> str:
    fence = "`"
    while fence in value:
        fence += "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def render_rich_text(items: Any) -> str:
    """Markdown of a Notion rich text array.

    Annotations map to ``**bold**``, ``*italic*``, ``~~strike~~`` and `` `code` ``; a link
    (``href``) to ``[text](url)``; an inline equation to ``$expr$``. Underline and colours have
    no Markdown and are dropped. Adjacent items with the same annotations and link are merged
    first (Notion splits runs freely), and markers are kept inside surrounding whitespace so
    ``**bold **`` never appears. Text is not escaped.
    """
    if not isinstance(items, list):
        return ""
    runs: list[tuple[str, tuple[bool, bool, bool, bool], str | None, bool]] = []
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
        href = item.get("href") if isinstance(item.get("href"), str) else None
        if item.get("type") == "equation":
            expr = _item_text(item)
            if expr:
                runs.append((expr, key, href, True))
            continue
        content = _item_text(item)
        if not content:
            continue
        if runs and not runs[-1][3] and runs[-1][1] == key and runs[-1][2] == href:
            runs[-1] = (runs[-1][0] + content, key, href, False)
        else:
            runs.append((content, key, href, False))
    out: list[str] = []
    for content, (bold, italic, strike, is_code), href, is_equation in runs:
        core = content.strip()
        if not core:
            out.append(content)
            continue
        lead = content[: len(content) - len(content.lstrip())]
        trail = content[len(content.rstrip()) :]
        if is_equation:
            core = f"${core}$"
        elif is_code:
            core = _code_span(core)
        if strike:
            core = f"~~{core}~~"
        if italic:
            core = f"*{core}*"
        if bold:
            core = f"**{core}**"
        if href:
            core = f"[{core}]({href})"
        out.append(f"{lead}{core}{trail}")
    return "".join(out)


def _notion_url(object_id: str) -> str:
    return f"https://www.notion.so/{object_id.replace('-', '')}"


def _file_url(data: Mapping[str, Any]) -> str:
    kind = data.get("type")
    body = data.get(kind) if isinstance(kind, str) else None
    if isinstance(body, dict) and isinstance(body.get("url"), str):
        return str(body["url"])
    return str(data.get("url") or "")


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


_BULLET_GROUP = frozenset({"bulleted_list_item", "to_do"})
_NUMBER_GROUP = frozenset({"numbered_list_item"})
#: Blocks whose children are separate Notion objects (synced as their own documents).
_NO_RECURSE = frozenset({"child_page", "child_database"})
#: Navigation-only blocks with no content of their own: rendered as nothing.
_SILENT = frozenset({"table_of_contents", "breadcrumb"})
_CODE_LANGUAGE_ALIASES = {"plain text": "", "c++": "cpp", "c#": "csharp", "f#": "fsharp"}


def _list_group(block_type: str) -> str | None:
    if block_type in _BULLET_GROUP:
        return "bullet"
    if block_type in _NUMBER_GROUP:
        return "number"
    return None


def _render_children_into(lines: list[str], node: BlockNode) -> list[str]:
    """``lines`` then, after a blank line, the node's children (flattened, not indented)."""
    if not node.children:
        return lines
    kids = _render_nodes(node.children)
    if not kids:
        return lines
    return [*lines, "", *kids] if lines else kids


def _list_item(marker: str, node: BlockNode, indent: int | None = None) -> list[str]:
    """A list item: ``marker`` + text; continuation lines and children indented by
    ``indent`` spaces (default: the marker's width, CommonMark's content column)."""
    first, *rest = render_rich_text(node.data.get("rich_text")).split("\n")
    pad = " " * (len(marker) if indent is None else indent)
    lines = [f"{marker}{first}".rstrip(), *_indent(rest, pad)]
    if node.children:
        kids = _render_nodes(node.children)
        tight = _list_group(node.children[0].type) is not None
        lines += ([] if tight else [""]) + _indent(kids, pad)
    return lines


def _quoted(lines: list[str]) -> list[str]:
    return [f"> {line}" if line else ">" for line in lines]


def _table(node: BlockNode) -> list[str]:
    rows: list[list[str]] = []
    for row in node.children:
        cells = row.data.get("cells")
        if row.type != "table_row" or not isinstance(cells, list):
            continue
        rows.append(
            [render_rich_text(cell).replace("|", "\\|").replace("\n", "<br>") for cell in cells]
        )
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]

    def fmt(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [fmt(rows[0]), fmt(["---"] * width), *(fmt(r) for r in rows[1:])]


def _link_block(label: str, url: str, *, image: bool = False) -> list[str]:
    if not url:
        return [f"[{label}]"]
    return [f"{'!' if image else ''}[{label}]({url})"]


def _render_node(node: BlockNode, number: int) -> list[str]:
    """Markdown lines of one block (``number``: its position in a numbered list)."""
    t, data = node.type, node.data
    rich = render_rich_text(data.get("rich_text"))
    if t == "paragraph":
        return _render_children_into(rich.split("\n") if rich else [], node)
    if t in ("heading_1", "heading_2", "heading_3"):
        return _render_children_into([f"{'#' * int(t[-1])} {rich}".rstrip()], node)
    if t == "bulleted_list_item":
        return _list_item("- ", node)
    if t == "numbered_list_item":
        return _list_item(f"{number}. ", node)
    if t == "to_do":
        # A task item's content column is after "- ": nest its children by 2, not 6.
        return _list_item("- [x] " if data.get("checked") else "- [ ] ", node, indent=2)
    if t == "toggle":
        body = _render_nodes(node.children)
        return [
            "<details>",
            f"<summary>{rich}</summary>",
            *(["", *body] if body else []),
            "",
            "</details>",
        ]
    if t == "quote":
        return _quoted(_render_children_into(rich.split("\n"), node))
    if t == "callout":
        icon = data.get("icon")
        emoji = icon.get("emoji") if isinstance(icon, dict) else None
        head = f"{emoji} {rich}" if isinstance(emoji, str) and emoji else rich
        return _quoted(_render_children_into(head.split("\n"), node))
    if t == "code":
        source = _plain(data.get("rich_text"))
        raw_lang = str(data.get("language") or "").strip().lower()
        lang = _CODE_LANGUAGE_ALIASES.get(raw_lang, raw_lang.replace(" ", "-"))
        fence = "```"
        while fence in source:
            fence += "`"
        lines = [f"{fence}{lang}", *source.split("\n"), fence]
        caption = render_rich_text(data.get("caption"))
        return [*lines, "", caption] if caption else lines
    if t == "divider":
        return ["---"]
    if t == "equation":
        return ["$$", str(data.get("expression") or ""), "$$"]
    if t == "table":
        return _table(node)
    if t == "table_row":  # only reached outside a table
        cells = data.get("cells")
        if not isinstance(cells, list):
            cells = []
        return ["| " + " | ".join(render_rich_text(c) for c in cells) + " |"]
    if t == "image":
        alt = _plain(data.get("caption")) or "image"
        return _link_block(alt, _file_url(data), image=True)
    if t in ("file", "pdf", "video", "audio"):
        name = data.get("name") if isinstance(data.get("name"), str) else ""
        label = render_rich_text(data.get("caption")) or str(name) or t
        return _link_block(label, _file_url(data))
    if t in ("bookmark", "embed", "link_preview"):
        url = str(data.get("url") or "")
        return _link_block(render_rich_text(data.get("caption")) or url or t, url)
    if t == "child_page":
        title = str(data.get("title") or "Untitled")
        return [f"Page: [{title}]({_notion_url(str(node.block.get('id', '')))})"]
    if t == "child_database":
        title = str(data.get("title") or "Untitled database")
        return [f"Database: [{title}]({_notion_url(str(node.block.get('id', '')))})"]
    if t == "link_to_page":
        kind = data.get("type")
        target = data.get(kind) if isinstance(kind, str) else None
        if isinstance(target, str):
            return [f"Link: [{kind}]({_notion_url(target)})"]
        return ["[link to page]"]
    if t in ("column_list", "column", "synced_block", "template"):
        lines = rich.split("\n") if rich else []
        return _render_children_into(lines, node)
    if t in _SILENT:
        return []
    label = t or "unknown"
    return _render_children_into([f"[unsupported Notion block: {label}]"], node)


def _render_nodes(nodes: Sequence[BlockNode]) -> list[str]:
    out: list[str] = []
    prev_group: str | None = None
    prev_type: str | None = None
    number = 0
    for node in nodes:
        group = _list_group(node.type)
        number = number + 1 if node.type == "numbered_list_item" and prev_type == node.type else 1
        lines = _render_node(node, number)
        if lines:
            if out:
                if group is None or group != prev_group:
                    out.append("")
            out.extend(lines)
        prev_group, prev_type = group, node.type
    return out


def render_blocks(nodes: Sequence[BlockNode]) -> str:
    """Markdown of a block tree (the page body), ending with one newline, or ``""``.

    Headings 1-3, paragraphs, bulleted/numbered/to-do lists (nested by indentation,
    consecutive items of one list kept tight), toggles (``<details>``), quotes and callouts
    (``>``), fenced code with its language, dividers, ``$$`` equations, tables (first row as
    header), image/file/bookmark/embed links, child page/database links. An unknown block
    becomes ``[unsupported Notion block: <type>]``; it never raises.
    """
    lines = _render_nodes(nodes)
    return "\n".join(lines).strip("\n") + "\n" if lines else ""


# ============================================================================================
# Properties and schema summaries
# ============================================================================================


def _title_of(page: Mapping[str, Any]) -> str:
    props = page.get("properties")
    if isinstance(props, dict):
        for value in props.values():
            if isinstance(value, dict) and value.get("type") == "title":
                return _plain(value.get("title")).strip()
    return ""


def _user_id(value: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    return None


def _property_value(prop: Mapping[str, Any]) -> Any:
    """A JSON-simple summary of one page property value
    (https://developers.notion.com/reference/page-property-values)."""
    kind = prop.get("type")
    value = prop.get(kind) if isinstance(kind, str) else None
    if kind in ("title", "rich_text"):
        return _plain(value)
    if kind in ("select", "status"):
        return value.get("name") if isinstance(value, dict) else None
    if kind == "multi_select":
        return [o.get("name") for o in value or [] if isinstance(o, dict)]
    if kind in ("people", "relation"):
        return [i for i in (_user_id(v) for v in value or []) if i]
    if kind in ("created_by", "last_edited_by"):
        return _user_id(value)
    if kind == "date":
        if not isinstance(value, dict):
            return None
        start, end = value.get("start"), value.get("end")
        return f"{start}/{end}" if end else start
    if kind == "formula":
        if not isinstance(value, dict):
            return None
        inner = value.get(value.get("type", ""))
        return inner.get("start") if isinstance(inner, dict) else inner
    if kind == "unique_id":
        if not isinstance(value, dict):
            return None
        prefix, num = value.get("prefix"), value.get("number")
        return f"{prefix}-{num}" if prefix else num
    if kind == "files":
        return [f.get("name") for f in value or [] if isinstance(f, dict)]
    if kind == "rollup":
        if not isinstance(value, dict):
            return None
        inner = value.get(value.get("type", ""))
        return inner if isinstance(inner, (int, float, str)) else None
    if kind == "verification":
        return value.get("state") if isinstance(value, dict) else None
    return value if isinstance(value, (str, int, float, bool)) or value is None else None


def _parent_summary(parent: Any) -> dict[str, Any]:
    """``{"type": "page_id", "id": "…"}`` from a parent object (``workspace`` has no id)."""
    if not isinstance(parent, dict):
        return {}
    kind = parent.get("type")
    out: dict[str, Any] = {"type": kind}
    value = parent.get(kind) if isinstance(kind, str) else None
    if isinstance(value, str):
        out["id"] = value
    if isinstance(parent.get("database_id"), str) and kind != "database_id":
        out["database_id"] = parent["database_id"]
    return out


def _parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``2026-11-20T23:55:00.000Z``) as aware UTC, else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _schema_details(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    config = prop.get(kind) if isinstance(kind, str) else None
    if not isinstance(config, dict):
        return ""
    options = config.get("options")
    if isinstance(options, list):
        return ", ".join(str(o.get("name")) for o in options if isinstance(o, dict))
    if kind == "number" and config.get("format"):
        return str(config["format"])
    if kind == "formula" and config.get("expression"):
        return _code_span(str(config["expression"]))
    if kind == "relation":
        target = config.get("data_source_id") or config.get("database_id")
        return f"→ {target}" if target else ""
    if kind == "rollup":
        return " ".join(
            str(config[k]) for k in ("function", "rollup_property_name") if config.get(k)
        )
    return ""


def _schema_markdown(data_source: Mapping[str, Any]) -> list[str]:
    props = data_source.get("properties")
    if not isinstance(props, dict) or not props:
        return ["(no properties)"]
    lines = ["| Property | Type | Details |", "| --- | --- | --- |"]
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        cells = [str(name), str(prop.get("type") or ""), _schema_details(prop)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def _schema_summary(data_source: Mapping[str, Any]) -> dict[str, str]:
    props = data_source.get("properties")
    if not isinstance(props, dict):
        return {}
    return {str(k): str(v.get("type")) for k, v in props.items() if isinstance(v, dict)}

