"""docs/consumers.md's consumer (examples/consumer.py, shown verbatim in the doc) against a
running service: its SQLite index ends equal to the documents, through edits, deletions and a
410."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from test_sections import hundred_sections

from debounce.config import Settings
from debounce.documents import feed
from debounce.documents.sections import split_sections
from debounce.documents.store import Document, DocumentStore
from debounce.web import create_app
from standins.server import BackgroundServer

ROOT = Path(__file__).resolve().parent.parent
READ = "consumer-read-token"


def consumer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("consumer", ROOT / "examples" / "consumer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_shows_the_example_as_it_is() -> None:
    code = (ROOT / "examples" / "consumer.py").read_text()
    assert f"```python\n{code}```" in (ROOT / "docs" / "consumers.md").read_text()


def doc(document_id: str, content: str, source: str = "notion", title: str = "T") -> Document:
    return Document(
        source_type=source,
        document_id=document_id,
        source_page_id=document_id.split("/")[0],
        title=title,
        url=None,
        content=content,
    )


async def _server_docs(pool: AsyncConnectionPool[Any]) -> set[tuple[str, str, str, str]]:
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "select source_type, document_id, title, content from documents where deleted_at is null"
            )
        ).fetchall()
    return {tuple(r) for r in rows}


def _until_quiet(module: ModuleType, api: httpx.Client, index: Any) -> None:
    while module.step(api, index, wait=0):
        pass


async def test_the_consumer_keeps_its_index_equal_to_the_documents(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    module = consumer()
    store = DocumentStore(pool)
    await store.upsert(doc("page-a", "alpha"))
    await store.upsert(doc("C1/1.0", "thread", source="slack"))
    app = create_app(Settings(database_url=database_url, read_token=READ))
    index = module.open_index(str(tmp_path / "index.db"))
    with (
        BackgroundServer(app, lifespan="on") as server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {READ}"}, timeout=70) as api,
    ):

        async def check() -> None:
            await servable(pool)
            _until_quiet(module, api, index)  # blocking: the service runs in its own thread
            local = set(index.execute("select source, document_id, title, content from docs"))
            assert local == await _server_docs(pool)

        await check()
        await store.upsert(doc("page-a", "alpha 2", title="Renamed"))
        await store.upsert(doc("page-b", "beta"))
        await store.mark_deleted("slack", ["C1/1.0"])
        await check()
        assert {r[0] for r in index.execute("select document_id from docs")} == {"page-a", "page-b"}
        # A cursor the feed cannot follow: the consumer re-reads and goes on.
        index.execute("update feed set cursor = ?", (feed.Cursor("1", 1, 1).encode(),))
        index.commit()
        await store.upsert(doc("page-c", "gamma"))
        await check()


async def _line(stream: asyncio.StreamReader) -> str:
    return (await asyncio.wait_for(stream.readline(), 60)).decode().rstrip("\n")


async def test_the_consumer_says_what_it_does_and_ends_quietly_on_ctrl_c(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    """Issue 28: it printed nothing while it ran and ended in a 50-line traceback on Ctrl-C.
    Run as the doc says, in a subprocess: each change a line, a line when it waits, and
    Ctrl-C a last line and exit 130, its index saved."""
    store = DocumentStore(pool)
    await store.upsert(doc("page-a", "alpha", title="Alpha"))
    await servable(pool)
    app = create_app(Settings(database_url=database_url, read_token=READ))
    index = tmp_path / "index.db"
    waiting = "up to date; waiting for changes (Ctrl-C stops)"
    with BackgroundServer(app, lifespan="on") as server:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "examples" / "consumer.py"),
            server.url,
            READ,
            str(index),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            assert await _line(proc.stdout) == "read 1 documents; following the change feed"
            assert await _line(proc.stdout) == ("upsert notion page-a: Alpha (0 of 1 sections re-embedded)")
            assert await _line(proc.stdout) == waiting
            await store.upsert(doc("page-b", "beta", title="Beta"))
            assert [await _line(proc.stdout) for _ in range(2)] == [
                "upsert notion page-b: Beta (1 of 1 sections re-embedded)",
                waiting,
            ]
            # A one-paragraph edit in a 100-section document re-embeds one section.
            await store.upsert(doc("page-c", hundred_sections(), title="Handbook"))
            assert [await _line(proc.stdout) for _ in range(2)] == [
                "upsert notion page-c: Handbook (111 of 111 sections re-embedded)",
                waiting,
            ]
            await store.upsert(doc("page-c", hundred_sections(edit=50), title="Handbook"))
            assert [await _line(proc.stdout) for _ in range(2)] == [
                "upsert notion page-c: Handbook (1 of 111 sections re-embedded)",
                waiting,
            ]
            await store.mark_deleted("notion", ["page-a"])
            assert [await _line(proc.stdout) for _ in range(2)] == ["delete notion page-a: Alpha", waiting]
            proc.send_signal(signal.SIGINT)
            rest = (await asyncio.wait_for(proc.stdout.read(), 30)).decode()
            err = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
            assert await asyncio.wait_for(proc.wait(), 30) == 130
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert rest == f"stopped; {index} keeps the index and where to go on from\n"
    assert err == ""
    with sqlite3.connect(index) as db:
        assert [r[0] for r in db.execute("select document_id from docs")] == ["page-b", "page-c"]
        assert db.execute("select count(*) from sections").fetchone() == (1 + 111,)
        assert dict(db.execute("select id, embedding from sections where document_id = 'page-c'")) == {
            s.id: hundred_sections(edit=50)[s.start : s.end]
            for s in split_sections(hundred_sections(edit=50))
        }


def test_the_consumer_refuses_bad_arguments_in_one_line(database_url: str, tmp_path: Path) -> None:
    example = str(ROOT / "examples" / "consumer.py")
    usage = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=30)
    assert (usage.returncode, usage.stderr) == (1, "usage: python examples/consumer.py URL TOKEN index.db\n")
    app = create_app(Settings(database_url=database_url, read_token=READ))
    with BackgroundServer(app, lifespan="on") as server:
        wrong = subprocess.run(
            [sys.executable, example, server.url, "not-the-token", str(tmp_path / "index.db")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert wrong.returncode == 1
    assert wrong.stderr.startswith("error: 401 from ") and wrong.stderr.count("\n") == 1, wrong.stderr
    assert "read token" in wrong.stderr
