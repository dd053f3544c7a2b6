"""Backfill and reconciliation cover files (issue 39, point 7), end to end: the real worker and
the Notion SDK against the Notion stand-in and the file-host stand-in, real Postgres. A
backfilled workspace gets its pages' files as documents; a file removed from its page while
the webhook was lost is tombstoned by the next full reconciliation, which syncs the edited page
again (the page's files as its last sync showed them: docs/files.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from test_backfill_e2e import Running, backfills_done, settings_for, wait_for

from debounce.documents.store import DocumentStore
from standins.file_host import FileHost
from standins.notion_api import DEMO_TOKEN, FakeNotion
from standins.notion_content import media
from standins.sample_files import text_pdf
from standins.server import BackgroundServer

PDF = "application/pdf"


@pytest.fixture
def stand_ins() -> Iterator[tuple[FakeNotion, str, FileHost]]:
    """A Notion stand-in (no demo content) and a file host, served on loopback."""
    host = FileHost()
    api = FakeNotion(token=DEMO_TOKEN)
    with BackgroundServer(host.app()) as hs, BackgroundServer(api.app()) as ns:
        host.base_url = hs.url
        yield api, ns.url, host


async def state(store: DocumentStore, document_id: str) -> str:
    """``live``, ``deleted`` or ``missing``."""
    doc = await store.get("notion", document_id)
    if doc is None:
        return "missing"
    return "live" if doc["deleted_at"] is None else "deleted"


async def test_a_backfill_gets_the_files_and_a_full_sweep_removes_one_gone(
    pool: AsyncConnectionPool[Any], database_url: str, stand_ins: tuple[FakeNotion, str, FileHost]
) -> None:
    api, notion_url, host = stand_ins
    host.add("ws/9/nda.pdf", text_pdf([["Mutual NDA", "Two years."]]), PDF)
    host.add("ws/9/terms.pdf", text_pdf([["Terms", "Net 30."]]), PDF)
    page = api.add_page(
        title="Contracts",
        blocks=[
            media("pdf", host.presign("ws/9/nda.pdf"), name="nda.pdf"),
            media("file", host.presign("ws/9/terms.pdf"), name="terms.pdf"),
        ],
        last_edited_time="2026-11-01T10:00:00.000Z",
    )
    settings = settings_for(
        database_url,
        notion_url,
        "http://127.0.0.1:9/unused/",
        slack_bot_token=None,
        reconcile_interval_seconds=3600,
        reconcile_full_interval_seconds=3600,
    )
    store = DocumentStore(pool)
    async with Running(settings, pool):
        await wait_for("the backfill and its file jobs", lambda: backfills_done(pool, 1))
    assert await state(store, page) == "live"
    nda = await store.get("notion", "file:/s3/ws/9/nda.pdf")
    assert nda is not None and nda["content"] == "Mutual NDA\nTwo years."
    assert await state(store, "file:/s3/ws/9/terms.pdf") == "live"

    # The terms removed from the page in Notion; its webhook never arrived.
    api.set_blocks(page, [media("pdf", host.presign("ws/9/nda.pdf"), name="nda.pdf")])
    api.pages[page]["last_edited_time"] = "2026-11-02T10:00:00.000Z"
    settings = settings.with_(reconcile_interval_seconds=0.5, reconcile_full_interval_seconds=0.5)
    async with Running(settings, pool):
        await wait_for(
            "the sweep to tombstone the removed file",
            lambda: _is(store, "file:/s3/ws/9/terms.pdf", "deleted"),
        )
    assert await state(store, "file:/s3/ws/9/nda.pdf") == "live"
    assert await state(store, page) == "live"


async def _is(store: DocumentStore, document_id: str, wanted: str) -> bool:
    return await state(store, document_id) == wanted
