"""Notion-hosted files become file documents (issue 39), end to end: the real notion-client
against the Notion stand-in (the block walk), the file-host stand-in serving presigned S3 URLs
that expire, the real worker and Postgres. A ``pdf`` block's file ends as a document of its
text; its expired URL is refreshed by re-reading its block (one ``blocks.retrieve``); the block
removed, the file document is tombstoned."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from waiting import e2e_settings, running_worker, until

from debounce import queue
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from debounce.worker import Worker
from integrations.notion.files import file_of_block
from integrations.notion.settings import NotionSettings
from integrations.notion.sync import NotionSyncer
from standins.file_host import FileHost
from standins.notion_api import FakeNotion
from standins.sample_files import text_pdf
from standins.server import BackgroundServer

PAGE = "5c6a28216bb14a7eb6e1c50111515c3d"
PAGE_ID = "5c6a2821-6bb1-4a7e-b6e1-c50111515c3d"  # the document id: the page's id as Notion says it
KEY = "ws/5c6a/handbook.pdf"


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost()
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


@pytest.fixture
def notion() -> Iterator[tuple[FakeNotion, str]]:
    fake = FakeNotion(token="secret_files")
    fake.deny_read_content()  # the block walk, which sees the blocks' files
    with BackgroundServer(fake.app()) as server:
        yield fake, server.url


@pytest.fixture
async def worker(
    pool: AsyncConnectionPool[Any], database_url: str, notion: tuple[FakeNotion, str]
) -> AsyncIterator[Worker]:
    settings = e2e_settings()
    source = NotionSyncer(NotionSettings(notion_token=notion[0].token, notion_base_url=notion[1]))
    async with running_worker(settings, pool, {"notion": source}, database_url) as w:
        yield w
    await source.aclose()


def pdf_block(url: str) -> dict[str, Any]:
    return {
        "type": "pdf",
        "pdf": {
            "type": "file",
            "caption": [],
            "name": "handbook.pdf",
            "file": {"url": url, "expiry_time": "2026-11-29T01:00:00.000Z"},
        },
    }


async def test_a_hosted_pdf_becomes_a_file_document_its_expired_url_refreshed(
    pool: AsyncConnectionPool[Any], host: FileHost, notion: tuple[FakeNotion, str], worker: Worker
) -> None:
    fake, _ = notion
    store = DocumentStore(pool)
    host.add(KEY, text_pdf([["Handbook", "Be kind."]]), "application/pdf")
    # The stand-in signs every hosted file afresh on each response, as Notion does; the file
    # host's clock reads two hours later at the first download (the URL the page's sync saw
    # has expired by then), the real time afterwards.
    later = iter([7200.0])
    host.now = lambda: time.time() + next(later, 0.0)
    fake.add_page(
        PAGE,
        title="Handbook",
        blocks=[
            {
                "type": "paragraph",
                "paragraph": {
                    "rich_text": [{"type": "text", "text": {"content": "Read it."}, "plain_text": "Read it."}]
                },
            },
            pdf_block(host.presign(KEY, now=time.time())),
        ],
    )
    await queue.enqueue(pool, [JobEvent("notion", PAGE, {}, None, 0, 0)])
    page = await until(lambda: store.get("notion", PAGE_ID))
    retrieved = fake.calls["blocks.retrieve"]

    file_id = f"file:/s3/{KEY}"
    doc = await until(lambda: store.get("notion", file_id))
    assert doc["content"] == "Handbook\nBe kind."
    assert doc["title"] == "handbook.pdf"
    assert doc["metadata"]["parent_document_id"] == page["document_id"]
    assert doc["audience_kind"] == page["audience_kind"]
    assert fake.calls["blocks.retrieve"] == retrieved + 1  # the refresh: one request
    s3 = [(method, path) for method, path, _ in host.requests]
    assert s3 == [("GET", f"/s3/{KEY}"), ("GET", f"/s3/{KEY}")]  # 403, then the fresh URL

    # The block removed: the file document is tombstoned.
    fake.set_blocks(PAGE, [])
    await queue.enqueue(pool, [JobEvent("notion", PAGE, {}, None, 0, 0)])
    await until(lambda: _deleted(store, file_id))


async def _deleted(store: DocumentStore, document_id: str) -> bool:
    doc = await store.get("notion", document_id)
    return doc is not None and doc["deleted_at"] is not None


def test_file_and_media_blocks_are_files() -> None:
    url = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws/f/a.pdf?X-Amz-Signature=1"
    block = {
        "id": "b1",
        "type": "file",
        "last_edited_time": "2026-11-28T10:00:00.000Z",
        "file": {
            "type": "file",
            "caption": [{"type": "text", "plain_text": "Q3 plan"}],
            "name": "",
            "file": {"url": url},
        },
    }
    ref = file_of_block(block, "page-1")
    assert ref is not None
    assert (ref.file_id, ref.name, ref.url, ref.locator, ref.edit_stamp, ref.with_token) == (
        "/ws/f/a.pdf",
        "Q3 plan",
        url,
        "b1",
        "2026-11-28T10:00:00.000Z",
        False,
    )
    # An external file: its whole URL is its identity; the worker fetches it only from an
    # allowed host. Media blocks: a media type that is never extracted (metadata only).
    ext_url = "https://cdn.example.com/a.pdf?v=2"
    external = {"id": "b2", "type": "pdf", "pdf": {"type": "external", "external": {"url": ext_url}}}
    ext = file_of_block(external, "page-1")
    assert ext is not None and (ext.file_id, ext.external, ext.name) == (ext_url, True, "a.pdf")
    png = url.replace("a.pdf", "photo.png")
    image = {"id": "b3", "type": "image", "image": {"type": "file", "caption": [], "file": {"url": png}}}
    video = {"id": "b4", "type": "video", "video": {"type": "file", "caption": [], "file": {"url": url}}}
    assert [
        (r.file_id, r.media_type) for r in (file_of_block(image, "p"), file_of_block(video, "p")) if r
    ] == [
        ("/ws/f/photo.png", "image/png"),
        ("/ws/f/a.pdf", "video/*"),  # a name that does not say: still never extracted
    ]
    upload = {"id": "b5", "type": "file", "file": {"type": "file_upload", "file_upload": {"id": "u1"}}}
    assert file_of_block(upload, "page-1") is None
    assert file_of_block({"id": "b6", "type": "paragraph", "paragraph": {}}, "page-1") is None
