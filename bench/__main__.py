"""``python -m bench [--quick] [--only NAME ...] [--database-url URL] [--out FILE]``.

Runs the benchmarks and prints one JSON object per line on stdout (progress on stderr). Each
benchmark works in its own throwaway database ``bench_<name>_<hex>`` on the server of
``--database-url`` (default ``$DATABASE_URL``, else postgresql://postgres@127.0.0.1:5432/postgres)
and drops it afterwards; every subprocess is killed at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
import traceback
from datetime import UTC, datetime

from bench import (
    backfill,
    coalesce,
    common,
    deadlocks,
    feed,
    files,
    freshness,
    growth,
    ingest,
    partitions,
    push,
    scale,
    throughput,
    wakeup,
)

BENCHMARKS = {
    "ingest": ingest.run,  # 1 (+ web memory, 5)
    "coalescing": coalesce.run,  # 2
    "worker": throughput.run,  # 3 (+ worker memory, 5)
    "wakeup": wakeup.run,  # 4
    "growth": growth.run,  # 6
    "freshness": freshness.run,  # API budgets: staleness, requests, 429s (issue 12, 13)
    "scale": scale.run,  # the claim against 0 … 10 000 workspaces (issue 22)
    "feed": feed.run,  # the change feed: write overhead, changes/s served (issue 23)
    "backfill": backfill.run,  # a Notion page sync's requests, before/after (issue 31)
    "deadlocks": deadlocks.run,  # a mixed load: pg_stat_database.deadlocks stays 0 (issue 29)
    "push": push.run,  # push delivery: keeps up with writes, lag, idle cost (issue 40)
    "files": files.run,  # files' extraction: the child process's cost (issue 39)
    "partitions": partitions.run,  # the change log's prune: a partition drop (issue 40)
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smoke run, about 4 minutes (CI runs it)")
    p.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or common.DEFAULT_URL)
    p.add_argument("--out", help="also write the JSON lines to this file")
    args = p.parse_args(argv)
    # SIGTERM ends the run through the normal exit path, so atexit kills every child.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    common.emit(
        "run",
        mode="quick" if args.quick else "full",
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        cpus=os.cpu_count(),
        python=platform.python_version(),
        postgres=common.server_version(args.database_url),
    )
    failed = []
    for name in args.only or list(BENCHMARKS):
        t0 = time.monotonic()
        try:
            BENCHMARKS[name](args.database_url, args.quick)
        except Exception as exc:  # report and go on with the others
            traceback.print_exc()
            common.emit("error", benchmark=name, error=f"{type(exc).__name__}: {exc}")
            failed.append(name)
        common.note(f"{name}: {time.monotonic() - t0:.1f} s")
    common.emit("done", seconds=round(time.monotonic() - started, 1), failed=failed)
    if args.out:
        with open(args.out, "w") as f:
            for record in common.RESULTS:
                f.write(json.dumps(record, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
