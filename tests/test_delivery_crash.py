"""A real ``debounce worker`` process SIGKILLed while its POST of a batch is in flight: another
worker takes the subscription over once the lease runs out (never before: no second attempt
in flight meanwhile) and sends the same batch under the same webhook-id; every change arrives
in feed order, none lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from push_receiver import Answer, Receiver
from standardwebhooks import Webhook
from test_delivery import delivered_in_order, doc, feed_changes, write
from test_demo_edits import clean_env

from debounce import delivery

ROOT = Path(__file__).resolve().parent.parent


async def _setup(url: str, hook: str) -> tuple[int, str, list[str]]:
    async with AsyncConnectionPool(
        url, min_size=1, max_size=4, open=False, kwargs={"autocommit": True}
    ) as pool:
        sub, secret = await delivery.create(pool, hook, start=delivery.Start(None))
        await write(pool, [doc(n) for n in range(40)])
        return sub.id, secret, [c.cursor.encode() for c in await feed_changes(pool)]


async def _state(url: str, sub_id: int) -> delivery.Subscription:
    async with AsyncConnectionPool(
        url, min_size=1, max_size=1, open=False, kwargs={"autocommit": True}
    ) as pool:
        return await delivery.get(pool, sub_id)


def _worker(env: dict[str, str]) -> subprocess.Popen[Any]:
    return subprocess.Popen(
        [sys.executable, "-m", "debounce", "worker"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_a_worker_process_killed_mid_batch_hands_the_same_batch_over(database_url: str) -> None:
    env = clean_env(
        DATABASE_URL=database_url,
        DEBOUNCE_DELIVERY_LEASE_SECONDS="2",
        DEBOUNCE_DELIVERY_TIMEOUT_SECONDS="1",
        DEBOUNCE_POLL_INTERVAL_SECONDS="0.2",
    )
    with Receiver() as receiver:
        receiver.script = [Answer(delay=3.0)]
        sub_id, secret, expected = asyncio.run(_setup(database_url, receiver.url))
        first = _worker(env)
        second = None
        try:
            assert receiver.arrived.wait(60), "the first worker never delivered"
            os.kill(first.pid, signal.SIGKILL)
            first.wait(10)
            second = _worker(env)
            deadline = time.monotonic() + 60
            while asyncio.run(_state(database_url, sub_id)).lag_changes and time.monotonic() < deadline:
                time.sleep(0.1)  # real processes on a real socket
            seen = [(h["webhook-id"], Webhook(secret).verify(b, h)) for h, b in receiver.requests]
        finally:
            for proc in (first, second):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    proc.wait(30)
    assert seen[0][0] == seen[1][0] and seen[0][1] == seen[1][1]  # the same batch again
    # not before the dead worker's lease ran out (2 s from its renewal just before the POST)
    assert receiver.times[1] - receiver.times[0] >= 1.5
    assert delivered_in_order(seen) == expected
    state = asyncio.run(_state(database_url, sub_id))
    assert state.lag_changes == 0 and state.delivered_changes == len(expected)
    assert state.delivered_batches == len({m for m, _ in seen})
