"""Rendering Notion content to Markdown (issue 14, "Content fidelity"): pure functions over
block, rich text and property shapes of the API reference. No I/O; the same content synced
through the real SDK and the stand-in is in ``test_notion_sync.py``."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.notion import BlockNode, render_blocks, render_rich_text
from integrations.notion.properties import property_value
from standins.notion_api import block, heading, paragraph, rich_text, table, text, toggle
from standins.notion_content import (
    date_mention,
    files_property,
    inline_equation,
    link_to_page,
    media,
    mention,
    page_mention,
    rollup_property,
    user_mention,
)
from standins.notion_content import property_value as prop

PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
OTHER = "fdc65179-a0a0-4a1c-9b4f-4d2f7b1c3e8a"
COMPACT = PAGE.replace("-", "")


def nodes(*specs: dict[str, Any]) -> list[BlockNode]:
    """Block specs (as the stand-in's builders make them) as a fetched block tree."""
    out: list[BlockNode] = []
    for n, spec in enumerate(specs):
        kids = spec.get("children", [])
        body = {k: v for k, v in spec.items() if k != "children"}
        body.setdefault("id", f"00000000-0000-4000-8000-{n:012d}")
        out.append(BlockNode({"object": "block", **body}, nodes(*kids)))
    return out


def render(*specs: dict[str, Any]) -> str:
    return render_blocks(nodes(*specs), page_id=PAGE)


# -- case 1: heading_4, and unknown types keep their text ------------------------------------


def test_heading_4_and_toggleable_heading_4_render_as_headings() -> None:
    assert render(heading(4, "Fourth level")) == "#### Fourth level\n"
    assert render(heading(4, "Folded", paragraph("inside"))) == "#### Folded\n\ninside\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"rich_text": rich_text("from rich_text")}, "from rich_text"),
        ({"text": rich_text("from text")}, "from text"),
        ({"caption": rich_text("from caption")}, "from caption"),
        ({"title": rich_text("from a rich title")}, "from a rich title"),
        ({"title": "from a string title"}, "from a string title"),
        ({"title": [], "other": 1}, "[unsupported Notion block: future_block]"),
        ({}, "[unsupported Notion block: future_block]"),
    ],
)
def test_unknown_type_keeps_its_text_and_children(data: dict[str, Any], expected: str) -> None:
    spec = block("future_block", data, [paragraph("child")])
    assert render(spec) == f"{expected}\n\nchild\n"


def test_documented_unsupported_block_names_the_underlying_type() -> None:
    assert render(block("unsupported", {"block_type": "form"})) == "[unsupported Notion block: form]\n"


# -- case 2: Notion-hosted files are never written -------------------------------------------

SIGNED = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws/id/report.pdf?X-Amz-Signature=abc"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (media("image", SIGNED, "A chart"), "[Image: A chart]"),
        (media("image", SIGNED), "[Image]"),
        (media("file", SIGNED, name="report.pdf"), "[report.pdf]"),
        (media("file", SIGNED, "Q3 report", name="report.pdf"), "[Q3 report]"),
        (media("pdf", SIGNED), "[PDF]"),
        (media("video", SIGNED, "Demo"), "[Demo]"),
        (media("audio", SIGNED), "[Audio]"),
    ],
)
def test_hosted_file_links_to_its_block_not_the_signed_url(spec: dict[str, Any], expected: str) -> None:
    out = render(spec)
    # The block's stable link, and the file document of its text (its URL's path: issue 39).
    named = " · document `file:/ws/id/report.pdf`"
    assert out == f"{expected}(https://www.notion.so/{COMPACT}#00000000000040008000000000000000){named}\n"
    assert "amazonaws" not in out and "Signature" not in out
    # Without the page id there is no stable link: only the label is written.
    assert render_blocks(nodes(spec)) == expected[1:-1] + named + "\n"


def test_external_files_keep_their_url() -> None:
    assert render(media("image", "https://img.example/a b.png", "A", hosted=False)) == (
        "![A](https://img.example/a%20b.png)\n"
    )
    assert render(media("file", "https://x.example/f.zip", name="f.zip", hosted=False)) == (
        "[f.zip](https://x.example/f.zip)\n"
    )
    assert render(media("video", "https://youtu.be/x", hosted=False)) == "[Video](https://youtu.be/x)\n"


# -- case 3: relative links ---------------------------------------------------------------


def test_relative_notion_links_become_absolute() -> None:
    relative = text("the spec", link=f"/{OTHER.replace('-', '')}")
    anchored = text("that block", link=f"/{OTHER.replace('-', '')}#abc123")
    assert render_rich_text([relative]) == f"[the spec](https://www.notion.so/{OTHER.replace('-', '')})"
    assert render_rich_text([anchored]) == (
        f"[that block](https://www.notion.so/{OTHER.replace('-', '')}#abc123)"
    )
    assert render_rich_text([text("abs", link="https://example.com/x")]) == "[abs](https://example.com/x)"


# -- case 4: link_to_page ---------------------------------------------------------------------


def test_link_to_page_names_the_target_kind_and_a_known_title() -> None:
    compact = OTHER.replace("-", "")
    assert render(link_to_page(OTHER)) == f"[Link to page](https://www.notion.so/{compact})\n"
    assert render(link_to_page(OTHER, "database_id")) == (
        f"[Link to database](https://www.notion.so/{compact})\n"
    )
    # A title the page already holds (a mention, a child page) is used, at no request.
    out = render(paragraph([text("See "), page_mention(OTHER, "Roadmap")]), link_to_page(OTHER))
    assert out.endswith(f"\n\nLink to page: [Roadmap](https://www.notion.so/{compact})\n")
    assert "page_id" not in out


# -- case 5: line breaks, table headers, rollups, escaping ------------------------------------


def test_line_breaks_inside_a_block_are_hard_breaks() -> None:
    assert render(paragraph("one\ntwo\n\nfour")) == "one\\\ntwo\\\n\\\nfour\n"
    assert render(paragraph([text("bold\nlines", bold=True)])) == "**bold**\\\n**lines**\n"
    bullet = block("bulleted_list_item", {"rich_text": rich_text("item\nmore")})
    assert render(bullet) == "- item\\\n  more\n"
    assert render(heading(2, "a\nb")) == "## a b\n"
    # A toggle is its summary as a paragraph, then its children (no <details>, issue 23)
    assert render(toggle("sum\nmary", paragraph("x"))) == "sum\\\nmary\n\nx\n"


def test_table_headers_follow_the_flags() -> None:
    rows = [["Key", "Value"], ["a", "1"], ["b", "2"]]
    assert render(table(rows, column_header=True)) == (
        "| Key | Value |\n| --- | --- |\n| a | 1 |\n| b | 2 |\n"
    )
    assert render(table(rows, column_header=False)) == (
        "|  |  |\n| --- | --- |\n| Key | Value |\n| a | 1 |\n| b | 2 |\n"
    )
    assert render(table(rows, column_header=False, row_header=True)) == (
        "|  |  |\n| --- | --- |\n| **Key** | Value |\n| **a** | 1 |\n| **b** | 2 |\n"
    )
    assert render(table(rows, column_header=True, row_header=True)) == (
        "| Key | Value |\n| --- | --- |\n| **a** | 1 |\n| **b** | 2 |\n"
    )
    bold_already = table([[[text("x", bold=True), text("y")], "1"]], column_header=False, row_header=True)
    assert "| **xy** | 1 |" in render(bold_already)


def test_rollups_keep_their_values() -> None:
    array = rollup_property(
        "array",
        [
            {"type": "title", "title": rich_text("Task A")},
            {"type": "number", "number": 3},
            {"type": "people", "people": [{"object": "user", "id": "u1"}]},
            {"type": "date", "date": {"start": "2026-01-01", "end": None}},
            {"type": "files", "files": files_property(("a.png", SIGNED, True))["files"]},
            {"type": "rich_text", "rich_text": []},
        ],
    )
    assert property_value(array) == ["Task A", 3, "u1", "2026-01-01", "a.png"]
    assert property_value(rollup_property("number", 42, "sum")) == 42
    date = {"start": "2026-01-01", "end": "2026-01-31", "time_zone": None}
    assert property_value(rollup_property("date", date, "date_range")) == "2026-01-01/2026-01-31"
    assert property_value(rollup_property("unsupported", {})) is None
    assert property_value(rollup_property("incomplete", {})) is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("2 * 3 * 4", "2 \\* 3 \\* 4"),
        ("_init_ and snake_case", "\\_init\\_ and snake_case"),
        ("a `tick`", "a \\`tick\\`"),
        ("[not](a link)", "\\[not\\](a link)"),
        ("<b>not html</b>", "\\<b>not html\\</b>"),
        ("# not a heading", "\\# not a heading"),
        ("> not a quote", "\\> not a quote"),
        ("- not a list", "\\- not a list"),
        ("+ not a list", "\\+ not a list"),
        ("1. not a list", "1\\. not a list"),
        ("2) nor this", "2\\) nor this"),
        ("---", "\\---"),
        ("===", "\\==="),
        ("~~not struck~~", "\\~\\~not struck\\~\\~"),
        ("costs $5 and $10", "costs \\$5 and \\$10"),
        ("&amp; stays literal, R&D too", "\\&amp; stays literal, R&D too"),
        ("C:\\path\\*", "C:\\path\\\\\\*"),
        ("a -> b, x-1, #tag mid-line, 3.5", "a -> b, x-1, #tag mid-line, 3.5"),
        ("line\n# second", "line\n\\# second"),
    ],
)
def test_literal_markdown_characters_are_escaped(content: str, expected: str) -> None:
    assert render_rich_text([text(content)]) == expected


def test_code_is_never_escaped() -> None:
    assert render_rich_text([text("a*b_c[d]", code=True)]) == "`a*b_c[d]`"
    out = render(block("code", {"rich_text": rich_text("# *x* <y>"), "language": "markdown"}))
    assert out == "```markdown\n# *x* <y>\n```\n"
    assert render_rich_text([inline_equation("a_1 * b")]) == "$a_1 * b$"


def test_escaped_text_in_titles_and_cells() -> None:
    assert render(block("child_page", {"title": "[Draft] *v2*"})) == (
        "Page: [\\[Draft\\] \\*v2\\*](https://www.notion.so/00000000000040008000000000000000)\n"
    )
    assert render(table([["a|b", "# x"]], column_header=True)) == "| a\\|b | # x |\n| --- | --- |\n"


# -- every rich text type -----------------------------------------------------------------


def test_every_rich_text_type() -> None:
    items = [
        text("b", bold=True),
        text(" "),
        text("i", italic=True),
        text(" "),
        text("s", strikethrough=True),
        text(" "),
        text("u", underline=True),
        text(" "),
        text("c", code=True),
        text(" "),
        text("l", link="https://l.example"),
        text(" "),
        user_mention("u1", "Ada"),
        text(" "),
        page_mention(OTHER, "Roadmap"),
        text(" "),
        mention("database", {"id": OTHER}, "Tasks", f"https://www.notion.so/{OTHER.replace('-', '')}"),
        text(" "),
        date_mention("2026-11-20", "2026-11-21"),
        text(" "),
        mention(
            "link_preview",
            {"url": "https://gh.example/p/1"},
            "https://gh.example/p/1",
            "https://gh.example/p/1",
        ),
        text(" "),
        mention(
            "link_mention",
            {"href": "https://a.example/x", "title": "A post"},
            "A post",
            "https://a.example/x",
        ),
        text(" "),
        mention(
            "template_mention", {"type": "template_mention_date", "template_mention_date": "today"}, "@Today"
        ),
        text(" "),
        mention("custom_emoji", {"id": "e1", "name": "party", "url": "https://e.example/p.png"}, ":party:"),
        text(" "),
        inline_equation("x^2"),
    ]
    compact = OTHER.replace("-", "")
    assert render_rich_text(items) == (
        "**b** *i* ~~s~~ u `c` [l](https://l.example) @Ada "
        f"[Roadmap](https://www.notion.so/{compact}) [Tasks](https://www.notion.so/{compact}) "
        "2026-11-20 → 2026-11-21 [https://gh.example/p/1](https://gh.example/p/1) "
        "[A post](https://a.example/x) @Today :party: $x^2$"
    )


# -- every property type ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (prop("rich_text", rich_text("notes *here*")), "notes *here*"),
        (prop("number", 3.5), 3.5),
        (prop("select", {"id": "o", "name": "High", "color": "red"}), "High"),
        (prop("select", None), None),
        (prop("multi_select", [{"id": "a", "name": "A"}, {"id": "b", "name": "B"}]), ["A", "B"]),
        (prop("status", {"id": "s", "name": "Done", "color": "green"}), "Done"),
        (
            prop("date", {"start": "2026-01-01T10:00:00.000+02:00", "end": None}),
            "2026-01-01T10:00:00.000+02:00",
        ),
        (prop("people", [{"object": "user", "id": "u1"}, {"object": "group", "id": "g1"}]), ["u1", "g1"]),
        (
            files_property(("a.png", SIGNED, True), ("b.txt", "https://x.example/b.txt", False)),
            ["a.png", "b.txt"],
        ),
        (prop("checkbox", True), True),
        (prop("url", "https://x.example"), "https://x.example"),
        (prop("email", "a@x.example"), "a@x.example"),
        (prop("phone_number", "+1 555"), "+1 555"),
        (prop("formula", {"type": "string", "string": "ok"}), "ok"),
        (prop("formula", {"type": "number", "number": 7}), 7),
        (prop("formula", {"type": "boolean", "boolean": False}), False),
        (
            prop("formula", {"type": "date", "date": {"start": "2026-01-01", "end": "2026-01-02"}}),
            "2026-01-01/2026-01-02",
        ),
        (prop("relation", [{"id": OTHER}]), [OTHER]),
        (prop("created_time", "2026-01-01T00:00:00.000Z"), "2026-01-01T00:00:00.000Z"),
        (prop("created_by", {"object": "user", "id": "u1"}), "u1"),
        (prop("last_edited_time", "2026-01-02T00:00:00.000Z"), "2026-01-02T00:00:00.000Z"),
        (prop("last_edited_by", {"object": "user", "id": "u2"}), "u2"),
        (prop("unique_id", {"prefix": "TASK", "number": 12}), "TASK-12"),
        (prop("unique_id", {"prefix": None, "number": 12}), 12),
        (prop("verification", {"state": "verified", "date": None, "verified_by": None}), "verified"),
        (prop("button", {}), None),
        (prop("place", {"lat": 48.85, "lon": 2.35, "name": "Paris", "address": None}), "Paris"),
        (prop("place", {"lat": 48.85, "lon": 2.35}), "48.85,2.35"),
    ],
)
def test_every_property_type(value: dict[str, Any], expected: Any) -> None:
    assert property_value(value) == expected
