"""Sections a consumer can re-embed one by one (issue 40, point 2): cut by the service when a
document is written (debounce.documents.sections), stored with it, served by
GET /documents/{source}/{id}, and each change in the feed names the sections it added, changed
and removed (migration 027). Measured on a 100-section document: a one-paragraph edit at the
start, the middle or the end changes one section; a renamed heading changes only its own."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool

from debounce.config import Settings
from debounce.documents import feed
from debounce.documents.sections import Section, split_sections
from debounce.documents.store import Document, DocumentStore
from debounce.web import create_app
from integrations.slack.render import render_thread

READ = "test-read-token"


def hundred_sections(edit: int | None = None, rename: int | None = None) -> str:
    """A document of an intro and 100 sections under 10 chapters (``#`` chapters, ``##``
    sections, two of every ten named alike), with section ``edit``'s paragraph edited and
    section ``rename``'s heading renamed."""
    parts = ["An introduction paragraph.\n"]
    for n in range(100):
        if n % 10 == 0:
            parts.append(f"# Chapter {n // 10}\n")
        title = "Notes" if n % 10 in (3, 7) else f"Section {n}"
        if n == rename:
            title = f"Renamed {n}"
        body = f"Paragraph {n}: some text that a consumer embeds."
        if n == edit:
            body += " One sentence more."
        parts.append(f"## {title}\n\n{body}\n\n- a list item\n\n```\n# not a heading {n}\n```\n")
    return "\n".join(parts)


def by_id(sections: list[Section]) -> dict[str, str]:
    return {s.id: s.sha256 for s in sections}


def changed_ids(before: list[Section], after: list[Section]) -> tuple[set[str], set[str], set[str]]:
    old, new = by_id(before), by_id(after)
    return (
        {i for i in new if i not in old},
        {i for i in new if i in old and old[i] != new[i]},
        {i for i in old if i not in new},
    )


def test_the_document_is_cut_at_top_level_headings_with_paths_ranges_and_hashes() -> None:
    content = hundred_sections()
    sections = split_sections(content)
    # the intro, 10 chapters' own headings, 100 sections: a `#` line in a code block is none
    assert len(sections) == 1 + 10 + 100
    assert sections[0].path == () and sections[0].start == 0
    assert sections[2].path == ("Chapter 0", "Section 0")
    assert "".join(content[s.start : s.end] for s in sections) == content
    assert all(a.end == b.start for a, b in itertools.pairwise(sections))
    assert len({s.id for s in sections}) == len(sections)  # repeated paths: ordinals
    notes = [s for s in sections if s.path == ("Chapter 0", "Notes")]
    assert len(notes) == 2 and notes[0].id != notes[1].id


@pytest.mark.parametrize("edited", [0, 50, 99])
def test_a_one_paragraph_edit_changes_one_section_of_a_hundred(edited: int) -> None:
    before = split_sections(hundred_sections())
    after = split_sections(hundred_sections(edit=edited))
    added, changed, removed = changed_ids(before, after)
    assert (added, removed) == (set(), set())
    assert len(changed) == 1
    (only,) = changed
    assert next(s for s in after if s.id == only).path[-1] in (f"Section {edited}", "Notes")


def test_a_renamed_heading_changes_only_its_section() -> None:
    before = split_sections(hundred_sections())
    after = split_sections(hundred_sections(rename=42))
    added, changed, removed = changed_ids(before, after)
    assert changed == set()
    assert [s.path for s in after if s.id in added] == [("Chapter 4", "Renamed 42")]
    assert [s.path for s in before if s.id in removed] == [("Chapter 4", "Section 42")]


def test_anchors_cut_at_the_sources_own_parts() -> None:
    messages = [
        {"type": "message", "ts": f"1732450000.00010{i}", "user": "U1", "text": f"message {i}"}
        for i in range(3)
    ]
    doc = render_thread("C1", messages)
    sections = split_sections(doc.content, doc.anchors)
    assert [s.id for s in sections] == [m["ts"] for m in messages]
    edited = render_thread(
        "C1",
        [messages[0], {**messages[1], "text": "edited", "edited": {"ts": "1732450100.000000"}}, messages[2]],
    )
    added, changed, removed = changed_ids(sections, split_sections(edited.content, edited.anchors))
    assert (added, changed, removed) == (set(), {messages[1]["ts"]}, set())
    with pytest.raises(ValueError):
        split_sections("abc", ((2, "x"), (1, "y")))


async def test_the_store_keeps_sections_and_the_feed_says_which_changed(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    base = Document(
        source_type="notion",
        document_id="p1",
        source_page_id="p1",
        title="Handbook",
        content=hundred_sections(),
    )
    start = await feed.head(pool)
    await store.upsert(base)
    await store.upsert(dataclasses.replace(base, content=hundred_sections(edit=50)))
    await store.upsert(dataclasses.replace(base, content=hundred_sections(edit=50, rename=42)))
    await store.upsert(
        dataclasses.replace(base, title="Handbook 2", content=hundred_sections(edit=50, rename=42))
    )
    assert await store.mark_deleted("notion", ["p1"]) == ["p1"]
    await servable(pool)
    page = await feed.read_changes(pool, start, 100)
    first, edit, rename, retitle, delete = (c.sections for c in page.changes)
    expected = split_sections(hundred_sections())
    assert first == {"added": [s.id for s in expected], "changed": [], "removed": []}
    assert edit is not None and rename is not None
    assert (len(edit["changed"]), edit["added"], edit["removed"]) == (1, [], [])
    assert (rename["changed"], len(rename["added"]), len(rename["removed"])) == ([], 1, 1)
    assert retitle == delete == {"added": [], "changed": [], "removed": []}
    stored = await store.get("notion", "p1")
    assert stored is not None
    assert stored["sections"] == [s.to_json() for s in split_sections(hundred_sections(edit=50, rename=42))]


async def test_a_document_written_before_sections_gets_them_without_a_change(
    pool: AsyncConnectionPool[Any],
) -> None:
    store = DocumentStore(pool)
    doc = Document(
        source_type="notion", document_id="p2", source_page_id="p2", title="T", content="# A\n\ntext\n"
    )
    await store.upsert(doc)
    async with pool.connection() as conn:
        await conn.execute("update documents set sections = null")  # as before migration 027
    await servable(pool)  # the head after the first write's change (the server is shared)
    start = await feed.head(pool)
    await store.upsert(doc)
    await servable(pool)
    assert (await feed.read_changes(pool, start, 10)).changes == []
    stored = await store.get("notion", "p2")
    assert stored is not None and stored["sections"] == [s.to_json() for s in split_sections(doc.content)]


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url="postgresql://unused", read_token=READ)
    app = create_app(settings, pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://test",
            headers={"Authorization": f"Bearer {READ}"},
        ) as c,
    ):
        yield c


async def test_the_read_api_serves_a_documents_sections(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    content = "Intro.\n\n# Setup\n\nInstall it.\n\n## Linux\n\napt install\n"
    await DocumentStore(pool).upsert(
        Document(source_type="notion", document_id="p3", source_page_id="p3", title="T", content=content)
    )
    body = (await client.get("/documents/notion/p3")).json()["document"]
    assert [(s["path"], content[s["start"] : s["end"]]) for s in body["sections"]] == [
        ([], "Intro.\n\n"),
        (["Setup"], "# Setup\n\nInstall it.\n\n"),
        (["Setup", "Linux"], "## Linux\n\napt install\n"),
    ]
    assert body["sections"] == [s.to_json() for s in split_sections(content)]
