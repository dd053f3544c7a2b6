"""Deadlocks under a mixed load (issue 29): Postgres's own count must stay 0.

Every statement that changes jobs at once, from separate connections, for 20 s (quick 4 s) on
32 workspaces: two webhook streams (``enqueue`` batches, due now and debounced, some
taking a page over to another workspace), four claimers (``claim`` with a
workspace concurrency of 4) recording completions, failures and releases, a backfiller
(backfill pages and their re-checks), the reaper (expired leases), the pruner (prune, then
its upkeep: removed workspaces' jobs, backfills and documents finished, the lines repaired),
and a workspace removed (half the time with its documents purged) while its syncs finish, then
connected again (the same row). Reports ``pg_stat_database.deadlocks`` of the scratch database
before and after (the statements' lock order, docs/claim.md, "Keeping the line"; a removal
locks one row, "Removing a workspace"; 0, and nothing retries a statement the detector
cancelled), the statements that failed on a foreign key (0: workspace rows are never deleted)
and how many statements each kind ran.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from bench.common import emit, note, scratch_database
from debounce import queue, workspaces
from debounce.contract import BackfillItem
from debounce.documents.store import Document, DocumentStore, purge_removed
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import Failure, backfills
from debounce.types import EnqueueOutcome, JobEvent
from debounce.worker import maintenance

WORKSPACES = 32
PAGES = 400
DEADLOCKS = "select deadlocks from pg_stat_database where datname = current_database()"


async def _deadlocks(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute(DEADLOCKS)).fetchone()
        return int(row[0]) if row else 0


async def _load(url: str, seconds: float) -> dict[str, Any]:
    keys = Keyring(new_key())
    counts: dict[str, int] = {}
    errors: list[str] = []

    def count(kind: str, n: int = 1) -> None:
        counts[kind] = counts.get(kind, 0) + n

    async with AsyncConnectionPool(
        url, min_size=10, max_size=12, open=False, kwargs={"autocommit": True}, timeout=30
    ) as pool:
        ids: list[int] = []
        external: dict[int, str] = {}
        for i in range(WORKSPACES):
            row = await workspaces.save(
                pool,
                keys,
                source_type="notion",
                external_id=f"D{i}",
                name=f"D{i}",
                credentials={"access_token": f"t{i}"},
            )
            ids.append(int(row["id"]))
            external[int(row["id"])] = f"D{i}"
            for k in range(5):  # documents its syncs wrote, for the purges
                await DocumentStore(pool).upsert(
                    Document("notion", f"doc-{i}-{k}", f"doc-{i}-{k}", "d", "# d")
                )
            async with pool.connection() as conn:
                await conn.execute(
                    "update documents set workspace_id = %s where source_page_id like %s",
                    (row["id"], f"doc-{i}-%"),
                )
        stop = time.monotonic() + seconds
        rng = random.Random(29)

        async def guarded(kind: str, body: Any) -> None:
            while time.monotonic() < stop:
                try:
                    await body()
                except psycopg.errors.DeadlockDetected as exc:
                    errors.append(f"{kind}: {exc}")
                    count(f"{kind}_deadlocked")
                except psycopg.errors.ForeignKeyViolation as exc:
                    # a row referring to a workspace row that is gone: none ever is
                    errors.append(f"{kind}: {exc}")
                    count(f"{kind}_foreign_key_violations")

        async def webhooks(k: int) -> None:
            n = 0

            async def one() -> None:
                nonlocal n
                batch = [
                    JobEvent(
                        "notion",
                        f"page-{rng.randrange(PAGES)}",
                        {"n": n},
                        event_id=f"w{k}-{n}-{i}",
                        debounce_seconds=0.0 if i % 2 else 0.05,
                        max_wait_seconds=1.0,
                        workspace_id=rng.choice(ids),
                    )
                    for i in range(6)
                ]
                n += 1
                briefs = await queue.enqueue(pool, batch)
                count("webhook_batches")
                count(
                    "webhook_events_of_removed_workspaces",
                    sum(b.outcome is EnqueueOutcome.WORKSPACE_REMOVED for b in briefs),
                )

            await guarded("webhooks", one)

        async def claimer(k: int) -> None:
            async def one() -> None:
                got = await queue.claim(
                    pool,
                    f"c{k}",
                    limit=8,
                    lease_seconds=0.5,
                    source_slots={"notion": 8},
                    workspace_concurrency=4,
                )
                count("claims")
                if not got:
                    await asyncio.sleep(0.002)
                    return
                jobs = [c.job for c in got]
                rng.shuffle(jobs)
                third = max(1, len(jobs) // 3)
                await queue.settle(pool, completed=jobs[third:])
                count("completions")
                if len(jobs) > 1:
                    await queue.settle(
                        pool,
                        failed=[Failure(j, "bench", backoff_seconds=0.01) for j in jobs[: third // 2 or 1]],
                    )
                    count("failures")
                    rest = jobs[third // 2 or 1 : third]
                    if rest:
                        await queue.release(pool, rest)
                        count("releases")

            await guarded("claimer", one)

        async def backfiller() -> None:
            async def one() -> None:
                ws = rng.choice(ids)
                await backfills.request(pool, ws, "backfill")
                leased = await backfills.lease(pool, "enum", ["notion"], 30.0)
                if leased is None:
                    return
                items = [BackfillItem(f"page-{rng.randrange(PAGES)}", None) for _ in range(20)]
                await backfills.record_page(
                    pool, leased["id"], "enum", items, "next", lease_seconds=30.0, max_attempts=5
                )
                await backfills.finish(pool, leased["id"], "enum", max_attempts=5)
                count("backfill_pages")

            await guarded("backfiller", one)

        async def reaper() -> None:
            async def one() -> None:
                await queue.requeue_expired(pool)
                count("requeues")
                await asyncio.sleep(0.05)

            await guarded("reaper", one)

        async def remover() -> None:
            async def one() -> None:
                ws = ids.pop(rng.randrange(len(ids)))
                purge = rng.random() < 0.5
                await workspaces.remove(pool, ws, purge_documents=purge)
                count("removals")
                done = await queue.cancel_removed(pool, workspace_id=ws)
                count("removal_jobs_cancelled", done["jobs"])
                count("removal_backfills_cancelled", done["backfills"])
                if purge:
                    count("removal_documents_deleted", await purge_removed(pool, workspace_id=ws))
                await asyncio.sleep(0.1)
                row = await workspaces.save(
                    pool,
                    keys,
                    source_type="notion",
                    external_id=external[ws],
                    name="again",
                    credentials={"access_token": "again"},
                )
                if int(row["id"]) != ws:
                    errors.append(f"remover: {external[ws]} came back as {row['id']}, not {ws}")
                ids.append(ws)
                await asyncio.sleep(0.1)

            await guarded("remover", one)

        async def pruner() -> None:
            async def one() -> None:
                await queue.prune(pool, 0.0, event_older_than=3600.0, limit=500, exclusive=True)
                done = await maintenance.upkeep(pool, workspace_concurrency=4)
                count("prunes")
                count("pruner_jobs_cancelled", done["jobs"])
                await asyncio.sleep(0.3)

            await guarded("pruner", one)

        await asyncio.gather(
            webhooks(0),
            webhooks(1),
            *(claimer(k) for k in range(4)),
            backfiller(),
            reaper(),
            remover(),
            pruner(),
        )
    return {"counts": counts, "errors": errors[:3]}


def run(server_url: str, quick: bool) -> dict[str, Any]:
    seconds = 4.0 if quick else 20.0
    with scratch_database(server_url, "deadlocks") as url:
        before = asyncio.run(_deadlocks(url))
        note(f"deadlocks: mixed load for {seconds:.0f} s")
        outcome = asyncio.run(_load(url, seconds))
        time.sleep(1.0)  # backends report their counters about once a second
        after = asyncio.run(_deadlocks(url))
    violations = sum(n for k, n in outcome["counts"].items() if k.endswith("_foreign_key_violations"))
    return emit(
        "deadlocks",
        seconds=seconds,
        deadlocks=after - before,
        foreign_key_violations=violations,
        statements=outcome["counts"],
        errors=outcome["errors"],
        goal_no_deadlocks=after - before == 0,
        goal_no_foreign_key_violations=violations == 0,
    )
