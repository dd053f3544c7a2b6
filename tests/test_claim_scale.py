"""The claim at scale (issue 22, migration 011): workspaces come from an indexed line, so a
claim touches O(limit) workspaces, concurrent claimers take different workspaces, and the line
never loses work (docs/claim.md, "Keeping the line": the queue's statements move it only
earlier, the claim sets it exactly where it looks, a stale line costs a look; ``repair_lines``
repairs what a hand-written statement left).
Real Postgres, time controlled through ``now=``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import one_job
import psycopg
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.infra.secrets import Keyring, new_key
from debounce.infra.sql import queries
from debounce.types import ApiBudget, JobEvent, SyncJob
from debounce.workspaces import budgets
from debounce.workspaces.budgets import UNLIMITED

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
KEYS = Keyring(new_key())

# The lines' due times as stored, and as the jobs say they should be.
LINES = """
select w.id, w.live_due_at, w.bulk_due_at,
       (select min(j.scheduled_at) from sync_jobs j where j.workspace_id = w.id
           and j.status = 'pending' and j.priority >= 0) as live_truth,
       (select min(j.scheduled_at) from sync_jobs j where j.workspace_id = w.id
           and j.status = 'pending' and j.priority < 0) as bulk_truth
  from workspaces w order by w.id
"""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def add_workspaces(
    pool: AsyncConnectionPool[Any], n: int, prefix: str = "W", source_type: str = "notion"
) -> list[int]:
    ids = []
    for i in range(n):
        row = await workspaces.save(
            pool,
            KEYS,
            source_type=source_type,
            external_id=f"{prefix}{i}",
            name=f"{prefix}{i}",
            credentials={"access_token": f"tok-{prefix}{i}"},
        )
        ids.append(int(row["id"]))
    return ids


def events(
    workspace_id: int, n: int, *, prefix: str, priority: int = 0, window: float = 0.0
) -> list[JobEvent]:
    return [
        JobEvent(
            "notion",
            f"{prefix}-{workspace_id}-{i}",
            {"n": i},
            event_id=f"{prefix}-{workspace_id}-e{i}",
            debounce_seconds=window,
            max_wait_seconds=3600.0,
            priority=priority,
            workspace_id=workspace_id,
        )
        for i in range(n)
    ]


async def assert_lines_exact(pool: AsyncConnectionPool[Any]) -> None:
    async with pool.connection() as conn:
        rows = await (await conn.execute(LINES)).fetchall()
    wrong = [r for r in rows if (r[1], r[2]) != (r[3], r[4])]
    assert not wrong, f"stored lanes differ from the jobs: {wrong}"


async def assert_lines_never_late(pool: AsyncConnectionPool[Any]) -> None:
    """Every lane with a pending job is due no later than that job (it may be earlier, or set
    with no job: a look the claim wastes once): the line never hides due work."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(LINES)).fetchall()
    wrong = [
        r
        for r in rows
        if any(
            truth is not None and (stored is None or stored > truth)
            for stored, truth in ((r[1], r[3]), (r[2], r[4]))
        )
    ]
    assert not wrong, f"a lane later than its jobs: {wrong}"


async def test_two_concurrent_claimers_take_disjoint_workspaces_and_both_get_jobs(
    pool: AsyncConnectionPool[Any],
) -> None:
    """Claimer A holds its workspaces (its transaction is still open) while B claims: B takes
    the next workspaces in line instead of skipping A's locks and coming back empty."""
    ids = await add_workspaces(pool, 12)
    for ws in ids:
        await queue.enqueue(pool, events(ws, 3, prefix="p"), now=T0)
    async with pool.connection() as conn_a, conn_a.transaction():
        a = [
            c.job
            for c in await queue.claim(
                conn_a, "A", limit=4, lease_seconds=60, source_slots={"notion": 4}, now=at(1)
            )
        ]
        b = [
            c.job
            for c in await queue.claim(
                pool, "B", limit=4, lease_seconds=60, source_slots={"notion": 4}, now=at(1)
            )
        ]
    assert len(a) == 4 and len(b) == 4
    a_ws = {j.workspace_id for j in a}
    b_ws = {j.workspace_id for j in b}
    assert len(a_ws) == 4 and len(b_ws) == 4  # one job per workspace: served in turn
    assert not a_ws & b_ws
    await assert_lines_exact(pool)


async def test_four_concurrent_claim_loops_drain_every_job_exactly_once(
    pool: AsyncConnectionPool[Any],
) -> None:
    ids = await add_workspaces(pool, 30)
    for ws in ids:
        await queue.enqueue(pool, events(ws, 4, prefix="p"), now=T0)
    claimed: list[list[SyncJob]] = [[], [], [], []]

    async def loop(i: int) -> None:
        while True:
            jobs = [
                c.job
                for c in await queue.claim(
                    pool, f"w{i}", limit=8, lease_seconds=60, source_slots={"notion": 8}, now=at(1)
                )
            ]
            if not jobs:
                return
            claimed[i] += jobs
            await queue.settle(pool, completed=jobs, now=at(1))

    await asyncio.gather(*(loop(i) for i in range(4)))
    every = [j.id for batch in claimed for j in batch]
    assert len(every) == len(set(every)) == 120
    await assert_lines_exact(pool)


async def test_served_workspaces_go_to_the_back_of_the_line(pool: AsyncConnectionPool[Any]) -> None:
    """Six workspaces of three due jobs, claims of two: every workspace's first job is taken
    before any workspace's second, in the order they joined the line."""
    ids = await add_workspaces(pool, 6)
    for k, ws in enumerate(ids):
        await queue.enqueue(pool, events(ws, 3, prefix="p"), now=at(k))
    order: list[int | None] = []
    for step in range(9):
        jobs = [
            c.job
            for c in await queue.claim(
                pool, "w", limit=2, lease_seconds=60, source_slots={"notion": 2}, now=at(10 + step)
            )
        ]
        assert len(jobs) == 2
        order += [j.workspace_id for j in sorted(jobs, key=lambda j: j.scheduled_at)]
        await queue.settle(pool, completed=jobs, now=at(10 + step))
    assert order == ids * 3


async def test_the_lines_are_never_late_through_every_statement_on_jobs(
    pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any]
) -> None:
    a, b = await add_workspaces(pool, 2)
    await queue.enqueue(pool, events(a, 3, prefix="live", window=30), now=T0)
    await queue.enqueue(pool, events(a, 2, prefix="bulk", priority=-10), now=T0)
    await queue.enqueue(pool, events(b, 1, prefix="live"), now=T0)
    await assert_lines_never_late(pool)
    # a debounced event pushes a's earliest live job later
    await queue.enqueue(pool, events(a, 1, prefix="live", window=60), now=at(10))
    await assert_lines_never_late(pool)
    jobs = [
        c.job
        for c in await queue.claim(
            pool, "w", limit=10, lease_seconds=60, source_slots={"notion": 10}, now=at(40)
        )
    ]
    await assert_lines_exact(pool)  # the claim sets the lanes it looked at
    by_prefix = {j.source_page_id: j for j in jobs}
    # an edit during a sync, then complete: a follow-up; a retry; a permanent failure; release
    live_1 = by_prefix[f"live-{a}-1"]
    await queue.enqueue(pool, events(a, 2, prefix="live", window=5), now=at(41))
    await one_job.complete(pool, live_1, now=at(42))
    await assert_lines_never_late(pool)
    bulk = [j for j in jobs if j.priority < 0]
    await one_job.fail(pool, bulk[0], "boom", backoff_seconds=[30.0], jitter=0.0, now=at(43))
    await one_job.fail(pool, bulk[1], "gone", permanent=True, now=at(43))
    await assert_lines_never_late(pool)
    rest = [j for j in jobs if j.id not in {live_1.id, bulk[0].id, bulk[1].id}]
    await queue.release(pool, rest[:1], now=at(44))
    await assert_lines_never_late(pool)
    # leases of the others expire: requeued
    await queue.requeue_expired(pool, now=at(500))
    await assert_lines_never_late(pool)
    # manual re-sync, manual retry of the failed job, a hand-written move and delete
    await queue.resync(pool, "notion", f"live-{b}-0", now=at(501))
    failed = await queue.get(pool, bulk[1].id)
    assert failed is not None
    await queue.retry(pool, failed.id, now=at(502))
    await assert_lines_never_late(pool)
    await conn.execute(
        "update sync_jobs set workspace_id = %s where workspace_id = %s "
        "and status = 'pending' and priority < 0",
        (b, a),
    )
    await conn.execute("delete from sync_jobs where workspace_id = %s", (b,))
    # hand-written statements do not move the line: repair_lines (the pruner) repairs it
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) >= 1
    await assert_lines_exact(pool)
    # nothing left for the repair to do
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) == 0


async def test_a_stale_line_costs_a_look_and_refresh_ready_repairs_it(
    pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any]
) -> None:
    """Rows written with the trigger off: a workspace missing from its line is repaired by
    ``repair_lines`` (the pruner runs it); one in line without work costs one look, then
    goes to the back, and the next claim serves the real work."""
    a, b = await add_workspaces(pool, 2)
    await queue.enqueue(pool, events(a, 1, prefix="p"), now=T0)
    await conn.execute("update workspaces set live_due_at = null")  # lost from line
    assert [
        c.job
        for c in await queue.claim(
            pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(1)
        )
    ] == []
    assert await queue.seconds_until_due(pool, ["notion", "slack"]) is None
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) == 1
    assert (await queue.seconds_until_due(pool, ["notion", "slack"]) or 0.0) < 0
    # b is put at the head of the line with nothing to claim
    await conn.execute(
        "update workspaces set live_due_at = %s, last_served_at = null where id = %s",
        (T0 - timedelta(hours=1), b),
    )
    assert [
        c.job
        for c in await queue.claim(
            pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(2)
        )
    ] == []
    (job,) = [
        c.job
        for c in await queue.claim(
            pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(3)
        )
    ]
    assert job.workspace_id == a
    await assert_lines_exact(pool)  # the claim that looked at b set its lane from its jobs
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) == 0


async def test_an_empty_bucket_is_held_until_its_refill_and_costs_no_look_meanwhile(
    pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any]
) -> None:
    budget = ApiBudget(per_minute=60.0, burst=2.0)  # one request a second
    (a,) = await add_workspaces(pool, 1)
    await queue.enqueue(pool, events(a, 5, prefix="p"), now=T0)
    jobs = [
        c.job
        for c in await queue.claim(
            pool,
            "w",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1),
            budgets={"notion": budget},
        )
    ]
    assert len(jobs) == 2  # the burst pays for two syncs
    row = await (await conn.execute("select held_until from workspaces where id = %s", (a,))).fetchone()
    assert row is not None and row[0] == at(2)  # one request refilled a second later
    assert [
        c.job
        for c in await queue.claim(
            pool,
            "w",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1.5),
            budgets={"notion": budget},
        )
    ] == []
    assert (
        len(
            [
                c.job
                for c in await queue.claim(
                    pool,
                    "w",
                    limit=10,
                    lease_seconds=60,
                    source_slots={"notion": 10},
                    now=at(2),
                    budgets={"notion": budget},
                )
            ]
        )
        == 1
    )


async def test_the_idle_workers_due_time_reads_the_head_of_the_lines(pool: AsyncConnectionPool[Any]) -> None:
    a, b = await add_workspaces(pool, 2)
    await queue.enqueue(pool, events(a, 2, prefix="p", window=3600), now=None)
    until = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert until is not None and 3590 < until <= 3600
    await queue.enqueue(pool, events(b, 1, prefix="q", window=600), now=None)
    until = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert until is not None and 590 < until <= 600
    await workspaces.block(pool, b, 1200.0, "workspace_rate_limit")
    until = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert until is not None and 1190 < until <= 1200
    assert await queue.seconds_until_due(pool, ["slack"]) is None


async def test_a_claim_reads_a_few_workspace_rows_however_many_are_in_line(
    pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any]
) -> None:
    """2 000 workspaces with due work: one claim reads O(limit) workspace rows, through
    indexes (the transaction's own table statistics, which count what the statements inside
    claim_jobs read too)."""
    await conn.execute(
        "insert into workspaces (source_type, external_id, name, origin, credentials) "
        "select 'notion', 'X' || g, 'X' || g, 'cli', '\\x00' from generate_series(1, 2000) g"
    )
    await conn.execute(
        "insert into sync_jobs (source_type, source_page_id, scheduled_at, first_event_at, "
        "max_wait_until, workspace_id) select 'notion', 'p' || w.id || '-' || k, %s, %s, %s, "
        "w.id from workspaces w, generate_series(1, 3) k",
        (T0, T0, at(3600)),
    )
    # hand-written rows: the repair lines them up
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) == 2000
    await conn.execute("analyze workspaces")
    await conn.execute("analyze sync_jobs")
    claim = queries("claim")["claim"]
    params = {
        "now": at(1),
        "worker_id": "w",
        "limit": 8,
        "lease_seconds": 60.0,
        "sources": ["notion"],
        "source_slots": [8],
        "budget_sources": [],
        "budget_per_minutes": [],
        "budget_bursts": [],
        "budget_costs": [],
        "workspace_concurrency": 4,
    }
    # by relid, not relname: other schemas of the same database (another test's, a
    # benchmark's public one) hold tables named workspaces too
    reads = (
        "select seq_scan, coalesce(idx_tup_fetch, 0) as fetched "
        "from pg_stat_xact_user_tables where relid = 'workspaces'::regclass"
    )
    async with conn.transaction(force_rollback=True):
        before = await (await conn.execute(reads)).fetchone()
        claimed = await (await conn.execute(claim, params)).fetchall()
        after = await (await conn.execute(reads)).fetchone()
    assert before is not None and after is not None
    assert len(claimed) == 8
    assert after[0] - before[0] == 0, "a sequential scan of workspaces"
    assert 8 <= after[1] - before[1] <= 40, after[1] - before[1]


async def test_concurrent_enqueues_claims_and_completions_never_leave_a_line_late(
    pool: AsyncConnectionPool[Any],
) -> None:
    """Three enqueuers (events due now and debounced ones, over 12 workspaces) race three
    claim-and-complete loops: afterwards no workspace's lane is later than its jobs, draining
    leaves no job behind — the line never hides due work — and the drain's claims, having
    looked at every workspace, leave every lane exact."""
    ids = await add_workspaces(pool, 12)
    stop = asyncio.Event()

    async def enqueuer(k: int) -> None:
        n = 0
        while not stop.is_set():
            batch = [
                JobEvent(
                    "notion",
                    f"page-{(n * 7 + i + k) % 60}",
                    {"n": n},
                    event_id=f"e{k}-{n}-{i}",
                    debounce_seconds=0.0 if i % 2 else 0.2,
                    max_wait_seconds=0.5,
                    workspace_id=ids[(n + i + k) % 12],
                )
                for i in range(4)
            ]
            await queue.enqueue(pool, batch)
            n += 1

    async def claimer(k: int) -> None:
        while not stop.is_set():
            jobs = [
                c.job
                for c in await queue.claim(
                    pool, f"w{k}", limit=4, lease_seconds=60, source_slots={"notion": 4}
                )
            ]
            if jobs:
                await queue.settle(pool, completed=jobs)
            else:
                await asyncio.sleep(0.005)

    tasks = [asyncio.create_task(enqueuer(k)) for k in range(3)]
    tasks += [asyncio.create_task(claimer(k)) for k in range(3)]
    await asyncio.sleep(2.0)
    stop.set()
    await asyncio.gather(*tasks)
    await assert_lines_never_late(pool)
    await asyncio.sleep(0.6)  # every debounced job is due by now
    while True:
        jobs = [
            c.job
            for c in await queue.claim(pool, "drain", limit=50, lease_seconds=60, source_slots={"notion": 50})
        ]
        if not jobs:
            break
        await queue.settle(pool, completed=jobs)
    async with pool.connection() as conn:
        row = await (await conn.execute("select count(*) from sync_jobs")).fetchone()
    assert row is not None and row[0] == 0
    assert await queue.seconds_until_due(pool, ["notion", "slack"]) is None
    await assert_lines_exact(pool)


async def test_a_bucket_drained_since_the_last_look_costs_one_empty_claim(
    pool: AsyncConnectionPool[Any],
) -> None:
    """Charges do not touch the line: the due-time query still says "due" after a running
    sync drained the bucket; the next claim finds it empty and holds the workspace until the
    refill, which the due-time query then reports (database clock)."""
    budget = ApiBudget(per_minute=60.0, burst=2.0)  # one request a second
    (a,) = await add_workspaces(pool, 1)
    await queue.enqueue(pool, events(a, 3, prefix="p"))
    assert [await budgets.take(pool, a, budget) for _ in range(2)] == [0.0, 0.0]
    stale = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert stale is not None and stale <= 0
    assert [
        c.job
        for c in await queue.claim(
            pool, "w", limit=8, lease_seconds=60, source_slots={"notion": 8}, budgets={"notion": budget}
        )
    ] == []
    until = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert until is not None and 0 < until <= 1.0


async def test_removing_a_workspace_while_its_syncs_finish_never_deadlocks(
    pool: AsyncConnectionPool[Any],
) -> None:
    """A finishing sync locks its job, then (the line's upkeep) its workspace row; the removal
    locks the row only (a tombstone, migration 022). The hard delete of before, whose foreign
    key set the running jobs' workspace to NULL, deadlocked about one round in four. Each
    round: every sync's completion is recorded, the workspace is removed, and its jobs are
    completed, still of their workspace."""
    for r in range(12):
        (ws,) = await add_workspaces(pool, 1, prefix=f"R{r}-")
        await queue.enqueue(pool, events(ws, 200, prefix="p"), now=T0)
        jobs = [
            c.job
            for c in await queue.claim(
                pool, "w", limit=200, lease_seconds=60, source_slots={"notion": 200}, now=at(1)
            )
        ]

        finished: dict[int, SyncJob] = {}

        async def finish(jobs: list[SyncJob] = jobs, finished: dict[int, SyncJob] = finished) -> None:
            for k in range(0, len(jobs), 2):
                finished.update(await queue.settle(pool, completed=jobs[k : k + 2], now=at(2)))

        async def remove(ws: int = ws) -> None:
            await asyncio.sleep(0.02)
            await workspaces.remove(pool, ws)

        await asyncio.gather(finish(), remove())  # DeadlockDetected would raise here
        assert len(jobs) == 200 and sorted(finished) == sorted(j.id for j in jobs)
        assert all(j.status == "completed" for j in finished.values())
        assert [w["status"] for w in await workspaces.list_workspaces(pool, ws)] == ["removed"]
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "select count(*) filter (where status = 'completed' and workspace_id = %s), "
                    "count(*) from finished_jobs where id = any(%s)",
                    (ws, [j.id for j in jobs]),
                )
            ).fetchone()
        assert row == (200, 200)


async def test_the_repair_skips_a_workspace_another_statement_holds_and_never_waits(
    pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any], database_url: str
) -> None:
    """Migration 037: ``repair_lines`` locks with SKIP LOCKED, so it never waits for a claim or
    a line move holding a workspace row (a wait there could close a cycle with a claim: a
    deadlock); the row it skipped is repaired by the next pass."""
    a, b = await add_workspaces(pool, 2)
    await queue.enqueue(pool, events(a, 1, prefix="p") + events(b, 1, prefix="q"), now=T0)
    await conn.execute("update workspaces set live_due_at = null")  # both lost from line
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        async with holder.transaction():
            await holder.execute("select 1 from workspaces where id = %s for no key update", (b,))
            repaired = await asyncio.wait_for(queue.repair_lines(pool, workspace_concurrency=UNLIMITED), 5)
            assert repaired == 1  # a; b is held: skipped, not waited for
            rows = {r[0]: r[1] for r in await (await conn.execute(LINES)).fetchall()}
            assert rows[a] is not None and rows[b] is None
    assert await queue.repair_lines(pool, workspace_concurrency=UNLIMITED) == 1  # b, now free
    await assert_lines_exact(pool)


async def test_a_claim_that_would_wait_gives_way_and_claims_nothing(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """Migration 037: the claim runs with ``lock_timeout`` 100 ms; a claim that has to wait for
    a lock (here the whole table, held by another transaction) gives way — nothing claimed,
    its transaction rolled back, the other statement untouched — and claims once it is free."""
    (a,) = await add_workspaces(pool, 1)
    await queue.enqueue(pool, events(a, 1, prefix="p"), now=T0)
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        async with holder.transaction():
            await holder.execute("lock table workspaces in share row exclusive mode")
            claimed = await asyncio.wait_for(
                queue.claim(pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(1)), 5
            )
            assert claimed == []
            # it gives way before the deadlock detector would cancel anyone: read from the
            # server, not timed
            row = await (
                await holder.execute(
                    "select (select s from unnest(p.proconfig) s where s like 'lock_timeout=%'),"
                    " current_setting('deadlock_timeout')"
                    " from pg_proc p where p.proname = 'claim_jobs'"
                )
            ).fetchone()
            assert row == ("lock_timeout=100ms", "1s")
    (job,) = [
        c.job
        for c in await queue.claim(
            pool, "w", limit=1, lease_seconds=60, source_slots={"notion": 1}, now=at(2)
        )
    ]
    assert job.workspace_id == a and job.attempts == 1  # the first claim left no trace
