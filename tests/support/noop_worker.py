"""A worker process whose ``noop`` source records each sync in ``noop_log`` (test schema).

The payload steers it: ``{"sleep": s}`` sleeps ``s`` seconds on the job's first sync only (so a
job that a killed or stopped worker left behind completes quickly elsewhere).
Run as ``python tests/support/noop_worker.py`` with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import asyncio
import os
import sys

from debounce import registry
from debounce.cli import run_worker
from debounce.config import Settings
from debounce.documents.store import DocumentStore
from debounce.infra.db import fetch_one
from debounce.infra.logs import configure
from debounce.types import SyncJob
from standins.noop import NoopSyncer


async def record(store: DocumentStore, job: SyncJob) -> int:
    """Log the sync in ``noop_log``; returns how many syncs of this job were logged before."""
    row = await fetch_one(
        store.db,
        "with earlier as (select count(*) as n from noop_log where job_id = %(id)s), "
        "ins as (insert into noop_log (job_id, worker_pid, attempts) "
        "values (%(id)s, %(pid)s, %(attempts)s)) select n from earlier",
        {"id": job.id, "pid": os.getpid(), "attempts": job.attempts},
    )
    return int(row["n"]) if row is not None else 1


def main() -> int:
    registry.register(
        "noop",
        lambda settings: NoopSyncer(record=record, sleep_first_only=True),
    )
    settings = Settings.from_env()
    configure(settings.log_format, "INFO")
    return asyncio.run(run_worker(settings))


if __name__ == "__main__":
    sys.exit(main())
