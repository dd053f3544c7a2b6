"""A worker process whose ``noop`` source records each sync in ``noop_log`` (test schema).

The payload steers it: ``{"sleep": s}`` sleeps ``s`` seconds on the job's first sync only (so a
job that a killed or stopped worker left behind completes quickly elsewhere).
Run as ``python tests/support/noop_worker.py`` with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import integrations
from debounce.cli import run_worker
from debounce.config import Settings
from debounce.db import fetch_one
from debounce.documents import DocumentStore
from debounce.logs import configure
from debounce.types import SyncJob
from integrations.base import SyncResult


class NoopIntegration:
    source_type = "noop"

    def __init__(self, store: DocumentStore | None) -> None:
        assert store is not None
        self.store = store

    def parse_webhook(self, headers: Any, body: bytes) -> Any:
        raise NotImplementedError

    async def sync(self, job: SyncJob) -> SyncResult:
        row = await fetch_one(
            self.store.db,
            "with earlier as (select count(*) as n from noop_log where job_id = %(id)s), "
            "ins as (insert into noop_log (job_id, worker_pid, attempts) "
            "values (%(id)s, %(pid)s, %(attempts)s)) select n from earlier",
            {"id": job.id, "pid": os.getpid(), "attempts": job.attempts},
        )
        first = row is not None and row["n"] == 0
        sleep = float(job.payload.get("sleep", 0))
        if sleep and first:
            await asyncio.sleep(sleep)
        return SyncResult(written=1)

    async def aclose(self) -> None:
        return None


def main() -> int:
    integrations.register("noop", lambda settings, store: NoopIntegration(store))
    settings = Settings.from_env()
    configure(settings.log_format, "INFO")
    return asyncio.run(run_worker(settings))


if __name__ == "__main__":
    sys.exit(main())
