"""Builders of Notion content for the stand-in: rich text, blocks and page property values.

Shapes: https://developers.notion.com/reference/rich-text, https://developers.notion.com/reference/block
and https://developers.notion.com/reference/page-property-values. The block builders return specs for
:meth:`standins.notion_api.FakeNotion.add_page` (``{"type": t, t: {...}}`` plus optional
``"children"``); more builders (every block type, mentions, files) are in
:mod:`standins.notion_content`. :mod:`standins.notion_api` re-exports every name here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "BlockSpec",
    "RichTextInput",
    "block",
    "bookmark",
    "bulleted",
    "callout",
    "child_database",
    "child_page",
    "code",
    "date_property",
    "divider",
    "embed",
    "equation",
    "file",
    "heading",
    "image",
    "numbered",
    "paragraph",
    "people_property",
    "quote",
    "rich_text",
    "select_property",
    "status_property",
    "table",
    "text",
    "title_property",
    "to_do",
    "toggle",
]

#: A block as the helpers build it: the Notion block body (``{"type": t, t: {...}}``) plus an
#: optional ``"children"`` list of more specs. :meth:`FakeNotion.add_page` turns specs into
#: full block objects with ids, parents, timestamps and ``has_children``.
BlockSpec = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Rich text and block builders (shapes: https://developers.notion.com/reference/rich-text and
# https://developers.notion.com/reference/block)
# --------------------------------------------------------------------------------------------


def text(
    content: str,
    *,
    bold: bool = False,
    italic: bool = False,
    strikethrough: bool = False,
    underline: bool = False,
    code: bool = False,
    link: str | None = None,
) -> dict[str, Any]:
    """One rich text object of type ``text`` with the given annotations and optional link."""
    return {
        "type": "text",
        "text": {"content": content, "link": {"url": link} if link else None},
        "annotations": {
            "bold": bold,
            "italic": italic,
            "strikethrough": strikethrough,
            "underline": underline,
            "code": code,
            "color": "default",
        },
        "plain_text": content,
        "href": link,
    }


def rich_text(value: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rich text array: a plain string becomes one unannotated ``text`` item; a sequence of
    rich text objects (from :func:`text`) is copied as is."""
    if isinstance(value, str):
        return [text(value)] if value else []
    return [copy.deepcopy(item) for item in value]


RichTextInput = str | Sequence[dict[str, Any]]


def block(block_type: str, data: Mapping[str, Any], children: Iterable[BlockSpec] = ()) -> BlockSpec:
    """A block spec of any ``block_type`` with body ``data`` (use it for types without a
    helper, or for unknown types to test placeholders)."""
    spec: BlockSpec = {"type": block_type, block_type: dict(data)}
    kids = list(children)
    if kids:
        spec["children"] = kids
    return spec


def _text_block(
    block_type: str, value: RichTextInput, children: Iterable[BlockSpec], **extra: Any
) -> BlockSpec:
    return block(block_type, {"rich_text": rich_text(value), "color": "default", **extra}, children)


def paragraph(value: RichTextInput = "", *children: BlockSpec) -> BlockSpec:
    """A ``paragraph`` block (nested ``children`` are allowed, as in Notion)."""
    return _text_block("paragraph", value, children)


def heading(level: int, value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``heading_1`` … ``heading_4`` block; children make it a toggle heading."""
    if level not in (1, 2, 3, 4):
        raise ValueError(f"heading level must be 1, 2, 3 or 4, got {level}")
    return _text_block(f"heading_{level}", value, children, is_toggleable=bool(children))


def bulleted(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``bulleted_list_item`` block with optional nested children."""
    return _text_block("bulleted_list_item", value, children)


def numbered(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``numbered_list_item`` block with optional nested children."""
    return _text_block("numbered_list_item", value, children)


def to_do(value: RichTextInput, checked: bool = False, *children: BlockSpec) -> BlockSpec:
    """A ``to_do`` block."""
    return _text_block("to_do", value, children, checked=checked)


def toggle(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``toggle`` block; its content is its children."""
    return _text_block("toggle", value, children)


def quote(value: RichTextInput, *children: BlockSpec) -> BlockSpec:
    """A ``quote`` block."""
    return _text_block("quote", value, children)


def callout(value: RichTextInput, emoji: str | None = "💡", *children: BlockSpec) -> BlockSpec:
    """A ``callout`` block with an emoji icon (``None``: no icon)."""
    icon = {"type": "emoji", "emoji": emoji} if emoji else None
    return _text_block("callout", value, children, icon=icon)


def code(source: str, language: str = "plain text", caption: RichTextInput = "") -> BlockSpec:
    """A ``code`` block; ``language`` is one of Notion's names ("python", "plain text", …)."""
    return block(
        "code",
        {"rich_text": rich_text(source), "language": language, "caption": rich_text(caption)},
    )


def divider() -> BlockSpec:
    """A ``divider`` block."""
    return block("divider", {})


def equation(expression: str) -> BlockSpec:
    """An ``equation`` block holding a KaTeX ``expression``."""
    return block("equation", {"expression": expression})


def table(
    rows: Sequence[Sequence[RichTextInput]], *, column_header: bool = True, row_header: bool = False
) -> BlockSpec:
    """A ``table`` block whose children are ``table_row`` blocks, one per row of cells."""
    width = max((len(r) for r in rows), default=0)
    row_specs = [
        block("table_row", {"cells": [rich_text(c) for c in row] + [[]] * (width - len(row))}) for row in rows
    ]
    return block(
        "table",
        {"table_width": width, "has_column_header": column_header, "has_row_header": row_header},
        row_specs,
    )


def _file_body(url: str, caption: RichTextInput, *, hosted: bool) -> dict[str, Any]:
    if hosted:
        return {
            "type": "file",
            "file": {"url": url, "expiry_time": "2026-11-21T00:55:00.000Z"},
            "caption": rich_text(caption),
        }
    return {"type": "external", "external": {"url": url}, "caption": rich_text(caption)}


def image(url: str, caption: RichTextInput = "", *, hosted: bool = False) -> BlockSpec:
    """An ``image`` block (``hosted``: a Notion-hosted file with an expiring URL)."""
    return block("image", _file_body(url, caption, hosted=hosted))


def file(url: str, name: str = "", caption: RichTextInput = "", *, hosted: bool = True) -> BlockSpec:
    """A ``file`` block (an attachment) with an optional file ``name``."""
    body = _file_body(url, caption, hosted=hosted)
    if name:
        body["name"] = name
    return block("file", body)


def bookmark(url: str, caption: RichTextInput = "") -> BlockSpec:
    """A ``bookmark`` block."""
    return block("bookmark", {"url": url, "caption": rich_text(caption)})


def embed(url: str, caption: RichTextInput = "") -> BlockSpec:
    """An ``embed`` block."""
    return block("embed", {"url": url, "caption": rich_text(caption)})


def child_page(title: str, page_id: str | None = None) -> BlockSpec:
    """A ``child_page`` block (``page_id``: the id it gets, so it can match a page you add)."""
    spec = block("child_page", {"title": title})
    if page_id:
        spec["id"] = page_id
    return spec


def child_database(title: str, database_id: str | None = None) -> BlockSpec:
    """A ``child_database`` block (``database_id``: the id it gets)."""
    spec = block("child_database", {"title": title})
    if database_id:
        spec["id"] = database_id
    return spec


# Page property values (https://developers.notion.com/reference/page-property-values).


def title_property(value: RichTextInput) -> dict[str, Any]:
    """A ``title`` property value."""
    return {"id": "title", "type": "title", "title": rich_text(value)}


def select_property(name: str | None, prop_id: str = "sel") -> dict[str, Any]:
    """A ``select`` property value (``None``: empty)."""
    value = {"id": f"opt-{name}", "name": name, "color": "default"} if name else None
    return {"id": prop_id, "type": "select", "select": value}


def status_property(name: str, prop_id: str = "XGe%40") -> dict[str, Any]:
    """A ``status`` property value."""
    return {
        "id": prop_id,
        "type": "status",
        "status": {"id": f"opt-{name}", "name": name, "color": "default"},
    }


def date_property(start: str, end: str | None = None, prop_id: str = "dat") -> dict[str, Any]:
    """A ``date`` property value (ISO 8601 ``start``/``end``)."""
    return {
        "id": prop_id,
        "type": "date",
        "date": {"start": start, "end": end, "time_zone": None},
    }


def people_property(*user_ids: str, prop_id: str = "ppl") -> dict[str, Any]:
    """A ``people`` property value of partial users."""
    return {
        "id": prop_id,
        "type": "people",
        "people": [{"object": "user", "id": u} for u in user_ids],
    }
