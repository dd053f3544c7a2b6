"""API budgets (token buckets in Postgres) and the fair claim, on real Postgres, with the
database clock controlled through ``now=``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import one_job
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.infra.secrets import Keyring, new_key
from debounce.types import ApiBudget, JobEvent
from debounce.workspaces import budgets

T0 = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
TEN_PER_SECOND = ApiBudget(per_minute=600.0, burst=5.0)


async def bucket(pool: AsyncConnectionPool[Any], ws: int, now: datetime) -> dict[str, Any]:
    """Workspace ``ws``'s budget as the operator's listing shows it at ``now``."""
    [row] = await workspaces.list_workspaces(pool, ws, budgets={"notion": TEN_PER_SECOND}, now=now)
    budget: dict[str, Any] = row["budget"]
    return budget


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def add_workspace(pool: AsyncConnectionPool[Any], external_id: str, source_type: str = "notion") -> int:
    row = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type=source_type,
        external_id=external_id,
        name=external_id,
        credentials={"access_token": f"tok-{external_id}"},
    )
    return int(row["id"])


def events(
    workspace_id: int, n: int, *, prefix: str, priority: int = 0, window: float = 0.0
) -> list[JobEvent]:
    return [
        JobEvent(
            "notion",
            f"{prefix}-{i}",
            {"n": i},
            event_id=f"{prefix}-e{i}",
            debounce_seconds=window,
            max_wait_seconds=3600.0,
            priority=priority,
            workspace_id=workspace_id,
        )
        for i in range(n)
    ]


async def test_a_bucket_grants_its_burst_then_refills_at_its_rate(pool: AsyncConnectionPool[Any]) -> None:
    ws = await add_workspace(pool, "W1")
    waits = [await budgets.take(pool, ws, TEN_PER_SECOND, now=T0) for _ in range(6)]
    assert waits[:5] == [0.0] * 5
    assert waits[5] == pytest.approx(0.1)  # one request every 0.1 s
    # 0.35 s later: 3.5 requests refilled; 3 granted, the 4th waits for the missing half.
    later = [await budgets.take(pool, ws, TEN_PER_SECOND, now=at(0.35)) for _ in range(4)]
    assert later[:3] == [0.0] * 3
    assert later[3] == pytest.approx(0.05)
    # Never above the burst, however long it rests.
    assert (await bucket(pool, ws, at(3600)))["available"] == pytest.approx(5.0)


async def test_concurrent_takers_never_take_more_than_the_bucket_holds(
    pool: AsyncConnectionPool[Any],
) -> None:
    """60 takers on 12 connections at the same database instant: exactly the burst."""
    ws = await add_workspace(pool, "W1")
    results = await asyncio.gather(*(budgets.take(pool, ws, TEN_PER_SECOND, now=at(1)) for _ in range(60)))
    assert results.count(0.0) == 5
    # With the real clock, over time: granted <= burst + rate * elapsed.
    ws2 = await add_workspace(pool, "W2")
    loop = asyncio.get_running_loop()
    start = loop.time()
    granted = 0
    while loop.time() - start < 0.5:
        batch = await asyncio.gather(*(budgets.take(pool, ws2, TEN_PER_SECOND) for _ in range(10)))
        granted += batch.count(0.0)
    elapsed = loop.time() - start
    assert granted <= 5 + 10 * elapsed + 1


async def test_a_workspace_budget_overrides_the_source_default(pool: AsyncConnectionPool[Any]) -> None:
    ws = await add_workspace(pool, "W1")
    row = await budgets.set_budget(pool, ws, 60.0, 2.0)
    assert row is not None and row["budget_burst"] == 2.0
    waits = [await budgets.take(pool, ws, TEN_PER_SECOND, now=T0) for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] == pytest.approx(1.0)
    level = await bucket(pool, ws, T0)
    assert not level["source_default"] and level["per_minute"] == 60.0
    await budgets.set_budget(pool, ws, 0.0, None)  # 0 per minute: unmetered
    assert all([await budgets.take(pool, ws, TEN_PER_SECOND, now=T0) == 0.0 for _ in range(50)])
    await budgets.set_budget(pool, ws, None, None)  # back to the source's default
    level = await bucket(pool, ws, T0)
    assert level["source_default"] and level["burst"] == 5.0
    with pytest.raises(ValueError, match="burst"):
        await budgets.set_budget(pool, ws, 10.0, 0.5)
    assert await budgets.set_budget(pool, 999_999, 10.0, 2.0) is None


async def test_a_429_block_refuses_every_request_until_it_ends(pool: AsyncConnectionPool[Any]) -> None:
    ws = await add_workspace(pool, "W1")
    await workspaces.block(pool, ws, 30.0, "workspace_rate_limit")
    wait = await budgets.take(pool, ws, TEN_PER_SECOND)
    assert 29.0 < wait <= 30.0


async def test_the_claim_skips_an_empty_bucket_and_says_when_it_refills(
    pool: AsyncConnectionPool[Any],
) -> None:
    dry = await add_workspace(pool, "DRY")
    wet = await add_workspace(pool, "WET")
    await queue.enqueue(pool, events(dry, 3, prefix="d") + events(wet, 3, prefix="w"), now=T0)
    for _ in range(5):
        await budgets.take(pool, dry, TEN_PER_SECOND, now=at(1))
    claimed = [
        c.job
        for c in await queue.claim(
            pool,
            "w1",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1),
            budgets={"notion": TEN_PER_SECOND},
        )
    ]
    assert {j.workspace_id for j in claimed} == {wet}
    # At most as many jobs as the bucket holds requests: 1 request refilled 0.1 s later.
    claimed = [
        c.job
        for c in await queue.claim(
            pool,
            "w1",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1.1),
            budgets={"notion": TEN_PER_SECOND},
        )
    ]
    assert [j.workspace_id for j in claimed] == [dry]


async def test_a_flooded_workspace_does_not_delay_another_by_more_than_one_claim_round(
    pool: AsyncConnectionPool[Any],
) -> None:
    """10 000 due jobs of one workspace (live edits and a bulk lane), one edit of another
    workspace due later: the next claim takes the quiet workspace's edit, and the flooded
    workspace never has more than K jobs in flight."""
    flood = await add_workspace(pool, "FLOOD")
    quiet = await add_workspace(pool, "QUIET")
    await queue.enqueue(pool, events(flood, 5000, prefix="live"), now=T0)
    await queue.enqueue(pool, events(flood, 5000, prefix="bulk", priority=-10), now=T0)
    await queue.enqueue(pool, events(quiet, 1, prefix="q"), now=at(5))
    in_flight: list[Any] = []
    first = [
        c.job
        for c in await queue.claim(
            pool,
            "w1",
            limit=8,
            lease_seconds=60,
            source_slots={"notion": 8},
            now=at(6),
            workspace_concurrency=3,
        )
    ]
    assert quiet in {j.workspace_id for j in first}
    assert sum(1 for j in first if j.workspace_id == flood) == 3
    in_flight += first
    # K reached: the flooded workspace gets nothing more until one of its syncs finishes.
    assert [
        c.job
        for c in await queue.claim(
            pool,
            "w2",
            limit=8,
            lease_seconds=60,
            source_slots={"notion": 8},
            now=at(6),
            workspace_concurrency=3,
        )
    ] == []
    done = next(j for j in first if j.workspace_id == flood)
    await one_job.complete(pool, done, now=at(7))
    again = [
        c.job
        for c in await queue.claim(
            pool,
            "w2",
            limit=8,
            lease_seconds=60,
            source_slots={"notion": 8},
            now=at(7),
            workspace_concurrency=3,
        )
    ]
    assert [j.workspace_id for j in again] == [flood]
    # Live before bulk: every live job of the flood goes before its first bulk job.
    assert all(j.priority >= 0 for j in first + again)
    until = await queue.seconds_until_due(pool, ["notion", "slack"])
    assert until is None  # the only due jobs belong to a workspace at its limit


async def test_live_jobs_of_any_workspace_go_before_bulk_jobs(pool: AsyncConnectionPool[Any]) -> None:
    a = await add_workspace(pool, "A")
    b = await add_workspace(pool, "B")
    await queue.enqueue(pool, events(a, 20, prefix="bulk", priority=-10), now=T0)
    await queue.enqueue(pool, events(b, 2, prefix="live"), now=at(10))
    claimed = [
        c.job
        for c in await queue.claim(
            pool, "w", limit=3, lease_seconds=60, source_slots={"notion": 3}, now=at(11)
        )
    ]
    assert [j.workspace_id for j in claimed][:2] == [b, b]
    assert claimed[2].workspace_id == a


async def test_a_workspace_offers_only_the_syncs_its_bucket_can_pay(pool: AsyncConnectionPool[Any]) -> None:
    """A sync of this source costs 2 requests: 3 in the bucket pay for one sync, not three
    (the others would yield at their second request), and the claim reserves its two; 1.5
    pay for none."""
    ws = await add_workspace(pool, "W")
    await queue.enqueue(pool, events(ws, 5, prefix="p"), now=T0)
    for _ in range(2):
        await budgets.take(pool, ws, TEN_PER_SECOND, now=at(1))  # 5 - 2 = 3 left
    claimed = [
        c.job
        for c in await queue.claim(
            pool,
            "w",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1),
            budgets={"notion": TEN_PER_SECOND},
            costs={"notion": 2.0},
        )
    ]
    assert len(claimed) == 1
    # The claim reserved that sync's two requests: 1 left, for every claimer.
    assert (await bucket(pool, ws, at(1)))["available"] == pytest.approx(1.0)
    assert [
        c.job
        for c in await queue.claim(
            pool,
            "w",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1.05),
            budgets={"notion": TEN_PER_SECOND},
            costs={"notion": 2.0},
        )
    ] == []
    # That claim held the workspace until its bucket pays for a sync again (0.1 s later), so
    # claimers stop looking at it meanwhile; then a claimer whose syncs cost 1 request gets
    # two jobs from the same 2 requests.
    assert [
        c.job
        for c in await queue.claim(
            pool,
            "w",
            limit=10,
            lease_seconds=60,
            source_slots={"notion": 10},
            now=at(1.05),
            budgets={"notion": TEN_PER_SECOND},
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
                    now=at(1.1),
                    budgets={"notion": TEN_PER_SECOND},
                )
            ]
        )
        == 2
    )
