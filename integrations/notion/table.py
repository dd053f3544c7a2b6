"""A data source as the table a person sees in Notion: one GFM row per page, the title linked
to the row's own document, then every property.

A row comes from one of two places and renders the same from both (docs/notion.md, "A data
source as a table"): a page object the API answered (``data_sources.query``) or the row's
stored document (its ``title``, ``url`` and ``metadata.properties``, which the row's page sync
wrote with :func:`~integrations.notion.properties.page_properties`). Each cell is
:func:`~integrations.notion.properties.property_cell` of that summary: one rule for both.

Rows are ordered by creation (``created_time``, then id): the API does not say a data source's
default sort (a data source object has no sorts; the views that hold sorts are another
endpoint, https://developers.notion.com/reference/data-source), and creation is the order
Notion shows a table without a sort. A table of more than :data:`SECTION_ROWS` rows is split
into sections of that many (``### Rows 1–500 of 5000``), each with its header row, so a reader
or a chunker never meets a 5 000-line table; nothing is cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from debounce.contract import Document
from integrations.notion.properties import page_properties, parse_time, property_cell, title_of
from integrations.notion.richtext import escape_markdown, link_target, notion_url

__all__ = ["SECTION_ROWS", "Row", "row_of_document", "row_of_page", "table_markdown"]

#: Rows per section of a large table.
SECTION_ROWS = 500


@dataclass(frozen=True)
class Row:
    """One row of a data source's table: the page's id, title, URL, summarised properties
    (``{name: property_value(...)}``, the title left out), ``created_time`` (ISO 8601, as
    Notion writes it) and last edit (aware UTC; ``None``: unknown)."""

    id: str
    title: str
    url: str | None
    properties: Mapping[str, Any] = field(default_factory=dict)
    created_time: str = ""
    last_edited: datetime | None = None


def row_of_page(page: Mapping[str, Any]) -> Row:
    """A row from a page object (``data_sources.query``'s results, or a search listing): the
    same title and properties its page sync writes to its document."""
    url = page.get("url")
    created = page.get("created_time")
    return Row(
        id=str(page.get("id") or ""),
        title=title_of(page) or "Untitled",
        url=url if isinstance(url, str) else None,
        properties=page_properties(page.get("properties")),
        created_time=created if isinstance(created, str) else "",
        last_edited=parse_time(page.get("last_edited_time")),
    )


def row_of_document(doc: Document) -> Row:
    """A row from the row's stored document (:func:`row_of_page` of the page it was synced
    from gives the same row)."""
    props = doc.metadata.get("properties")
    created = doc.metadata.get("created_time")
    return Row(
        id=doc.document_id,
        title=doc.title,
        url=doc.url,
        properties=props if isinstance(props, dict) else {},
        created_time=created if isinstance(created, str) else "",
        last_edited=doc.source_updated_at,
    )


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _title_cell(row: Row) -> str:
    label = escape_markdown(" ".join(row.title.split())).replace("|", "\\|") or "Untitled"
    return f"[{label}]({link_target(row.url or notion_url(row.id))})"


def table_markdown(
    title_name: str, columns: Sequence[str], rows: Sequence[Row], *, section_rows: int = SECTION_ROWS
) -> list[str]:
    """The rows as GFM table lines: a header (``title_name``, then ``columns``), a row per
    page ordered by creation (module doc); over ``section_rows`` rows, sections headed
    ``### Rows a–b of n`` each with the header again; ``["(no rows)"]`` when there are none."""
    if not rows:
        return ["(no rows)"]
    ordered = sorted(rows, key=lambda r: (r.created_time, r.id))
    header = [
        _line([escape_markdown(n).replace("|", "\\|") for n in (title_name, *columns)]),
        _line(["---"] * (1 + len(columns))),
    ]
    body = [_line([_title_cell(r), *(property_cell(r.properties.get(c)) for c in columns)]) for r in ordered]
    if len(body) <= section_rows:
        return [*header, *body]
    out: list[str] = []
    total = len(body)
    for start in range(0, total, section_rows):
        end = min(start + section_rows, total)
        if out:
            out.append("")
        out += [f"### Rows {start + 1}–{end} of {total}", "", *header, *body[start:end]]
    return out
