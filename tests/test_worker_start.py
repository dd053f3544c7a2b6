"""A worker that cannot start (issue 32, point 3): a persistent error while it prepares its
workspaces is said in one line naming the cause, the jobs of dead workers still come back
meanwhile (liveness does not wait for the workspaces), and the queue's statistics show a
worker alive that has not claimed while a due job waits."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from debounce import queue

pytestmark = pytest.mark.slow


def start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "debounce", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def limited_role(database_url: str) -> Iterator[str]:
    """A role that may read and write every table of the test schema but the workspaces
    table (a permission an operator forgot): its connection string."""
    options = conninfo_to_dict(database_url)["options"]  # the test schema's search_path
    assert isinstance(options, str)
    schema = options.split("search_path=")[1].split()[0]
    role = "r_" + uuid.uuid4().hex[:12]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'create role "{role}" login')  # names are ours: <letter>_<hex>
        conn.execute(f'grant usage on schema "{schema}" to "{role}"')
        conn.execute(f'grant select, insert, update, delete on all tables in schema "{schema}" to "{role}"')
        conn.execute(f'grant usage on all sequences in schema "{schema}" to "{role}"')
        conn.execute(f'revoke insert, update on workspaces from "{role}"')
    try:
        yield make_conninfo(database_url, user=role)
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f'drop owned by "{role}"')
            conn.execute(f'drop role "{role}"')


async def test_a_worker_that_cannot_prepare_says_why_once_a_try_and_still_returns_leases(
    pool: AsyncConnectionPool[Any], limited_role: str
) -> None:
    # A job of no workspace, claimed by a worker that then died: its lease expires in 1 s.
    await queue.resync(pool, "slack", "C0DEAD")
    dead = await queue.claim(pool, "worker-that-died", limit=1, lease_seconds=1.0, source_slots={"slack": 1})
    assert len(dead) == 1
    env = {
        **os.environ,
        "DATABASE_URL": limited_role,
        "NOTION_TOKEN": "secret_cannot_store",
        "DEBOUNCE_LEASE_SECONDS": "1",
        "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.2",
        "DEBOUNCE_LOG_FORMAT": "text",
    }
    for name in ("SLACK_BOT_TOKEN", "DEBOUNCE_SECRET_KEY"):
        env.pop(name, None)
    proc = start_worker(env)
    try:
        deadline = time.monotonic() + 30
        while True:
            job = await queue.get(pool, dead[0][0].id)
            stats = await queue.stats(pool)
            if job is not None and job.status.value == "pending" and stats["workers"]["alive"]:
                break
            assert time.monotonic() < deadline, "the expired lease was not returned"
            await asyncio.sleep(0.1)
        # The worker is alive and has claimed nothing, while the returned job is due.
        assert stats["workers"] == {"alive": 1, "last_claim_age_seconds": None}
        assert stats["totals"]["pending"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    said = [line for line in out.splitlines() if "cannot start" in line]
    assert said, out
    assert (
        "worker cannot start: preparing the workspaces failed with InsufficientPrivilege: "
        "permission denied for table workspaces; retrying in" in said[0]
    )
    assert "Traceback" not in out
    assert any("expired lease returned" in line for line in out.splitlines()), out
