"""Files as documents of their own, synced as their own jobs by the real worker (issue 39):
a source's sync reports the files its page shows; the worker enqueues one bulk-lane file job
each, downloads it from the file-host stand-in over loopback (an expired presigned URL
refreshed through the source, one request), extracts it in a child process and writes the
file document with its parent's audience; a file the page stops showing is tombstoned; an
unchanged file is not enqueued again; hostile or unreadable files end as documents that say
why."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from PIL import Image
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.config import Settings
from debounce.contract import (
    Audience,
    Document,
    FileRef,
    FileRefresher,
    SyncContext,
    SyncJob,
    SyncResult,
)
from debounce.documents.store import DocumentStore
from debounce.infra.secrets import Keyring, new_key
from debounce.queue.backfills import BULK_PRIORITY
from debounce.types import JobEvent
from debounce.worker import Worker
from debounce.worker.files import FILE_DEBOUNCE_SECONDS
from standins.file_host import FileHost
from standins.sample_files import spreadsheet, text_pdf
from standins.server import BackgroundServer

PDF = "application/pdf"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class PageWithFiles:
    """A source whose one page shows the files in :attr:`shown`; refreshes expired URLs."""

    source_type = "noop"

    def __init__(self, host: FileHost) -> None:
        self.host = host
        self.shown: list[FileRef] = []
        self.refreshed: list[str] = []

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        links = "\n".join(f"- [{r.name}]({r.url}) (document `{r.document_id()}`)" for r in self.shown)
        await context.writer().upsert(
            Document(
                source_type="noop",
                document_id=job.source_page_id,
                source_page_id=job.source_page_id,
                title="Handbook",
                content=f"# Handbook\n\n{links}\n",
                url="https://example.test/handbook",
                audience=Audience("workspace"),
            )
        )
        return SyncResult(written=1, files=tuple(self.shown))

    async def refresh_file(self, ref: FileRef, context: SyncContext) -> FileRef:
        await context.charge()
        self.refreshed.append(ref.file_id)
        return ref.with_url(self.host.presign(ref.file_id.removeprefix("/s3/")))

    async def aclose(self) -> None:
        return None


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost()
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


@pytest.fixture
async def worker(
    pool: AsyncConnectionPool[Any], database_url: str, host: FileHost
) -> AsyncIterator[Callable[[PageWithFiles], Worker]]:
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    def start(source: PageWithFiles) -> Worker:
        settings = Settings(
            database_url="unused",
            lease_seconds=5,
            poll_interval_seconds=0.2,
            worker_concurrency=4,
            shutdown_grace_seconds=2,
            file_token_hosts=(host.base_url.removeprefix("http://"),),
            file_max_bytes=200_000,
        )
        w = Worker(settings, pool, {"noop": source}, conninfo=database_url)
        started.append((w, asyncio.create_task(w.run())))
        return w

    yield start
    for w, task in started:
        w.stop()
        await asyncio.wait_for(task, 15)


async def until(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def hosted(
    host: FileHost,
    key: str,
    data: bytes,
    media_type: str,
    name: str,
    *,
    expired: bool = False,
    stamp: str = "v1",
) -> FileRef:
    host.add(key, data, media_type)
    url = host.presign(key, now=time.time() - 7200 if expired else None)
    return FileRef(
        file_id=f"/s3/{key}",
        name=name,
        parent_document_id="page-1",
        url=url,
        media_type=media_type,
        edit_stamp=stamp,
        locator=f"block-{key}",
    )


async def sync_page(pool: AsyncConnectionPool[Any]) -> None:
    await queue.enqueue(pool, [JobEvent("noop", "page-1", {}, None, 0, 0)])


async def file_doc(store: DocumentStore, ref: FileRef) -> dict[str, Any] | None:
    return await store.get("noop", ref.document_id())


async def test_files_become_documents_of_their_own(
    pool: AsyncConnectionPool[Any], host: FileHost, worker: Callable[[PageWithFiles], Worker]
) -> None:
    store = DocumentStore(pool)
    source = PageWithFiles(host)
    scan = io.BytesIO()
    Image.new("RGB", (120, 80), "white").save(scan, "PDF")
    pdf = hosted(
        host,
        "w/1/policy.pdf",
        text_pdf([["Travel policy", "Economy class only."]]),
        PDF,
        "policy.pdf",
        expired=True,
    )
    sheet = hosted(
        host, "w/2/budget.xlsx", spreadsheet({"2026": [["team", "budget"], ["ops", 12]]}), XLSX, "budget.xlsx"
    )
    scanned = hosted(host, "w/3/scan.pdf", scan.getvalue(), PDF, "scan.pdf")
    big = hosted(host, "w/4/big.txt", b"x" * 300_000, "text/plain", "big.txt")
    private = FileRef(
        file_id="F0001",
        name="notes.txt",
        parent_document_id="page-1",
        url=f"{host.base_url}/files-pri/T1-F0001/notes.txt",
        media_type="text/plain",
        with_token=True,
    )
    host.add("T1-F0001", b"private notes", "text/plain")
    source.shown = [pdf, sheet, scanned, big, private]
    worker(source)
    await sync_page(pool)

    docs = await until(lambda: _all(store, source.shown))
    by_id = {d["document_id"]: d for d in docs}
    pdf_doc = by_id[pdf.document_id()]
    assert pdf_doc["content"] == "Travel policy\nEconomy class only."
    assert pdf_doc["title"] == "policy.pdf"
    assert pdf_doc["source_page_id"] == "file:/s3/w/1/policy.pdf"
    assert pdf_doc["audience_kind"] == "workspace"  # the parent's
    assert pdf_doc["url"] == "https://example.test/handbook"
    meta = pdf_doc["metadata"]
    assert (meta["kind"], meta["parent_document_id"], meta["media_type"]) == ("file", "page-1", PDF)
    assert meta["extraction"]["status"] == "extracted" and meta["extraction"]["pages"] == 1
    assert source.refreshed == [pdf.file_id]  # the expired URL, refreshed once
    assert by_id[sheet.document_id()]["content"] == "## 2026\n\n| team | budget |\n|---|---|\n| ops | 12 |"
    assert by_id[scanned.document_id()]["content"] == (
        "_(no text extracted from scan.pdf: no text layer (scanned): 1 page(s) of images)_"
    )
    assert by_id[scanned.document_id()]["metadata"]["extraction"]["code"] == "no_text"
    too_large = by_id[big.document_id()]["metadata"]["extraction"]
    assert too_large["reason"] == "too large: 0.3 MB > 0.2 MB (declared)"
    assert by_id[private.document_id()]["metadata"]["extraction"] == {
        "status": "failed",
        "code": "missing_scope",
        "reason": "a sign-in page where a file was expected: the token lacks the files:read scope",
    }
    jobs = (await queue.list_jobs(pool, source_type="noop")).jobs
    file_jobs = [j for j in jobs if j.source_page_id.startswith("file:")]
    assert len(file_jobs) == 5 and {j.priority for j in file_jobs} == {BULK_PRIORITY}

    # The page shows the PDF again (a new URL, the same file) and no longer the spreadsheet.
    source.shown = [dataclasses.replace(pdf, url=host.presign("w/1/policy.pdf")), scanned, big, private]
    await sync_page(pool)
    await until(lambda: _deleted(store, sheet))
    await asyncio.sleep(FILE_DEBOUNCE_SECONDS + 0.5)  # a file job would be due by now
    jobs = (await queue.list_jobs(pool, source_type="noop")).jobs
    assert len([j for j in jobs if j.source_page_id.startswith("file:")]) == 5  # none new
    assert (await file_doc(store, pdf))["deleted_at"] is None  # type: ignore[index]

    # A new edit stamp: the file job runs again; the same bytes are not extracted again.
    first = await file_doc(store, pdf)
    assert first is not None
    before = first["synced_at"]
    source.shown = [dataclasses.replace(pdf, url=host.presign("w/1/policy.pdf"), edit_stamp="v2")]
    await sync_page(pool)
    await until(lambda: _deleted(store, scanned))
    await until(lambda: _synced_again(store, pdf, before))
    doc = await file_doc(store, pdf)
    assert doc is not None and doc["content"] == "Travel policy\nEconomy class only."
    assert doc["metadata"]["edit_stamp"] == "v2"
    assert doc["metadata"]["extraction"] == first["metadata"]["extraction"]  # not extracted again


async def _all(store: DocumentStore, refs: list[FileRef]) -> list[dict[str, Any]] | None:
    docs = [await file_doc(store, r) for r in refs]
    return None if any(d is None for d in docs) else docs  # type: ignore[return-value]


async def _deleted(store: DocumentStore, ref: FileRef) -> bool:
    doc = await file_doc(store, ref)
    return doc is not None and doc["deleted_at"] is not None


async def _synced_again(store: DocumentStore, ref: FileRef, before: Any) -> bool:
    doc = await file_doc(store, ref)
    return doc is not None and doc["metadata"].get("edit_stamp") == "v2" and doc["synced_at"] > before


def test_the_scripted_source_refreshes_like_a_source() -> None:
    assert isinstance(PageWithFiles(FileHost()), FileRefresher)


async def test_a_sign_in_page_is_the_workspace_missing_files_read(
    pool: AsyncConnectionPool[Any], database_url: str, host: FileHost
) -> None:
    """Slack answers ``url_private`` with 200 and an HTML sign-in page for a token without
    ``files:read``: the file's document says so, and the workspace records the scope."""
    key = new_key()
    saved = await workspaces.save(
        pool,
        Keyring(key),
        source_type="noop",
        external_id="T1",
        name="Team one",
        credentials={"access_token": "xoxb-without-files-read"},
    )
    host.add("T1-F0002", b"private notes", "text/plain")
    private = FileRef(
        file_id="F0002",
        name="notes.txt",
        parent_document_id="page-1",
        url=f"{host.base_url}/files-pri/T1-F0002/notes.txt",
        media_type="text/plain",
        with_token=True,
    )
    source = PageWithFiles(host)
    source.shown = [private]
    settings = Settings(
        database_url="unused",
        lease_seconds=5,
        poll_interval_seconds=0.2,
        worker_concurrency=4,
        shutdown_grace_seconds=2,
        file_token_hosts=(host.base_url.removeprefix("http://"),),
        secret_key=key,
    )
    w = Worker(settings, pool, {"noop": source}, conninfo=database_url)
    task = asyncio.create_task(w.run())
    try:
        event = JobEvent("noop", "page-1", {}, None, 0, 0, workspace_id=int(saved["id"]))
        await queue.enqueue(pool, [event])
        doc = await until(lambda: file_doc(DocumentStore(pool), private))
        assert doc["metadata"]["extraction"]["code"] == "missing_scope"
        row = (await until(lambda: _missing(pool, int(saved["id"]))))[0]
        assert row["missing_scopes"] == ["files:read"] and row["missing_scopes_at"] is not None
    finally:
        w.stop()
        await asyncio.wait_for(task, 15)


async def _missing(pool: AsyncConnectionPool[Any], workspace_id: int) -> list[dict[str, Any]]:
    rows = await workspaces.list_workspaces(pool, workspace_id)
    return rows if rows and rows[0]["missing_scopes"] else []
