"""Waking idle workers from the application (issue 38): the enqueue statement sends no NOTIFY;
the web's batcher notifies after each batch's commit, at most once per source per interval,
and only for jobs due within ``notify_within``. Counted on a real ``LISTEN`` connection.

Other sessions may share the server's database (and so the channel): each test uses source
names of its own and counts only those, and reads up to a sentinel notification it sends last
(notifications arrive in commit order) instead of waiting for silence."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import queue
from debounce.queue.batcher import EnqueueBatcher
from debounce.queue.wakeups import Waker, due_sources
from debounce.types import EnqueueBrief, EnqueueOutcome, JobEvent

Pool = AsyncConnectionPool[Any]


class Listener:
    """A ``LISTEN debounce_jobs`` connection and the payloads it received, in order."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.received: asyncio.Queue[str] = asyncio.Queue()

    async def run(self) -> None:
        async for n in self.conn.notifies():
            self.received.put_nowait(n.payload)

    async def next_of(self, sources: set[str], timeout: float = 10.0) -> str:
        """The next payload among ``sources`` (others' notifications skipped)."""
        while True:
            payload = await asyncio.wait_for(self.received.get(), timeout)
            if payload in sources:
                return payload

    async def count_until_sentinel(self, pool: Pool, sources: set[str]) -> Counter[str]:
        """Send a sentinel and count the notifications of ``sources`` received before it."""
        sentinel = "sentinel-" + uuid.uuid4().hex
        assert await queue.wake(pool, [sentinel]) == 1
        seen: Counter[str] = Counter()
        while (payload := await self.next_of(sources | {sentinel})) != sentinel:
            seen[payload] += 1
        return seen


@pytest.fixture
async def listener(database_url: str) -> AsyncIterator[Listener]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"listen {queue.NOTIFY_CHANNEL}")
        lst = Listener(conn)
        task = asyncio.create_task(lst.run())
        try:
            yield lst
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def names(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"wake{i}-{tag}" for i in range(n)]


def event(source: str, page: str, window: float) -> JobEvent:
    return JobEvent(source, page, {}, uuid.uuid4().hex, window, max(window, 60.0))


async def test_a_burst_of_batches_notifies_once_per_source_then_what_it_held(
    pool: Pool, listener: Listener
) -> None:
    a, b = names(2)
    # An interval longer than the test: the burst's first batch of each source notifies at
    # once, every later one is held for the interval's end (here: the batcher's stop).
    batcher = EnqueueBatcher(pool, notify_within=2.0, wake_interval=3600.0)
    batcher.start()
    try:
        for i in range(4):  # eight batches, one after another, each committed before the next
            for source in (a, b):
                (brief,) = await batcher.submit([event(source, f"p{i}", 0.0)])
                assert brief.outcome is EnqueueOutcome.CREATED
        assert {await listener.next_of({a, b}), await listener.next_of({a, b})} == {a, b}
        assert await listener.count_until_sentinel(pool, {a, b}) == Counter()
    finally:
        await batcher.stop()
    assert await listener.count_until_sentinel(pool, {a, b}) == Counter({a: 1, b: 1})


async def test_a_job_due_beyond_notify_within_notifies_nobody(pool: Pool, listener: Listener) -> None:
    later, soon, dup = names(3)
    batcher = EnqueueBatcher(pool, notify_within=2.0)
    batcher.start()
    try:
        await batcher.submit([event(later, "p", 300.0), event(later, "q", 10.0)])
        await batcher.submit([event(soon, "p", 1.5)])  # due within notify_within: one
        first = event(dup, "p", 0.0)
        await batcher.submit([first])  # due now: one
        # the same event again (held or sent, it would count): a duplicate wakes nobody
        (brief,) = await batcher.submit([first])
        assert brief.outcome is EnqueueOutcome.DUPLICATE
    finally:
        await batcher.stop()
    counted = await listener.count_until_sentinel(pool, {later, soon, dup})
    assert counted == Counter({soon: 1, dup: 1})


async def test_the_enqueue_statement_notifies_nobody_and_a_direct_enqueue_wakes_after_it(
    pool: Pool, listener: Listener
) -> None:
    held, direct = names(2)
    await queue.enqueue(pool, [event(held, "p", 0.0)], notify_within=None)
    await queue.enqueue(pool, [event(direct, "p", 0.0), event(direct, "q", 0.0)])
    assert await listener.count_until_sentinel(pool, {held, direct}) == Counter({direct: 1})


async def test_a_failed_notification_is_dropped_and_the_waker_goes_on(
    database_url: str, pool: Pool, listener: Listener
) -> None:
    (source,) = names(1)
    closed: Pool = AsyncConnectionPool(database_url, min_size=0, max_size=1, open=False, timeout=1)
    waker = Waker(closed)  # never opened: every send fails
    waker.request([source])
    await waker.stop()
    waker = Waker(pool)
    waker.request([source])
    await waker.stop()
    assert await listener.count_until_sentinel(pool, {source}) == Counter({source: 1})


def test_due_sources_are_the_pending_jobs_due_within_the_window() -> None:
    now = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
    events = [event(s, "p", 0.0) for s in ("a", "b", "c", "d", "e", "a")]
    due = now + timedelta(seconds=2)
    briefs = [
        EnqueueBrief(EnqueueOutcome.CREATED, 1, due),
        EnqueueBrief(EnqueueOutcome.DEBOUNCED, 2, now + timedelta(seconds=3)),
        EnqueueBrief(EnqueueOutcome.REQUEUED_AFTER_RUNNING, 3, now),
        EnqueueBrief(EnqueueOutcome.DUPLICATE, 4, now),
        EnqueueBrief(EnqueueOutcome.WORKSPACE_REMOVED, None, None),
        EnqueueBrief(EnqueueOutcome.DEBOUNCED, 1, due),
    ]
    assert due_sources(events, briefs, within=2.0, now=now) == ["a"]
    assert due_sources(events, briefs, within=3.0, now=now) == ["a", "b"]
    assert due_sources(events, briefs, within=1.9, now=now) == []
