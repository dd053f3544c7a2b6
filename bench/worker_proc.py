"""A debounce worker process (``debounce.cli.run_worker``) with one extra source, ``noop``.

``noop.sync`` does no I/O. With ``BENCH_LOG_SYNCS=1`` it first records the call in
``bench_syncs`` (job id, page, due time, database clock at start, event count, revision), which
the coalescing and wake-up benchmarks count; ``{"sleep": s}`` in the payload makes it sleep
``s`` seconds (a slow sync, so events can arrive while it runs). Configured by the same
environment as ``debounce worker`` (DATABASE_URL, DEBOUNCE_*).
"""

from __future__ import annotations

import os
import sys

from debounce import registry
from debounce.cli import run_worker
from debounce.config import Settings
from debounce.documents.store import DocumentStore
from debounce.infra import eventloop
from debounce.infra.db import execute
from debounce.infra.logs import configure
from debounce.types import SyncJob
from standins.noop import NoopSyncer

LOG_SYNCS = os.environ.get("BENCH_LOG_SYNCS") == "1"

CREATE_LOG_TABLE = """
create table if not exists bench_syncs (
    job_id bigint, source_page_id text, scheduled_at timestamptz, started_at timestamptz,
    event_count int, revision bigint, claimed_revision bigint, attempts int, pid int
)"""


async def record(store: DocumentStore, job: SyncJob) -> int:
    """Log the sync in ``bench_syncs`` (always counted as the job's first)."""
    await execute(
        store.db,
        "insert into bench_syncs values (%(id)s, %(page)s, %(due)s, clock_timestamp(), "
        "%(n)s, %(rev)s, %(crev)s, %(att)s, %(pid)s)",
        {
            "id": job.id,
            "page": job.source_page_id,
            "due": job.scheduled_at,
            "n": job.event_count,
            "rev": job.revision,
            "crev": job.claimed_revision,
            "att": job.attempts,
            "pid": os.getpid(),
        },
    )
    return 0


def main() -> int:
    registry.register("noop", lambda settings: NoopSyncer(record=record if LOG_SYNCS else None))
    settings = Settings.from_env()
    configure(settings.log_format, settings.log_level)
    return eventloop.run(run_worker(settings))


if __name__ == "__main__":
    sys.exit(main())
