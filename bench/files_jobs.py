"""What a file job costs as a whole, and what files cost other workspaces (issue 39); part of
``python -m bench --only files`` (:mod:`bench.files`).

- **A whole file job** (:meth:`debounce.worker.files.FileJobs.run`, as the worker calls it):
  a 1-page PDF downloaded from the file-host stand-in over loopback (a presigned URL), its
  text extracted in the child process, its document written to Postgres. Each run is a new
  file (nothing skipped by the content hash); the figure is the median. Goal: p50 <= 150 ms.
- **Other workspaces' freshness**: the real worker (``worker_concurrency`` 8, then 4;
  ``workspace_concurrency`` 4) syncs workspace B's live edits (one every 50 ms, each a page
  written) alone, then while workspace A's page shows 20 PDFs of :data:`LOAD_PAGES` pages
  (20 bulk-lane file jobs). A live edit's lag is from its enqueue (debounce 0) to its sync's
  start. Goal: B's p95 lag under A's files is at most its p95 alone plus the longest one
  file job held a slot (a live job waits at most for one slot to free: files take no more
  than their share of the slots).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from psycopg_pool import AsyncConnectionPool

from bench.common import note, percentiles
from debounce import queue, workspaces
from debounce.config import Settings
from debounce.contract import Audience, Document, FileRef, SyncContext, SyncJob, SyncResult
from debounce.documents.store import DocumentStore
from debounce.infra.secrets import Keyring, new_key
from debounce.queue.backfills import BULK_PRIORITY
from debounce.types import JobEvent
from debounce.worker import Worker
from debounce.worker.files import FileJobs
from standins.file_host import FileHost

__all__ = ["LOAD_PAGES", "freshness_under_files", "whole_file_jobs"]

PDF = "application/pdf"
SOURCE = "bench"
#: The pages of each of the 20 PDFs workspace A's page shows.
LOAD_PAGES = 10


def _parent(document_id: str) -> Document:
    return Document(
        source_type=SOURCE,
        document_id=document_id,
        source_page_id=document_id,
        title=document_id,
        content=f"# {document_id}\n",
        url=f"https://example.test/{document_id}",
        audience=Audience("workspace"),
    )


async def _pool(url: str) -> AsyncConnectionPool[Any]:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=2, max_size=24, open=False, kwargs={"autocommit": True}, timeout=30
    )
    await pool.open(wait=True)
    return pool


def _settings(url: str, host: FileHost, **extra: Any) -> Settings:
    return Settings(
        database_url=url,
        poll_interval_seconds=0.05,
        file_token_hosts=(host.base_url.removeprefix("http://"),),
        **extra,
    )


async def whole_file_jobs(url: str, host: FileHost, pdf: bytes, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` whole file jobs of the 1-page ``pdf`` (one more, first,
    untimed: the connections warm)."""
    pool = await _pool(url)
    try:
        store = DocumentStore(pool)
        jobs = FileJobs(_settings(url, host), pool, store)
        await store.upsert(_parent("parent"))
        times: list[float] = []
        for i in range(repeats + 1):
            key = f"one/{i}/brief.pdf"
            host.add(key, pdf, PDF)
            ref = FileRef(f"/s3/{key}", "brief.pdf", "parent", host.presign(key), PDF)
            event = JobEvent(
                SOURCE, ref.job_key(), ref.to_payload(), None, 3600, 3600, priority=BULK_PRIORITY
            )
            (brief,) = await queue.enqueue(pool, [event])
            assert brief.job_id is not None
            job = await queue.get(pool, brief.job_id)
            assert job is not None
            started = time.perf_counter()
            result = await jobs.run(job, SyncContext(store=store), None)
            if i:
                times.append(time.perf_counter() - started)
            assert result.written == 1, result
        return times
    finally:
        await pool.close()


class _Pages:
    """A source whose page jobs write the page and report :attr:`files` of it; records when
    each job's sync started (:attr:`started`)."""

    source_type = SOURCE

    def __init__(self) -> None:
        self.files: dict[str, tuple[FileRef, ...]] = {}
        self.started: dict[str, float] = {}

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        self.started[job.source_page_id] = time.monotonic()
        await context.writer().upsert(_parent(job.source_page_id))
        return SyncResult(written=1, files=self.files.get(job.source_page_id))

    async def aclose(self) -> None:
        return None


async def _live_edits(
    pool: AsyncConnectionPool[Any], source: _Pages, workspace_id: int, label: str, until: Any
) -> list[float]:
    """Workspace ``workspace_id``'s live edits, one every 50 ms while ``until()`` is false (at
    least 20, for 20 s at most); returns each one's lag (seconds, enqueue → sync start)."""
    sent: dict[str, float] = {}
    n = 0
    give_up = time.monotonic() + 20
    while n < 20 or not (await until() or time.monotonic() > give_up):
        key = f"{label}-{n}"
        sent[key] = time.monotonic()
        await queue.enqueue(pool, [JobEvent(SOURCE, key, {}, None, 0, 0, workspace_id=workspace_id)])
        n += 1
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + 60
    while any(k not in source.started for k in sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return [source.started[k] - t for k, t in sent.items() if k in source.started]


async def freshness_under_files(
    url: str, host: FileHost, pdf: bytes, slots: int, label: str
) -> dict[str, Any]:
    """Workspace B's live-edit lag alone and under workspace A's page of 20 PDFs (the module
    docstring), on a worker of ``slots`` slots (``workspace_concurrency`` stays 4); the
    figures, in milliseconds. ``label`` keeps the runs' keys apart."""
    key = new_key()
    pool = await _pool(url)
    source = _Pages()
    try:
        keyring = Keyring(key)
        ids = []
        for name in ("A", "B"):
            row = await workspaces.save(
                pool,
                keyring,
                source_type=SOURCE,
                external_id=name,
                name=f"workspace {name}",
                credentials={"access_token": f"token-{name}"},
            )
            ids.append(int(row["id"]))
        a_id, b_id = ids
        a_page = f"a-page-{label}"
        refs = []
        for i in range(20):
            file_key = f"load-{label}/{i}/attachment.pdf"
            host.add(file_key, pdf, PDF)
            refs.append(
                FileRef(f"/s3/{file_key}", f"attachment-{i}.pdf", a_page, host.presign(file_key), PDF)
            )
        source.files[a_page] = tuple(refs)
        settings = _settings(url, host, secret_key=key, worker_concurrency=slots, workspace_concurrency=4)
        worker = Worker(settings, pool, {SOURCE: source})
        spans: list[float] = []  # how long each file job held its slot (seconds)
        inner = worker.files.run

        async def timed(job: SyncJob, context: SyncContext, syncer: Any) -> SyncResult:
            began = time.monotonic()
            try:
                return await inner(job, context, syncer)
            finally:
                spans.append(time.monotonic() - began)

        worker.files.run = timed  # type: ignore[method-assign]
        task = asyncio.create_task(worker.run())
        try:
            alone = await _live_edits(pool, source, b_id, f"alone-{label}", _true)
            store = DocumentStore(pool)
            await queue.enqueue(pool, [JobEvent(SOURCE, a_page, {}, None, 0, 0, workspace_id=a_id)])

            async def files_started() -> bool:
                return any(k.startswith("file:") for k in await _processing(pool))

            deadline = time.monotonic() + 15
            while not await files_started() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            started = time.monotonic()

            async def files_done() -> bool:
                docs = [await store.get(SOURCE, r.document_id()) for r in refs]
                return all(d is not None for d in docs)

            loaded = await _live_edits(pool, source, b_id, f"loaded-{label}", files_done)
            files_seconds = time.monotonic() - started
        finally:
            worker.stop()
            await task
    finally:
        await pool.close()
    note(f"files: 20 file jobs of {LOAD_PAGES}-page PDFs took {files_seconds:.1f} s on {slots} slots")
    alone_p, loaded_p = percentiles(alone, (50, 95)), percentiles(loaded, (50, 95))
    longest = max(spans) if spans else 0.0
    return {
        "worker_slots": slots,
        "workspace_slots": 4,
        "live_edits_alone": len(alone),
        "live_edits_loaded": len(loaded),
        "alone_lag_p50_ms": round(alone_p["p50"] * 1000, 1),
        "alone_lag_p95_ms": round(alone_p["p95"] * 1000, 1),
        "loaded_lag_p50_ms": round(loaded_p["p50"] * 1000, 1),
        "loaded_lag_p95_ms": round(loaded_p["p95"] * 1000, 1),
        "file_job_p50_ms": round(statistics.median(spans) * 1000, 1) if spans else None,
        "file_job_max_ms": round(longest * 1000, 1),
        "files_seconds": round(files_seconds, 2),
        "goal": loaded_p["p95"] <= alone_p["p95"] + longest,
    }


async def _true() -> bool:
    return True


async def _processing(pool: AsyncConnectionPool[Any]) -> list[str]:
    async with pool.connection() as conn:
        rows = await conn.execute(
            "select source_page_id from sync_jobs where status = 'processing' and source_type = %s", (SOURCE,)
        )
        return [str(r[0]) for r in await rows.fetchall()]
