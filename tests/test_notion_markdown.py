"""The markdown path of a Notion page sync (``pages.retrieve`` + ``pages.retrieve_markdown``):
the real ``notion-client`` against the local stand-in on loopback, writing to real Postgres.
The block walk's twins are in ``tests/test_notion_sync.py`` (run without read-content)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from test_notion_sync import example_payload, make_job

from debounce.contract import SyncContext, SyncResult
from debounce.documents.store import DocumentStore
from integrations.notion import NotionSettings, NotionSyncer
from integrations.notion import markdown as markdown_module
from integrations.notion.markdown import clean_markdown, page_markdown, splice_unknown
from integrations.notion.refusals import EndpointRefusals
from standins.notion_api import (
    DEMO_PAGE_ID,
    FakeNotion,
    bulleted,
    callout,
    heading,
    paragraph,
    text,
    toggle,
)
from standins.notion_content import every_block_type, media
from standins.server import BackgroundServer

TOKEN = "secret_markdown_token"
Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
def fake() -> FakeNotion:
    return FakeNotion(token=TOKEN)


@pytest.fixture
def server(fake: FakeNotion) -> Iterator[BackgroundServer]:
    with BackgroundServer(fake.app()) as srv:
        yield srv


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
def context(store: DocumentStore) -> SyncContext:
    """What the worker hands a sync (here unfenced, no workspace, no meter)."""
    return SyncContext(store=store)


@pytest.fixture
async def notion(server: BackgroundServer) -> AsyncIterator[NotionSyncer]:
    settings = NotionSettings(notion_token=TOKEN, notion_base_url=server.url)
    syncer = NotionSyncer(settings, retry_delays=(0.0, 0.0))
    yield syncer
    await syncer.aclose()


async def content(store: DocumentStore, page_id: str) -> str:
    doc = await store.get("notion", page_id)
    assert doc is not None
    return str(doc["content"])


async def test_page_syncs_with_two_requests(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    page = fake.add_page(
        title="Plan",
        blocks=[
            heading(1, "Goals"),
            paragraph(
                [
                    text("Once", bold=True),
                    text(" per burst, see "),
                    text("the page", link="/0f1e2d3c4b5a49688776655443322110"),
                ]
            ),
            bulleted("a", bulleted("b")),
            toggle("More", paragraph("inside")),
            callout("Careful", "⚠️"),
        ],
    )
    # The markdown path reports the page's files too (none here).
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    assert fake.calls["pages.retrieve"] == 1 and fake.calls["pages.markdown"] == 1
    assert fake.calls["blocks.children.list"] == 0
    # Notion's enhanced Markdown converted to the block walk's CommonMark/GFM (issue 23)
    assert await content(store, page) == (
        "# Goals\n\n"
        "**Once** per burst, see "
        "[the page](https://www.notion.so/0f1e2d3c4b5a49688776655443322110)\n\n"
        "- a\n  - b\n\n"
        "More\n\ninside\n\n"
        "> ⚠️ Careful\n"
    )
    doc = await store.get("notion", page)
    assert doc is not None and doc["title"] == "Plan"


async def test_demo_page_markdown_path_twin(store: DocumentStore, context: SyncContext) -> None:
    fake = FakeNotion.demo()
    with BackgroundServer(fake.app()) as srv:
        notion = NotionSyncer(NotionSettings(notion_token=fake.token, notion_base_url=srv.url))
        try:
            await notion.sync(make_job(DEMO_PAGE_ID, example_payload("page.created.json")), context)
        finally:
            await notion.aclose()
    assert (fake.calls["pages.retrieve"], fake.calls["pages.markdown"]) == (1, 1)
    assert fake.calls["blocks.children.list"] == 0
    page = await store.get("notion", DEMO_PAGE_ID)
    assert page is not None and page["title"] == "Launch plan"
    assert "# Goals" in page["content"] and "| Notion | 300 s | 3600 s |" in page["content"]
    assert "<td>" not in page["content"]


async def test_truncated_page_fetches_unknown_blocks_and_keeps_every_text(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.markdown_block_limit = 5
    blocks = every_block_type()
    page = fake.add_page(title="Big", blocks=blocks)
    await notion.sync(make_job(page), context)
    assert fake.calls["pages.markdown"] > 2 and fake.calls["blocks.children.list"] == 0
    truncated = await content(store, page)
    assert "<unknown" not in truncated
    # the same as one untruncated answer, every block's text in place
    fake.markdown_block_limit = 10_000
    whole = NotionSyncer(notion.settings)
    try:
        full = await page_markdown(whole.client.bind(context), page, EndpointRefusals())
    finally:
        await whole.aclose()
    assert full == truncated
    for words in ("Toggle body.", "Nested bullet", "Second tab body.", "Its child.", "Weekly sync"):
        assert words in truncated


async def test_a_page_past_the_thread_threshold_converts_the_same(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    """A page whose Markdown is longer than the threshold is converted off the event loop,
    to the same text as the block walk writes."""
    line = "A sentence long enough that a few thousand of them pass the threshold. " * 3
    page = fake.add_page(
        title="Long", blocks=[heading(2, "Part")] + [paragraph(f"{i}: {line}") for i in range(600)]
    )
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    stored = await content(store, page)
    assert len(stored) > markdown_module._CONVERT_IN_THREAD_CHARS
    assert stored.startswith("## Part\n\n0: A sentence") and "\n\n599: A sentence" in stored
    assert "<" not in stored and fake.calls["blocks.children.list"] == 0


async def test_403_falls_back_to_the_block_walk_and_is_remembered(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.deny_read_content(token=TOKEN)
    page = fake.add_page(title="Walked", blocks=[bulleted("a", bulleted("b"))])
    # The block walk reports the page's hosted files (none here).
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    assert await content(store, page) == "- a\n  - b\n"  # the block walk's Markdown
    assert fake.calls["pages.markdown"] == 1 and fake.calls["blocks.children.list"] == 2
    fake.set_blocks(page, [paragraph("changed")])
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    assert fake.calls["pages.markdown"] == 1  # later syncs go straight to the walk
    assert await content(store, page) == "changed\n"


@pytest.mark.parametrize("status", [400, 404])
async def test_endpoint_missing_falls_back_each_time(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, status: int, context: SyncContext
) -> None:
    page = fake.add_page(title="Old API", blocks=[paragraph("walked")])
    fake.fail("pages.markdown", status)
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    assert await content(store, page) == "walked\n"
    assert fake.calls["blocks.children.list"] == 1


async def test_transient_error_is_retried_in_process(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    page = fake.add_page(title="Blip", blocks=[paragraph("x")])
    fake.fail("pages.markdown", 503)
    assert await notion.sync(make_job(page), context) == SyncResult(written=1, files=())
    assert fake.calls["pages.markdown"] == 2 and fake.calls["blocks.children.list"] == 0


async def test_unchanged_page_with_hosted_files_writes_nothing(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    s3 = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws"
    page = fake.add_page(
        title="Files",
        blocks=[
            media("image", f"{s3}/1/dog.png", "A dog"),
            media("file", f"{s3}/2/r.pdf", name="report.pdf"),
            media("image", "https://img.example/cat.png", "A cat", hosted=False),
        ],
    )
    first = await notion.sync(make_job(page), context)
    second = await notion.sync(make_job(page), context)
    assert (first.written, second.unchanged) == (1, 1)
    # The markdown path reports the page's files (issue 39): hosted ones by their URL's path,
    # the external image by its URL; the signed URLs differ between the answers, not the files.
    assert first.files is not None and second.files is not None
    assert [(f.file_id, f.name, f.external) for f in first.files] == [
        ("/ws/1/dog.png", "A dog", False),
        ("/ws/2/r.pdf", "report.pdf", False),
        ("https://img.example/cat.png", "A cat", True),
    ]
    assert [f.identity() for f in second.files] == [f.identity() for f in first.files]
    assert [f.url for f in second.files] != [f.url for f in first.files]
    stored = await content(store, page)
    link = "https://www.notion.so/" + page.replace("-", "")
    assert stored == (
        f"[Image: A dog]({link}) · document `file:/ws/1/dog.png`\n\n"
        f"[report.pdf]({link}) · document `file:/ws/2/r.pdf`\n\n![A cat](https://img.example/cat.png)\n"
    )
    assert "X-Amz" not in stored and "amazonaws" not in stored


def test_clean_markdown_and_splice() -> None:
    page = "153104cd-477e-809d-8dc4-ff2d96ae3090"
    signed = "https://file.notion.so/f/x.png?expirationTimestamp=1&signature=abc"
    assert clean_markdown(f'\n![]({signed}) [a](/abc#def) <page url="/p1">P</page>\n\n', page) == (
        "[Image](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090) · document `file:/f/x.png` "
        '[a](https://www.notion.so/abc#def) <page url="https://www.notion.so/p1">P</page>\n'
    )
    # A hosted file's tag names its file document (its URL's path) for the converter.
    pdf = '<pdf src="https://file.notion.so/f/r.pdf?expirationTimestamp=1&amp;signature=a">Q3</pdf>'
    assert clean_markdown(pdf, page) == (
        '<pdf data-document="file:/f/r.pdf" src="https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090">'
        "Q3</pdf>\n"
    )
    assert clean_markdown("", page) == ""
    tag = '\t<unknown url="https://www.notion.so/x#aa11" alt="toggle"/>'
    assert splice_unknown(f"a\n{tag}\nb", "aa-11", "c\n\td") == "a\n\tc\n\t\td\nb"
    assert splice_unknown("a", "bb", "c") == "a\n\nc"
