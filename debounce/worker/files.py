"""Files as documents of their own, synced as their own jobs (issue 39).

After a sync that reports the files its documents show (:attr:`SyncResult.files`),
:meth:`FileJobs.after_sync` enqueues a **file job** (key ``file:<file id>``) for each file that
is new or changed as its parent shows it (name, the source's edit stamp, parent — never the
URL, which rotates) and tombstones the file documents the parent no longer shows. The parent
keeps, in its ``sync_state`` under ``files-of:<job key>``, what it showed last.

File jobs go to the **bulk lane** (priority :data:`~debounce.queue.backfills.BULK_PRIORITY`):
a download and an extraction take seconds, and a page's own text matters more than its
attachments' — so a page with twenty PDFs costs other workspaces' live edits nothing beyond
the bulk lane's share of the slots, and each PDF holds one slot for its own time only. They
are debounced (:data:`FILE_DEBOUNCE_SECONDS`), fair, leased and retried like every job.

:meth:`FileJobs.run` is a file job: download (:mod:`debounce.worker.extraction.download`: the
size cap on the bytes, the token only to the source's hosts, external hosts only when
allowed), refresh an expired URL through the source (:class:`FileRefresher`, one request of
the budget), skip the extraction when the bytes' hash is the stored one, else extract in a
child process (:mod:`debounce.worker.extraction`), and write the file document: its text, or a
text that says why there is none, with the parent's audience and ``metadata.kind = "file"``.
A file that cannot be had (too large, refused, encrypted, scanned, a crashed or hung parser)
completes its job with that reason in its document; only a failed download is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.config import Settings
from debounce.contract import (
    Audience,
    Document,
    DocumentWriter,
    FileRef,
    FileRefresher,
    FileTokenSource,
    PermanentError,
    SyncContext,
    Syncer,
    SyncJob,
    SyncResult,
    WriteOutcome,
)
from debounce.contract.files import FILE_KEY_PREFIX, FILES_STATE_PREFIX
from debounce.documents.store import DocumentStore
from debounce.infra.db import fetch_all
from debounce.infra.sql import queries
from debounce.queue.backfills import BULK_PRIORITY
from debounce.types import JobEvent
from debounce.worker import workspace_state
from debounce.worker.extraction import Extracted, ExtractionFailed, ExtractionLimits, extract_file
from debounce.worker.extraction.download import Downloaded, FetchPolicy, download, external_allowed

__all__ = ["FILE_DEBOUNCE_SECONDS", "FILE_MAX_WAIT_SECONDS", "FileJobs", "FileNotReady", "is_file_job"]

log = logging.getLogger("debounce.worker.files")

#: A file job's debounce window and max wait (seconds): a parent edited in a burst enqueues
#: its files once.
FILE_DEBOUNCE_SECONDS = 2.0
FILE_MAX_WAIT_SECONDS = 60.0
#: The ``sync_state`` key prefix of what a parent's job showed last.
STATE_PREFIX = FILES_STATE_PREFIX
_Q = queries("files")


class FileNotReady(Exception):
    """The file cannot be downloaded yet (a fresh Slack upload without its URL, a host that
    failed): transient, the job is retried with backoff."""


def is_file_job(job: SyncJob) -> bool:
    """Whether ``job`` syncs a file (its key is ``file:<file id>``)."""
    return job.source_page_id.startswith(FILE_KEY_PREFIX)


def _audience(row: dict[str, Any]) -> Audience | None:
    kind = row.get("audience_kind")
    if not kind:
        return None
    members, accessible = row.get("audience_members"), row.get("audience_accessible_by")
    return Audience(
        kind,
        tuple(members) if members is not None else None,
        tuple(accessible) if accessible is not None else None,
    )


class FileJobs:
    """The worker's side of files: enqueue after a parent's sync, run a file job.

    ``settings``: the ``DEBOUNCE_FILE_*`` limits and hosts; ``pool``: the worker's;
    ``store``: the worker's unfenced store (reads only: writes go through the job's context).
    """

    def __init__(self, settings: Settings, pool: AsyncConnectionPool[Any], store: DocumentStore) -> None:
        self.pool = pool
        self.store = store
        self.limits = ExtractionLimits.from_settings(settings)
        self.policy = FetchPolicy(
            max_bytes=settings.file_max_bytes,
            external_hosts=frozenset(settings.file_external_hosts),
            token_hosts=frozenset(settings.file_token_hosts),
            timeout_seconds=settings.file_timeout_seconds,
        )
        self.max_attempts = settings.max_attempts

    def may_fetch(self, ref: FileRef) -> bool:
        """Whether ``ref`` becomes a file document: always, but an external file (a Notion
        ``external`` file, a Slack remote file) only from a host the operator allows
        (``DEBOUNCE_FILE_EXTERNAL_HOSTS``); otherwise its parent keeps its link only."""
        return not ref.external or ref.url is None or external_allowed(ref.url, self.policy)

    async def after_sync(self, job: SyncJob, result: SyncResult, writer: DocumentWriter) -> int:
        """Enqueue file jobs for the files ``result`` shows that are new or changed (external
        ones only from allowed hosts: :meth:`may_fetch`), tombstone the ones it no longer
        shows; returns how many file jobs were enqueued. Nothing when the sync did not report
        files (``result.files is None``) or ``job`` is a file job.

        Raises:
            LeaseLost: the claim was lost (nothing of the bookkeeping was written).
        """
        if result.files is None or is_file_job(job):
            return 0
        key = STATE_PREFIX + job.source_page_id
        before: dict[str, list[Any]] = (await writer.get_state(job.source_type, key)).get("files", {})
        shown = {ref.file_id: ref for ref in result.files if self.may_fetch(ref)}
        events = [
            JobEvent(
                source_type=job.source_type,
                source_page_id=ref.job_key(),
                payload=ref.to_payload(),
                event_id=None,
                debounce_seconds=FILE_DEBOUNCE_SECONDS,
                max_wait_seconds=FILE_MAX_WAIT_SECONDS,
                priority=BULK_PRIORITY,
                max_attempts=self.max_attempts,
                workspace_id=job.workspace_id,
            )
            for ref in shown.values()
            if before.get(ref.file_id) != list(ref.identity())
        ]
        hidden = [file_id for file_id in before if file_id not in shown]
        # A file another parent's last sync shows stays (docs/files.md).
        elsewhere = await self._shown_elsewhere(job.source_type, key, hidden) if hidden else set()
        gone = [FILE_KEY_PREFIX + file_id for file_id in hidden if file_id not in elsewhere]
        if gone:
            await writer.mark_deleted(job.source_type, gone)
        await writer.set_state(
            job.source_type, key, {"files": {i: list(r.identity()) for i, r in shown.items()}}
        )
        if events:
            await queue.enqueue(self.pool, events)
        return len(events)

    async def _shown_elsewhere(self, source_type: str, key: str, file_ids: list[str]) -> set[str]:
        """Of ``file_ids``, those the last sync of another parent than ``key`` showed."""
        rows = await fetch_all(
            self.pool,
            _Q["files_shown_elsewhere"],
            {
                "source_type": source_type,
                "state_prefix": STATE_PREFIX,
                "state_key": key,
                "file_ids": file_ids,
            },
        )
        return {str(r["file_id"]) for r in rows}

    async def run(self, job: SyncJob, context: SyncContext, syncer: Syncer | None) -> SyncResult:
        """Sync one file job (see the module docstring).

        Raises:
            PermanentError: the job's payload names no file.
            FileNotReady: no URL yet, or the download failed (retried with backoff).
            LeaseLost, RateLimited, BudgetExhausted: as a sync.
        """
        try:
            ref = FileRef.from_payload(job.payload)
        except ValueError as exc:
            raise PermanentError(str(exc)) from None
        writer = context.writer()
        parent = await self.store.get(job.source_type, ref.parent_document_id)
        if parent is None or parent["deleted_at"] is not None:
            marked = await writer.mark_deleted(job.source_type, [ref.document_id()])
            return SyncResult(deleted=len(marked))
        refresher = syncer if isinstance(syncer, FileRefresher) else None
        if ref.url is None and refresher is not None:
            ref = await refresher.refresh_file(ref, context)
        if ref.url is None:
            raise FileNotReady(f"file {ref.file_id} has no download URL yet")
        stored = await self.store.get(job.source_type, ref.document_id())
        metadata: dict[str, Any] = {
            "kind": "file",
            "parent_document_id": ref.parent_document_id,
            "name": ref.name,
            "media_type": ref.media_type,
            "size": ref.size,
            "edit_stamp": ref.edit_stamp,
        }
        fd, path = tempfile.mkstemp(prefix="debounce-file-")
        os.close(fd)
        try:
            token = None
            if ref.with_token:
                token = (
                    syncer.file_token(context) if isinstance(syncer, FileTokenSource) else context.token(None)
                )
            outcome = await self._download(ref, path, context, refresher, token)
            if isinstance(outcome, ExtractionFailed):
                if outcome.code == "missing_scope" and job.workspace_id is not None:
                    # A sign-in page instead of the file: the workspace's error (its missing
                    # scopes: the dashboard, `debounce workspaces list`); the file's document
                    # says why it has no text.
                    await workspace_state.missing_scope(self.pool, job.workspace_id, "files:read")
                content, extraction = self._failed(ref, outcome)
            else:
                media_type = ref.media_type or outcome.media_type
                metadata.update(media_type=media_type, size=outcome.size, sha256=outcome.sha256)
                if (
                    stored is not None
                    and stored["deleted_at"] is None
                    and stored["metadata"].get("sha256") == outcome.sha256
                ):
                    return await self._write(
                        job,
                        writer,
                        ref,
                        parent,
                        stored["content"],
                        {**metadata, "extraction": stored["metadata"].get("extraction")},
                    )
                try:
                    extracted = await asyncio.to_thread(
                        extract_file, path, media_type, self.limits, name=ref.name
                    )
                    content, extraction = self._extracted(extracted)
                except ExtractionFailed as failed:
                    content, extraction = self._failed(ref, failed)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        return await self._write(job, writer, ref, parent, content, {**metadata, "extraction": extraction})

    async def _download(
        self,
        ref: FileRef,
        path: str,
        context: SyncContext,
        refresher: FileRefresher | None,
        token: str | None,
    ) -> Downloaded | ExtractionFailed:
        """The download, or the :class:`ExtractionFailed` that says why there is none; an
        expired URL (403) is refreshed once through the source."""
        assert ref.url is not None
        for attempt in (1, 2):
            try:
                return await download(
                    ref.url,
                    path,
                    self.policy,
                    token=token,
                    external=ref.external,
                    expect_html=ref.media_type.startswith("text/html"),
                )
            except ExtractionFailed as exc:
                if exc.code != "download_failed":
                    return exc
                if attempt == 1 and refresher is not None and "HTTP 403" in exc.reason:
                    ref = await refresher.refresh_file(ref, context)
                    if ref.url is None:
                        raise FileNotReady(f"file {ref.file_id}: its source no longer shows it") from None
                    continue
                raise FileNotReady(exc.reason) from None
        raise AssertionError("unreachable")

    @staticmethod
    def _extracted(extracted: Extracted) -> tuple[str, dict[str, Any]]:
        return extracted.markdown, {
            "status": "extracted",
            "format": extracted.format,
            "pages": extracted.pages,
            "truncated": extracted.truncated,
            "seconds": round(extracted.seconds, 3),
        }

    @staticmethod
    def _failed(ref: FileRef, failed: ExtractionFailed) -> tuple[str, dict[str, Any]]:
        status = "metadata_only" if failed.code == "not_extracted" else "failed"
        text = f"_(no text extracted from {ref.name or 'this file'}: {failed.reason})_"
        return text, {"status": status, "code": failed.code, "reason": failed.reason}

    async def _write(
        self,
        job: SyncJob,
        writer: DocumentWriter,
        ref: FileRef,
        parent: dict[str, Any],
        content: str,
        metadata: dict[str, Any],
    ) -> SyncResult:
        doc = Document(
            source_type=job.source_type,
            document_id=ref.document_id(),
            source_page_id=job.source_page_id,
            title=ref.name or ref.file_id,
            content=content,
            url=parent.get("url"),
            metadata=metadata,
            audience=_audience(parent),
        )
        outcome = await writer.upsert(doc)
        extraction = metadata.get("extraction") or {}
        if extraction.get("status") == "failed":
            log.info("file %s: %s", ref.file_id, extraction.get("reason"), extra=job.log_fields())
        if outcome is WriteOutcome.UNCHANGED:
            return SyncResult(unchanged=1)
        return SyncResult(written=1)
