"""Notion's other files become file documents (issue 39), end to end: the real notion-client
against the Notion stand-in, the file-host stand-in serving presigned S3 URLs, the real worker
and Postgres.

- The block walk: an ``image``, ``audio`` or ``video`` block's hosted file is a document of
  metadata only (its name, media type, size, parent: no OCR, no transcription); a ``files``
  property's hosted file is extracted like a ``file`` block's; an ``external`` file from a host
  the operator does not allow is no document (its page keeps the link).
- The markdown endpoint's path reports the page's files too (its file tags), and refreshes an
  expired URL by asking the endpoint again (one request).
- The page trashed: the file documents only it showed are tombstoned.
"""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from PIL import Image
from psycopg_pool import AsyncConnectionPool
from waiting import e2e_settings, running_worker, until

from debounce import queue
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent
from debounce.worker import Worker
from integrations.notion.settings import NotionSettings
from integrations.notion.sync import NotionSyncer
from standins.file_host import FileHost
from standins.notion_api import FakeNotion
from standins.notion_content import files_property, media
from standins.sample_files import text_pdf
from standins.server import BackgroundServer

PAGE = "6d7b39327cc24b8fa7f2d60222626d4e"
PAGE_ID = "6d7b3932-7cc2-4b8f-a7f2-d60222626d4e"
PDF = "application/pdf"


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost()
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


@pytest.fixture
def notion() -> Iterator[tuple[FakeNotion, str]]:
    fake = FakeNotion(token="secret_media")
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


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "white").save(out, "PNG")
    return out.getvalue()


async def sync_page(pool: AsyncConnectionPool[Any]) -> None:
    await queue.enqueue(pool, [JobEvent("notion", PAGE, {}, None, 0, 0)])


async def live(store: DocumentStore, document_id: str) -> dict[str, Any] | None:
    doc = await store.get("notion", document_id)
    return doc if doc is not None and doc["deleted_at"] is None else None


async def deleted(store: DocumentStore, document_id: str) -> bool:
    doc = await store.get("notion", document_id)
    return doc is not None and doc["deleted_at"] is not None


async def test_media_blocks_and_files_properties_by_the_block_walk_until_the_page_is_trashed(
    pool: AsyncConnectionPool[Any], host: FileHost, notion: tuple[FakeNotion, str], worker: Worker
) -> None:
    fake, _ = notion
    fake.deny_read_content()  # the block walk
    store = DocumentStore(pool)
    photo = png()
    host.add("ws/1/team.png", photo, "image/png")
    host.add("ws/2/standup.mp3", b"ID3" + b"\0" * 64, "audio/mpeg")
    host.add("ws/3/contract.pdf", text_pdf([["Contract", "Net 30."]]), PDF)
    fake.add_page(
        PAGE,
        title="Vendors",
        blocks=[
            media("image", host.presign("ws/1/team.png"), "The team"),
            media("audio", host.presign("ws/2/standup.mp3")),
            media("video", "https://videos.example.com/launch.mp4", hosted=False),
        ],
        properties={
            "Contract": files_property(
                ("contract.pdf", host.presign("ws/3/contract.pdf"), True),
                ("terms.pdf", "https://cdn.example.com/terms.pdf", False),
            )
        },
    )
    await sync_page(pool)

    image = await until(lambda: live(store, "file:/s3/ws/1/team.png"))
    audio = await until(lambda: live(store, "file:/s3/ws/2/standup.mp3"))
    contract = await until(lambda: live(store, "file:/s3/ws/3/contract.pdf"))
    page = await store.get("notion", PAGE_ID)
    assert page is not None
    assert image["title"] == "The team"
    assert image["content"] == "_(no text extracted from The team: image/png: metadata only (no OCR))_"
    meta = image["metadata"]
    assert (meta["kind"], meta["parent_document_id"], meta["media_type"], meta["size"]) == (
        "file",
        PAGE_ID,
        "image/png",
        len(photo),
    )
    assert meta["extraction"]["status"] == "metadata_only"
    assert audio["title"] == "standup.mp3"
    assert audio["metadata"]["extraction"]["reason"] == "audio/mpeg: metadata only (no transcription)"
    assert contract["content"] == "Contract\nNet 30."
    assert contract["metadata"]["parent_document_id"] == PAGE_ID
    assert contract["audience_kind"] == page["audience_kind"]
    # External files from hosts not allowed (DEBOUNCE_FILE_EXTERNAL_HOSTS unset): no
    # document, nothing fetched; the page keeps its links.
    assert await store.get("notion", "file:https://videos.example.com/launch.mp4") is None
    assert await store.get("notion", "file:https://cdn.example.com/terms.pdf") is None
    assert "https://videos.example.com/launch.mp4" in page["content"]

    # The page trashed: the page and the file documents only it showed are tombstoned.
    fake.set_trashed(PAGE)
    await sync_page(pool)
    await until(lambda: deleted(store, PAGE_ID))
    for file_id in ("/s3/ws/1/team.png", "/s3/ws/2/standup.mp3", "/s3/ws/3/contract.pdf"):
        assert await deleted(store, "file:" + file_id), file_id

    # Restored: its files are documents again (the page shows them anew).
    fake.set_trashed(PAGE, False)
    await sync_page(pool)
    await until(lambda: live(store, "file:/s3/ws/3/contract.pdf"))


async def test_the_markdown_path_reports_the_pages_files_and_refreshes_them_by_the_endpoint(
    pool: AsyncConnectionPool[Any], host: FileHost, notion: tuple[FakeNotion, str], worker: Worker
) -> None:
    fake, _ = notion
    store = DocumentStore(pool)
    host.add("ws/4/handbook.pdf", text_pdf([["Handbook", "Be kind."]]), PDF)
    host.add("ws/5/map.png", png(), "image/png")
    fake.add_page(
        PAGE,
        title="Handbook",
        blocks=[
            media("pdf", host.presign("ws/4/handbook.pdf"), name="handbook.pdf"),
            media("image", host.presign("ws/5/map.png"), "Office map"),
        ],
    )
    # The stand-in signs hosted URLs afresh on every answer, the markdown endpoint's too; the
    # file host's clock reads two hours later at the first download (that URL has expired).
    later = iter([7200.0])
    host.now = lambda: time.time() + next(later, 0.0)
    await sync_page(pool)
    page = await until(lambda: live(store, PAGE_ID))
    walked = fake.calls["blocks.children.list"]
    asked = fake.calls["pages.markdown"]

    doc = await until(lambda: live(store, "file:/s3/ws/4/handbook.pdf"))
    image = await until(lambda: live(store, "file:/s3/ws/5/map.png"))
    assert doc["content"] == "Handbook\nBe kind."
    assert doc["title"] == "handbook.pdf"
    assert doc["metadata"]["parent_document_id"] == page["document_id"]
    assert image["title"] == "Office map" and image["metadata"]["extraction"]["status"] == "metadata_only"
    assert fake.calls["blocks.children.list"] == walked == 0  # the markdown endpoint served
    assert fake.calls["pages.markdown"] == asked + 1  # the expired URL: the endpoint again
    assert len([path for _, path, _ in host.requests]) == 3  # one 403, then each file once
