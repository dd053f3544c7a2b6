"""Drain N no-op jobs with pgqueuer or procrastinate, for the worker-throughput comparison.

``python -m bench.rivals pgqueuer|procrastinate setup|work URL [N]``: ``setup`` installs the
library's schema and enqueues N no-op jobs; ``work`` runs one worker process until the queue is
empty, then exits. The orchestrator times the drain by polling the library's tables, the same
way it times debounce's worker.

Configurations (each library's own documented/benchmarked setup, not tuned down):

- pgqueuer: the library's own drain benchmark (tools/benchmark.py in its repository): asyncpg
  driver, uvloop, 5 ``PgQueuer`` consumers per process each on its own connection,
  ``batch_size=10``, ``mode=drain``; an ``async def`` no-op entrypoint.
- procrastinate: the recommended async ``PsycopgConnector``, an ``async def`` no-op task, worker
  ``concurrency=8`` (as debounce's default), ``listen_notify=True``, ``wait=False`` (stop
  when caught up), ``delete_jobs="never"`` (defaults).
"""

from __future__ import annotations

import asyncio
import sys


def asyncpg_dsn(conninfo: str) -> str:
    """asyncpg wants a URL; the orchestrator passes libpq key=value strings."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    if conninfo.startswith(("postgres://", "postgresql://")):
        return conninfo
    d = conninfo_to_dict(conninfo)
    auth = quote(str(d.get("user", "postgres")))
    if d.get("password"):
        auth += ":" + quote(str(d["password"]))
    return (
        f"postgresql://{auth}@{d.get('host', '127.0.0.1')}:{d.get('port', 5432)}"
        f"/{quote(str(d.get('dbname', 'postgres')))}"
    )


PGQ_CONSUMERS = 5
PGQ_BATCH = 10
PROCRASTINATE_CONCURRENCY = 8


async def pgq_setup(url: str, n: int) -> None:
    import asyncpg
    from pgqueuer import Queries
    from pgqueuer.db import AsyncpgDriver

    conn = await asyncpg.connect(dsn=asyncpg_dsn(url))
    try:
        q = Queries(AsyncpgDriver(conn))
        if await q.schema_is_installed():
            await q.uninstall()
        await q.install()
        step = 5000
        for start in range(0, n, step):
            k = min(step, n - start)
            await q.enqueue(["noop"] * k, [None] * k, [0] * k)
    finally:
        await conn.close()


async def pgq_work(url: str) -> None:
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.domain.types import QueueExecutionMode
    from pgqueuer.models import Job

    async def consumer() -> None:
        conn = await asyncpg.connect(dsn=asyncpg_dsn(url))
        try:
            pgq = PgQueuer(AsyncpgDriver(conn))

            @pgq.entrypoint("noop")
            async def noop(job: Job) -> None:
                return None

            await pgq.run(batch_size=PGQ_BATCH, mode=QueueExecutionMode.drain)
        finally:
            await conn.close()

    await asyncio.gather(*(consumer() for _ in range(PGQ_CONSUMERS)))


def _procrastinate_app(url: str):  # type: ignore[no-untyped-def]
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(i: int = 0) -> None:
        return None

    return app


async def procrastinate_setup(url: str, n: int) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        async with app.connector.pool.connection() as conn:
            cur = await conn.execute("select to_regclass('procrastinate_jobs') is not null")
            installed = (await cur.fetchone())[0]
            if installed:
                await conn.execute("delete from procrastinate_jobs")
        if not installed:
            await app.schema_manager.apply_schema_async()
        task = app.tasks["noop"]
        step = 1000
        for start in range(0, n, step):
            await task.batch_defer_async(*({"i": i} for i in range(start, min(n, start + step))))


async def procrastinate_work(url: str) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        await app.run_worker_async(
            concurrency=PROCRASTINATE_CONCURRENCY,
            wait=False,
            listen_notify=True,
            install_signal_handlers=False,
        )


def main(argv: list[str]) -> int:
    lib, action, url = argv[0], argv[1], argv[2]
    n = int(argv[3]) if len(argv) > 3 else 0
    if lib == "pgqueuer":
        import uvloop

        uvloop.run(pgq_setup(url, n) if action == "setup" else pgq_work(url))
    elif lib == "procrastinate":
        asyncio.run(procrastinate_setup(url, n) if action == "setup" else procrastinate_work(url))
    else:
        raise SystemExit(f"unknown library {lib!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
