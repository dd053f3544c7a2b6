"""Content for the Notion stand-in: builders for every block, rich text and property type
of the reference, and the re-signing of Notion-hosted file URLs.

Shapes: https://developers.notion.com/reference/block, .../rich-text,
.../page-property-values and .../file-object (checked against the types of
``@notionhq/client``, ``src/api-endpoints/{blocks,common,pages}.ts``). The block builders
return specs for :meth:`standins.notion_api.FakeNotion.add_page` (``{"type": t, t: {...}}``
plus optional ``"children"``).

Notion-hosted files (``{"type": "file", "file": {"url", "expiry_time"}}``) carry a signed
URL that expires after about an hour and is different on every response; :func:`resign_files`
does the same to a response body, so a sync that stores such a URL sees a change each time.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from standins.notion_blocks import (
    BlockSpec,
    RichTextInput,
    block,
    bookmark,
    bulleted,
    callout,
    child_database,
    child_page,
    code,
    divider,
    embed,
    equation,
    heading,
    numbered,
    paragraph,
    quote,
    rich_text,
    table,
    text,
    to_do,
    toggle,
)

__all__ = [
    "EVERY_BLOCK_IDS",
    "SIGNED_URL_LIFETIME",
    "column_list",
    "date_mention",
    "every_block_type",
    "files_property",
    "hosted_file",
    "inline_equation",
    "link_to_page",
    "media",
    "mention",
    "page_mention",
    "property_value",
    "resign_files",
    "rollup_property",
    "synced_block",
    "user_mention",
]

#: Lifetime of a signed file URL (Notion's is about an hour).
SIGNED_URL_LIFETIME = timedelta(hours=1)


def _rich(plain: str, body: dict[str, Any], kind: str, href: str | None) -> dict[str, Any]:
    item = text(plain)
    del item["text"]
    item.update({"type": kind, kind: body, "href": href})
    return item


def mention(kind: str, value: Any, plain: str, href: str | None = None) -> dict[str, Any]:
    """A ``mention`` rich text item of ``kind`` (``user``, ``page``, ``database``, ``date``,
    ``link_preview``, ``link_mention``, ``template_mention``, ``custom_emoji``) whose body is
    ``value``, shown as ``plain``."""
    return _rich(plain, {"type": kind, kind: value}, "mention", href)


def page_mention(page_id: str, title: str) -> dict[str, Any]:
    """A page mention (``href`` is the page's Notion URL, as the API sends it)."""
    href = f"https://www.notion.so/{page_id.replace('-', '')}"
    return mention("page", {"id": page_id}, title, href)


def user_mention(user_id: str, name: str) -> dict[str, Any]:
    """A user mention (``plain_text`` is ``@name``; no ``href``)."""
    return mention("user", {"object": "user", "id": user_id}, f"@{name}")


def date_mention(start: str, end: str | None = None) -> dict[str, Any]:
    """A date mention; ``plain_text`` as Notion writes it (``start → end``)."""
    plain = f"{start} → {end}" if end else start
    return mention("date", {"start": start, "end": end, "time_zone": None}, plain)


def inline_equation(expression: str) -> dict[str, Any]:
    """An ``equation`` rich text item."""
    return _rich(expression, {"expression": expression}, "equation", None)


def hosted_file(url: str) -> dict[str, Any]:
    """A Notion-hosted file object (``type: "file"``) with a (to be re-signed) URL."""
    return {"type": "file", "file": {"url": url, "expiry_time": "2026-11-21T00:55:00.000Z"}}


def media(
    kind: str,
    url: str,
    caption: RichTextInput = "",
    *,
    hosted: bool = True,
    name: str | None = None,
) -> BlockSpec:
    """An ``image``/``video``/``audio``/``file``/``pdf`` block; ``hosted``: a Notion-hosted
    file (signed URL), else ``external``; ``name`` only exists on ``file`` blocks."""
    source = hosted_file(url) if hosted else {"type": "external", "external": {"url": url}}
    body: dict[str, Any] = {**source, "caption": rich_text(caption)}
    if name is not None:
        body["name"] = name
    return block(kind, body)


def link_to_page(target_id: str, kind: str = "page_id") -> BlockSpec:
    """A ``link_to_page`` block to a page (``page_id``), database or comment."""
    return block("link_to_page", {"type": kind, kind: target_id})


def synced_block(children: Iterable[BlockSpec], original: str | None = None) -> BlockSpec:
    """A ``synced_block``: the original (``original=None``) or a reference to ``original``
    (Notion lists the original's children under a reference)."""
    synced_from = {"type": "block_id", "block_id": original} if original else None
    return block("synced_block", {"synced_from": synced_from}, children)


def column_list(*columns: Sequence[BlockSpec]) -> BlockSpec:
    """A ``column_list`` of ``column`` blocks, each holding the given blocks."""
    return block("column_list", {}, [block("column", {}, list(col)) for col in columns])


def property_value(kind: str, value: Any, prop_id: str = "p") -> dict[str, Any]:
    """Any page property value: ``{"id", "type": kind, kind: value}``."""
    return {"id": prop_id, "type": kind, kind: value}


def files_property(*files: tuple[str, str, bool], prop_id: str = "fil") -> dict[str, Any]:
    """A ``files`` property of ``(name, url, hosted)`` files."""
    items = [
        {"name": name, **(hosted_file(url) if hosted else {"type": "external", "external": {"url": url}})}
        for name, url, hosted in files
    ]
    return property_value("files", items, prop_id)


def rollup_property(kind: str, value: Any, function: str = "show_original") -> dict[str, Any]:
    """A ``rollup`` property of ``kind`` ``number``/``date``/``array``/``unsupported``/
    ``incomplete`` (an ``array`` holds property values without ids)."""
    return property_value("rollup", {"type": kind, kind: value, "function": function}, "rol")


def resign_files(value: Any, now: datetime | None = None) -> Any:
    """A copy of a response body in which every Notion-hosted file object gets a new signed
    URL (same path, new ``X-Amz-*`` query) and an ``expiry_time`` an hour from ``now``, as
    Notion does on every response. Other values are returned as they are (shared)."""
    if isinstance(value, list):
        return [resign_files(v, now) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: resign_files(v, now) for k, v in value.items()}
    body = out.get("file")
    if out.get("type") == "file" and isinstance(body, dict) and isinstance(body.get("url"), str):
        moment = now or datetime.now(UTC)
        base = str(body["url"]).split("?", 1)[0]
        stamp = moment.strftime("%Y%m%dT%H%M%SZ")
        query = (
            f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date={stamp}&X-Amz-Expires=3600"
            f"&X-Amz-Signature={uuid.uuid4().hex}"
        )
        expiry = (moment + SIGNED_URL_LIFETIME).isoformat(timespec="milliseconds")
        out["file"] = {**body, "url": f"{base}?{query}", "expiry_time": expiry.replace("+00:00", "Z")}
    return out


#: Ids of :func:`every_block_type`'s blocks that its rendering refers to.
EVERY_BLOCK_IDS = {
    "child_page": "0f1e2d3c-4b5a-4968-8776-655443322111",
    "child_database": "0f1e2d3c-4b5a-4968-8776-655443322112",
    "image_hosted": "0f1e2d3c-4b5a-4968-8776-655443322113",
    "video": "0f1e2d3c-4b5a-4968-8776-655443322114",
    "file": "0f1e2d3c-4b5a-4968-8776-655443322115",
    "pdf": "0f1e2d3c-4b5a-4968-8776-655443322116",
    "comment_link": "0f1e2d3c-4b5a-4968-8776-655443322117",
    "synced_original": "0f1e2d3c-4b5a-4968-8776-655443322118",
    "other_page": "0f1e2d3c-4b5a-4968-8776-655443322119",
    "meeting_summary": "0f1e2d3c-4b5a-4968-8776-65544332211a",
    "meeting_notes": "0f1e2d3c-4b5a-4968-8776-65544332211b",
    "meeting_transcript": "0f1e2d3c-4b5a-4968-8776-65544332211c",
}


#: Where Notion keeps uploaded files (the signed query string is added per response).
_S3 = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws"


def _with_id(spec: BlockSpec, key: str) -> BlockSpec:
    return {**spec, "id": EVERY_BLOCK_IDS[key]}


def every_block_type() -> list[BlockSpec]:
    """One page body holding every block type of the block reference (Notion-Version
    2025-09-03 and later, ``heading_4`` and ``tab`` included), plus an unknown type with
    text; the media blocks have the ids of :data:`EVERY_BLOCK_IDS`."""
    ids = EVERY_BLOCK_IDS
    icon_paragraph: dict[str, Any] = {
        "rich_text": rich_text("Tab two"),
        "color": "default",
        "icon": {"type": "emoji", "emoji": "📌"},
    }
    return [
        paragraph([text("A paragraph with "), text("bold", bold=True), text(" text.")]),
        heading(1, "Heading 1"),
        heading(2, "Heading 2"),
        heading(3, "Heading 3"),
        heading(4, "Heading 4"),
        heading(4, "Toggle heading 4", paragraph("Under the toggle heading.")),
        bulleted("Bullet", bulleted("Nested bullet")),
        numbered("First"),
        numbered("Second"),
        to_do("Done", True),
        to_do("Open"),
        toggle("A toggle", paragraph("Toggle body.")),
        quote("A quote\non two lines"),
        callout("A callout", "⚠️"),
        code("print(1)", "python", "A caption"),
        equation("E = mc^2"),
        divider(),
        block("table_of_contents", {"color": "default"}),
        block("breadcrumb", {}),
        column_list([paragraph("Left column")], [paragraph("Right column")]),
        table([["Key", "Value"], ["a", "1"]], column_header=True, row_header=True),
        table([["x", "y"]], column_header=False),
        block(
            "tab",
            {},
            [
                paragraph("Tab one", paragraph("First tab body.")),
                block("paragraph", icon_paragraph, [paragraph("Second tab body.")]),
            ],
        ),
        media("image", "https://img.example/cat.png", "A cat", hosted=False),
        _with_id(media("image", f"{_S3}/1/dog.png", "A dog"), "image_hosted"),
        _with_id(media("video", f"{_S3}/2/clip.mp4"), "video"),
        media("audio", "https://audio.example/talk.mp3", "The talk", hosted=False),
        _with_id(media("file", f"{_S3}/3/r.pdf", name="report.pdf"), "file"),
        _with_id(media("pdf", f"{_S3}/4/s.pdf", "Slides"), "pdf"),
        bookmark("https://example.org/", "Example"),
        embed("https://embed.example/x"),
        block("link_preview", {"url": "https://github.com/makenotion/notion-sdk-js/pull/1"}),
        link_to_page(ids["child_page"]),
        link_to_page(ids["other_page"]),
        link_to_page(ids["child_database"], "database_id"),
        _with_id(link_to_page("c0ffee00-0000-4000-8000-000000000001", "comment_id"), "comment_link"),
        child_page("Sub page", ids["child_page"]),
        child_database("Tasks", ids["child_database"]),
        _with_id(synced_block([paragraph("Synced content.")]), "synced_original"),
        synced_block([paragraph("Synced content.")], ids["synced_original"]),
        block("template", {"rich_text": rich_text("Add a task")}, [to_do("New task")]),
        # API 2026-03-11's meeting_notes (the transcription block before): summary, notes and
        # transcript are child blocks its ``children`` object names.
        block(
            "meeting_notes",
            {
                "title": rich_text("Weekly sync"),
                "status": "notes_ready",
                "children": {
                    "summary_block_id": ids["meeting_summary"],
                    "notes_block_id": ids["meeting_notes"],
                    "transcript_block_id": ids["meeting_transcript"],
                },
            },
            [
                _with_id(paragraph("Summary of the meeting."), "meeting_summary"),
                _with_id(paragraph("Notes taken during it."), "meeting_notes"),
                _with_id(paragraph("Transcript: good morning, everyone."), "meeting_transcript"),
            ],
        ),
        block("unsupported", {"block_type": "form"}),
        block("ai_block", {"rich_text": rich_text("Text of a future type")}, [paragraph("Its child.")]),
    ]
