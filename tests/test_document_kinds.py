"""A document's kind (migration 029's ``document_kind``, debounce.documents.kinds): one rule,
shown by the read API and the feed, filtered on by both and by ``debounce documents``; a bad
kind is a 400 naming the kinds there are."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette

from debounce.config import Settings
from debounce.documents import feed, reads
from debounce.documents.kinds import DOCUMENT_KINDS, UnknownKind, check_kind, check_kinds
from debounce.documents.store import Document, DocumentStore
from debounce.web import create_app

READ = "test-read-token"

#: (source, document id, metadata) -> the kind the rule gives.
SAMPLES: list[tuple[str, str, dict[str, Any], str]] = [
    ("notion", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", {"object": "page"}, "page"),
    ("notion", "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", {"object": "database"}, "database"),
    ("notion", "2f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", {"object": "data_source"}, "table"),
    ("notion", "file:/s3/secure/report.pdf", {"kind": "file"}, "file"),
    ("slack", "C0123ABCD/1732450000.000100", {}, "conversation"),
    ("slack", "file:F0123FILE", {"kind": "file"}, "file"),
    ("slack", "canvas:F0456CANV", {"kind": "canvas"}, "canvas"),
    ("noop", "anything", {}, "page"),
]


def _doc(source: str, document_id: str, metadata: dict[str, Any]) -> Document:
    return Document(
        source_type=source,
        document_id=document_id,
        source_page_id=document_id,
        title=document_id,
        url=None,
        content=f"text of {document_id}",
        metadata=metadata,
    )


@pytest.fixture
async def written(pool: AsyncConnectionPool[Any]) -> feed.Cursor:
    """The samples written (one change each); the cursor before them."""
    before = await feed.head(pool)
    store = DocumentStore(pool)
    for source, document_id, metadata, _ in SAMPLES:
        await store.upsert(_doc(source, document_id, metadata))
    await servable(pool)
    return before


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url="postgresql://unused", read_token=READ)
    app: Starlette = create_app(settings, pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://test",
            headers={"Authorization": f"Bearer {READ}"},
        ) as c,
    ):
        yield c


async def test_the_sql_rule_gives_each_kind_and_lists_the_same_names(
    pool: AsyncConnectionPool[Any],
) -> None:
    async with pool.connection() as conn:
        for source, document_id, metadata, kind in SAMPLES:
            cur = await conn.execute(
                "select document_kind(%s, %s, %s::jsonb)", (source, document_id, _json(metadata))
            )
            assert (await cur.fetchone()) == (kind,), document_id
        cur = await conn.execute("select document_kinds()")
        assert (await cur.fetchone()) == (list(DOCUMENT_KINDS),)
    assert check_kind("") is None and check_kind("canvas") == "canvas"
    assert check_kinds(["file", "page", "file"]) == ["file", "page"]
    with pytest.raises(UnknownKind, match="known: page, database, table, conversation, file, canvas"):
        check_kind("pdf")


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value)


async def test_the_listing_and_a_document_show_and_filter_by_kind(
    written: feed.Cursor, client: httpx.AsyncClient
) -> None:
    listed = (await client.get("/documents", params={"limit": 500})).json()["documents"]
    by_id = {d["document_id"]: d["kind"] for d in listed}
    assert by_id == {document_id: kind for _, document_id, _, kind in SAMPLES}
    for kind in DOCUMENT_KINDS:
        answer = await client.get("/documents", params={"kind": kind})
        assert answer.status_code == 200
        got = {d["document_id"] for d in answer.json()["documents"]}
        assert got == {document_id for _, document_id, _, k in SAMPLES if k == kind}, kind
        assert all(d["kind"] == kind for d in answer.json()["documents"])
    one = (await client.get("/documents/slack/canvas:F0456CANV")).json()["document"]
    assert one["kind"] == "canvas"


async def test_the_feed_carries_each_changes_kind_and_filters_by_it(
    written: feed.Cursor, client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    after = written.encode()
    every = (await client.get("/documents/changes", params={"after": after})).json()["changes"]
    assert {c["document_id"]: c["kind"] for c in every} == {d: k for _, d, _, k in SAMPLES}
    files = (await client.get("/documents/changes", params={"after": after, "kind": "file"})).json()
    assert [c["document_id"] for c in files["changes"]] == ["file:/s3/secure/report.pdf", "file:F0123FILE"]
    assert all(c["op"] == "upsert" for c in files["changes"])
    # the filtered read's cursor moved past the changes it skipped
    page = await feed.read_changes(pool, written, 100, document_kind="table")
    assert [c.document_id for c in page.changes] == ["2f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"]
    assert page.next == (await feed.read_changes(pool, written, 100)).next
    # a tombstone keeps its kind
    await DocumentStore(pool).mark_deleted("slack", ["canvas:F0456CANV"])
    await servable(pool)
    gone = await feed.read_changes(pool, page.next, 100, document_kind="canvas")
    assert [(c.op, c.kind) for c in gone.changes] == [("delete", "canvas")]


async def test_a_bad_kind_is_a_400_naming_the_kinds(client: httpx.AsyncClient) -> None:
    for path in ("/documents", "/documents/changes"):
        answer = await client.get(path, params={"kind": "pdf"})
        assert answer.status_code == 400
        assert answer.json() == {
            "error": "bad_request",
            "detail": "kind must be a kind of document: one of page, database, table, "
            "conversation, file, canvas; got 'pdf'",
        }
        # the kind of a change (op) is another parameter's business
        assert (await client.get(path, params={"kind": "upsert"})).status_code == 400


async def test_debounce_documents_lists_one_kind(
    written: feed.Cursor, pool: AsyncConnectionPool[Any]
) -> None:
    rows = await reads.latest_documents(pool, source_type=None, limit=50, document_kind="conversation")
    assert [(r["document_id"], r["kind"]) for r in rows] == [("C0123ABCD/1732450000.000100", "conversation")]
