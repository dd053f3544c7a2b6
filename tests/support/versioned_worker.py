"""A worker process whose ``versioned`` source stands for a real API with changing pages.

The test schema's ``api_pages (page, version)`` is the source's current state; a sync reads
the page's version (the "fetch"), may fail transiently (``FAIL_RATE``, the job is retried with
backoff), and writes the document ``v<version>`` through the (fenced) document store. Each
sync is logged in ``sync_log`` with its job, the version it read and whether its write landed.
Run as ``python tests/support/versioned_worker.py`` with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from debounce import registry
from debounce.cli import run_worker
from debounce.config import Settings
from debounce.contract import SyncContext, SyncResult
from debounce.documents.store import Document, DocumentStore, LeaseLost
from debounce.infra.db import fetch_one
from debounce.infra.logs import configure
from debounce.types import SyncJob

FAIL_RATE = float(os.environ.get("FAIL_RATE", "0.1"))


class VersionedIntegration:
    source_type = "versioned"

    def __init__(self) -> None:
        self.rng = random.Random(os.getpid())

    async def _log(self, store: DocumentStore, job: SyncJob, version: int, landed: bool) -> None:
        await fetch_one(
            store.db,
            "insert into sync_log (job_id, page, version, landed, started_revision) "
            "values (%(job)s, %(page)s, %(version)s, %(landed)s, %(rev)s)",
            {
                "job": job.id,
                "page": job.source_page_id,
                "version": version,
                "landed": landed,
                "rev": job.claimed_revision,
            },
        )

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        store = context.store
        assert isinstance(store, DocumentStore)  # the worker's, fenced by the claim
        row = await fetch_one(
            store.db, "select version from api_pages where page = %(p)s", {"p": job.source_page_id}
        )
        version = int(row["version"]) if row else 0
        await asyncio.sleep(self.rng.uniform(0, 0.02))  # the API's latency
        if self.rng.random() < FAIL_RATE:
            raise ConnectionError("simulated transient API failure")
        try:
            await store.upsert(
                Document(
                    source_type="versioned",
                    document_id=job.source_page_id,
                    source_page_id=job.source_page_id,
                    title=job.source_page_id,
                    content=f"v{version}",
                )
            )
        except LeaseLost:
            await self._log(store, job, version, False)
            raise
        await self._log(store, job, version, True)
        return SyncResult(written=1)

    async def aclose(self) -> None:
        return None


def main() -> int:
    registry.register("versioned", lambda settings: VersionedIntegration())
    settings = Settings.from_env()
    configure(settings.log_format, "WARNING")
    return asyncio.run(run_worker(settings))


if __name__ == "__main__":
    sys.exit(main())
