"""Push delivery (issue 40, point 1) against a real HTTP receiver on loopback: every change in
feed order, none lost, through failures, timeouts, 410, 429 with Retry-After and a worker
killed mid-batch; duplicates only as redeliveries of the same webhook-id; signatures verified
with ``standardwebhooks``; a rotated secret verifying with both during the overlap. Time is
the ``now`` given to each step (the signatures carry the wall clock)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from push_receiver import Answer, Receiver
from standardwebhooks import Webhook, WebhookVerificationError

from debounce import delivery
from debounce.config import Settings
from debounce.delivery import deliverer as d
from debounce.delivery import payload
from debounce.documents import feed
from debounce.documents.store import Document, DocumentStore

SETTINGS = d.DeliverySettings(
    concurrency=2, timeout_seconds=2.0, lease_seconds=60.0, disable_after_seconds=3600.0, poll_seconds=0.05
)


def doc(n: int, content: str = "", source: str = "notion") -> Document:
    return Document(
        source_type=source,
        document_id=f"doc-{n:04d}",
        source_page_id=f"doc-{n:04d}",
        title=f"Doc {n}",
        url=None,
        content=content or f"content {n}",
    )


async def write(pool: AsyncConnectionPool[Any], docs: list[Document]) -> None:
    store = DocumentStore(pool)
    for one in docs:
        await store.upsert(one)
    await servable(pool)


async def feed_changes(pool: AsyncConnectionPool[Any]) -> list[feed.Change]:
    out: list[feed.Change] = []
    after = None
    while True:
        page = await feed.read_changes(pool, after, feed.MAX_LIMIT)
        out += page.changes
        after = page.next
        if page.at_head:
            return out


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def receiver() -> Any:
    with Receiver() as r:
        yield r


async def take(
    pool: AsyncConnectionPool[Any],
    http: aiohttp.ClientSession,
    settings: d.DeliverySettings = SETTINGS,
    now: datetime | None = None,
    worker: str = "w1",
) -> d.Deliverer:
    leased = await d.lease(pool, worker, 1, settings.lease, now=now)
    assert len(leased) == 1, leased
    return d.Deliverer(pool, http, settings, *leased[0])


async def drive(deliverer: d.Deliverer, clock: datetime, steps: int = 200) -> datetime:
    """Step ``deliverer`` on a simulated clock until nothing is left to deliver; the clock
    after."""
    for _ in range(steps):
        nxt = await deliverer.step(now=clock)
        if nxt.idle:
            return clock
        clock += timedelta(seconds=nxt.seconds)
    raise AssertionError("still delivering")


def batches(receiver: Receiver, secret: str) -> list[tuple[str, dict[str, Any]]]:
    """``(webhook-id, payload)`` of every request, each verified with ``secret``."""
    out = []
    for headers, body in receiver.requests:
        out.append((headers["webhook-id"], Webhook(secret).verify(body, headers)))
    return out


def delivered_in_order(seen: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The cursors of the changes a receiver that dedupes on webhook-id applied, checking that
    a repeated id carries the same payload."""
    first: dict[str, dict[str, Any]] = {}
    cursors: list[str] = []
    for msg_id, body in seen:
        if msg_id in first:
            assert body == first[msg_id]  # a redelivery: the same batch
            continue
        first[msg_id] = body
        cursors += [c["cursor"] for c in body["data"]["changes"]]
        assert body["type"] == payload.EVENT_TYPE
        assert body["data"]["cursor"] == body["data"]["changes"][-1]["cursor"]
    return cursors


async def test_every_change_in_order_through_failures_timeouts_and_throttles(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    await write(pool, [doc(n) for n in range(150)])
    sub, secret = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    assert secret.startswith("whsec_")
    receiver.script = [
        Answer(500),
        Answer(delay=3.0),  # past the 2 s timeout (a loaded machine answers in time)
        Answer(429, {"Retry-After": "7"}),
        Answer(200),
        Answer(503),
        Answer(502, {"Retry-After": "120"}),
    ]
    deliverer = await take(pool, http)
    t0 = datetime.now(UTC)
    clock = t0
    attempts_at: list[datetime] = []
    for _ in range(100):
        nxt = await deliverer.step(now=clock)
        state = await delivery.get(pool, sub.id)
        if state.last_attempt_at is not None and (
            not attempts_at or state.last_attempt_at != attempts_at[-1]
        ):
            attempts_at.append(state.last_attempt_at)
        if nxt.idle:
            break
        clock += timedelta(seconds=nxt.seconds)
    else:
        raise AssertionError("still delivering")
    seen = batches(receiver, secret)
    # the schedule: 500 → 5 s (± 10 %), no answer → 5 min, 429 → its Retry-After (7 s)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(attempts_at)]
    assert 4.5 <= gaps[0] <= 5.5 and 270 <= gaps[1] <= 330 and gaps[2] == pytest.approx(7)
    assert seen[0][0] == seen[1][0] == seen[2][0] == seen[3][0]  # one batch, four attempts
    assert len({m for m, _ in seen}) >= 3  # 150 thin changes need three 20 kB bodies
    assert all(len(body) < payload.MAX_BODY_BYTES for _, body in receiver.requests)
    assert delivered_in_order(seen) == [c.cursor.encode() for c in await feed_changes(pool)]
    state = await delivery.get(pool, sub.id)
    assert (state.lag_changes, state.delivered_changes, state.attempts) == (0, 150, 0)
    assert state.cursor == (await feed_changes(pool))[-1].cursor.encode()
    assert state.last_status == 200 and state.failing_since is None


async def test_410_disables_and_enable_resumes_with_the_same_batch(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    sub, secret = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    await write(pool, [doc(n) for n in range(3)])
    receiver.script = [Answer(410)]
    deliverer = await take(pool, http)
    clock = datetime.now(UTC)
    with pytest.raises(d.Stopped):
        await deliverer.step(now=clock)  # stages the batch and sends it
    state = await delivery.get(pool, sub.id)
    assert state.status == "disabled" and "410" in (state.disabled_reason or "")
    assert state.leased_by is None  # given back
    assert await d.lease(pool, "w2", 5, 60) == []  # a disabled subscription is not delivered
    await delivery.enable(pool, sub.id)
    await drive(await take(pool, http, worker="w2"), clock)
    seen = batches(receiver, secret)
    assert len(seen) == 2 and seen[0] == seen[1]  # the same webhook-id and payload again
    assert delivered_in_order(seen) == [c.cursor.encode() for c in await feed_changes(pool)]


async def test_an_endpoint_failing_for_the_disable_period_is_disabled_and_shown_so(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    sub, _ = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    await write(pool, [doc(1)])
    receiver.script = [Answer(500)] * 20
    deliverer = await take(pool, http)
    start = clock = datetime.now(UTC)
    with pytest.raises(d.Stopped):
        for _ in range(20):
            clock += timedelta(seconds=(await deliverer.step(now=clock)).seconds)
    state = await delivery.get(pool, sub.id)
    assert state.status == "disabled" and state.failing_since is not None
    assert (state.disabled_reason or "").startswith("failing since ")
    assert "HTTP 500" in (state.disabled_reason or "") and state.last_status == 500
    assert (clock - start).total_seconds() >= SETTINGS.disable_after_seconds
    assert len(receiver.requests) == state.attempts == 5  # 0, 5 s, 5 min, 30 min, 2 h


async def test_a_worker_killed_mid_batch_leaves_no_duplicate_in_flight_and_no_gap(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    sub, secret = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    await write(pool, [doc(n) for n in range(5)])
    receiver.script = [Answer(delay=0.25)]
    settings = d.DeliverySettings(timeout_seconds=5.0, lease_seconds=30.0)
    first = await take(pool, http, settings)
    attempt = asyncio.create_task(first.step())  # stages the batch and sends it
    await asyncio.to_thread(receiver.arrived.wait, 5)
    attempt.cancel()  # killed while its POST is in flight: nothing after it runs
    with pytest.raises(asyncio.CancelledError):
        await attempt
    # Its lease still holds: no other worker sends anything until it runs out.
    assert await d.lease(pool, "w2", 5, settings.lease) == []
    later = datetime.now(UTC) + timedelta(seconds=settings.lease + 1)
    second = await take(pool, http, settings, now=later, worker="w2")
    await drive(second, later)
    with pytest.raises(d.Stopped):  # the first's token fences it: it moves nothing
        await first.step()
    seen = batches(receiver, secret)
    assert len(seen) == 2 and seen[0] == seen[1]
    assert delivered_in_order(seen) == [c.cursor.encode() for c in await feed_changes(pool)]
    assert (await delivery.get(pool, sub.id)).delivered_batches == 1


async def test_a_rotated_secret_signs_with_both_during_the_overlap(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    sub, old = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    now = datetime.now(UTC)
    _, new = await delivery.rotate(pool, sub.id, 3600, now=now)
    assert new != old and new.startswith("whsec_")
    await write(pool, [doc(1)])
    deliverer = await take(pool, http)
    await drive(deliverer, now)
    headers, body = receiver.requests[-1]
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(body, headers)
    Webhook(new).verify(body, headers)
    await write(pool, [doc(2)])
    await drive(deliverer, now + timedelta(seconds=3601))  # the overlap is over
    headers, body = receiver.requests[-1]
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, headers)


async def test_filters_skip_what_they_exclude_and_replay_delivers_again(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    head = await feed.head(pool)
    sub, secret = await delivery.create(
        pool, receiver.url, start=delivery.Start(head), source_type="notion", kinds=["delete"]
    )
    await write(pool, [doc(n) for n in range(4)] + [doc(9, source="slack")])
    await DocumentStore(pool).mark_deleted("notion", ["doc-0001", "doc-0002"])
    await DocumentStore(pool).mark_deleted("slack", ["doc-0009"])
    await servable(pool)
    deliverer = await take(pool, http)
    clock = await drive(deliverer, datetime.now(UTC))
    changes = [c for _, b in batches(receiver, secret) for c in b["data"]["changes"]]
    assert [(c["source"], c["document_id"], c["op"]) for c in changes] == [
        ("notion", "doc-0001", "delete"),
        ("notion", "doc-0002", "delete"),
    ]
    state = await delivery.get(pool, sub.id)
    assert state.lag_changes == 0 and state.delivered_changes == 2
    # replay from the start: the two deletions again, in new batches
    await delivery.replay(pool, sub.id, delivery.Start(head))
    await drive(deliverer, clock)
    again = [c for _, b in batches(receiver, secret)[1:] for c in b["data"]["changes"]]
    assert again == changes
    assert len({m for m, _ in batches(receiver, secret)}) == 2


async def test_a_subscription_keeps_the_kinds_of_document_it_asks_for(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    head = await feed.head(pool)
    with pytest.raises(ValueError, match="unknown kind of document 'pdf'"):
        await delivery.create(pool, receiver.url, start=delivery.Start(head), document_kinds=["pdf"])
    sub, secret = await delivery.create(
        pool, receiver.url, start=delivery.Start(head), document_kinds=["table", "file"]
    )
    assert sub.document_kinds == ["file", "table"] and sub.kinds == []
    table = dataclasses.replace(doc(1), metadata={"object": "data_source"})
    attached = dataclasses.replace(doc(2, source="slack"), document_id="file:F0001")
    await write(pool, [doc(0), table, attached, doc(3, source="slack")])
    assert (await delivery.get(pool, sub.id)).lag_changes == 2
    deliverer = await take(pool, http)
    await drive(deliverer, datetime.now(UTC))
    changes = [c for _, b in batches(receiver, secret) for c in b["data"]["changes"]]
    assert [(c["document_id"], c["kind"]) for c in changes] == [("doc-0001", "table"), ("file:F0001", "file")]
    assert (await delivery.get(pool, sub.id)).lag_changes == 0


async def test_full_content_fits_the_body_or_is_left_out(
    pool: AsyncConnectionPool[Any], http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    _, secret = await delivery.create(pool, receiver.url, start=delivery.Start(None), full_content=True)
    await write(pool, [doc(1, "small text"), doc(2, "x" * 50_000), doc(3, "y" * 9_800), doc(4, "z" * 9_800)])
    await drive(await take(pool, http), datetime.now(UTC))
    seen = batches(receiver, secret)
    assert all(len(body.encode()) < payload.MAX_BODY_BYTES for _, body in receiver.requests)
    changes = [c for _, b in seen for c in b["data"]["changes"]]
    assert [c["document_id"] for c in changes] == ["doc-0001", "doc-0002", "doc-0003", "doc-0004"]
    assert changes[0]["content"] == "small text" and changes[0]["title"] == "Doc 1"
    assert changes[1]["content_omitted"] is True and "content" not in changes[1]
    assert changes[2]["content"] == "y" * 9_800 and changes[3]["content"] == "z" * 9_800
    assert len(seen) == 3  # doc 4 does not fit beside doc 3


async def test_the_runner_leases_delivers_and_gives_back(
    pool: AsyncConnectionPool[Any], database_url: str, receiver: Receiver
) -> None:
    sub, secret = await delivery.create(pool, receiver.url, start=delivery.Start(None))
    await write(pool, [doc(n) for n in range(20)])
    runner = d.DeliveryRunner(SETTINGS, database_url, "runner-1")
    stopping = asyncio.Event()
    task = asyncio.create_task(runner.run(stopping))
    try:
        for _ in range(2400):  # a real socket: wait for the deliveries (60 s at most)
            if sum(len(b["data"]["changes"]) for _, b in batches(receiver, secret)) == 20:
                break
            await asyncio.sleep(0.025)
        held = await delivery.get(pool, sub.id)
        assert held.leased_by == "runner-1"
        await write(pool, [doc(n) for n in range(20, 25)])  # followed as they come
        for _ in range(2400):
            if sum(len(b["data"]["changes"]) for _, b in batches(receiver, secret)) == 25:
                break
            await asyncio.sleep(0.025)
    finally:
        stopping.set()
        await asyncio.wait_for(task, 10)
    assert delivered_in_order(batches(receiver, secret)) == [
        c.cursor.encode() for c in await feed_changes(pool)
    ]
    assert (await delivery.get(pool, sub.id)).leased_by is None


def test_the_payload_is_the_documented_shape() -> None:
    epoch = "7"
    changes = [
        feed.Change(
            feed.Cursor(epoch, 10, n),
            "notion",
            1,
            f"d{n}",
            f"d{n}",
            "upsert",
            datetime(2026, 1, 1, tzinfo=UTC),
            "ab" * 32,
        )
        for n in range(3)
    ]
    end = feed.Cursor(epoch, 12, 0)
    batch = payload.build(changes, end, datetime(2026, 1, 2, tzinfo=UTC))
    body = json.loads(batch.body)
    assert body["type"] == "documents.changed" and body["timestamp"] == "2026-01-02T00:00:00+00:00"
    assert body["data"]["cursor"] == end.encode() and batch.count == 3
    assert body["data"]["changes"][0] == changes[0].to_json()
    small = payload.build(changes, end, datetime(2026, 1, 2, tzinfo=UTC), max_bytes=700)
    assert 0 < small.count < 3 and small.cursor == changes[small.count - 1].cursor


async def test_a_full_runner_lets_idle_subscriptions_go_so_every_one_is_delivered(
    pool: AsyncConnectionPool[Any], database_url: str, receiver: Receiver
) -> None:
    subs = [await delivery.create(pool, receiver.url, start=delivery.Start(None)) for _ in range(3)]
    runner = d.DeliveryRunner(
        d.DeliverySettings(concurrency=1, timeout_seconds=2.0, poll_seconds=0.05), database_url, "one-slot"
    )
    stopping = asyncio.Event()
    task = asyncio.create_task(runner.run(stopping))
    try:
        await write(pool, [doc(n) for n in range(3)])
        for _ in range(2400):  # a real socket: wait for the deliveries (60 s at most)
            states = [await delivery.get(pool, s.id) for s, _ in subs]
            if all(s.delivered_changes == 3 for s in states):
                break
            await asyncio.sleep(0.025)
    finally:
        stopping.set()
        await asyncio.wait_for(task, 10)
    assert [s.delivered_changes for s in states] == [3, 3, 3]

    def verifies(secret: str, headers: dict[str, str], body: str) -> bool:
        try:
            Webhook(secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    for _, secret in subs:  # each endpoint got its three changes, signed with its own secret
        mine = [json.loads(b) for h, b in receiver.requests if verifies(secret, h, b)]
        assert sum(len(m["data"]["changes"]) for m in mine) == 3


def test_the_delivery_settings_come_from_the_environment() -> None:
    settings = d.DeliverySettings.of(
        Settings.from_env(
            {
                "DEBOUNCE_DELIVERY_CONCURRENCY": "3",
                "DEBOUNCE_DELIVERY_TIMEOUT_SECONDS": "40",
                "DEBOUNCE_DELIVERY_LEASE_SECONDS": "30",
                "DEBOUNCE_DELIVERY_DISABLE_AFTER_SECONDS": "3600",
                "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.5",
            }
        )
    )
    assert (
        settings.concurrency,
        settings.timeout_seconds,
        settings.disable_after_seconds,
        settings.poll_seconds,
    ) == (3, 40.0, 3600.0, 0.5)
    assert settings.lease == 80.0  # at least twice the timeout: an attempt ends before its lease
    with pytest.raises(ValueError, match="DEBOUNCE_DELIVERY_TIMEOUT_SECONDS"):
        Settings.from_env({"DEBOUNCE_DELIVERY_TIMEOUT_SECONDS": "0"})
