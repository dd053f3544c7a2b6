"""Liveness under crashes (issue 32): whatever the workspace rows hold when a process starts,
workers start and sync, and webhooks are answered 2xx.

The world: the environment's Notion workspace (``NOTION_TOKEN``) and a second one connected
with a stored token, both served by the Notion stand-in through the real SDK. The
environment's workspace is at its concurrency limit when the processes start — the claim of a
worker that then died (a real claim, by the production statement, whose lease expires) holds
all of its K slots — which is what stopped every worker and answered webhooks 500 before
(``ensure_env_workspace`` answered the row with ``held_until = 'infinity'``, which psycopg
cannot load). A web process started then takes webhooks of both workspaces; workers are
started, one of them is killed with SIGKILL in the middle of the load and another started:
within the lease and a poll interval the dead claim's jobs come back, the limit is released,
and every due job is synced. The second workspace is, at the moment the workers start,
paused, blocked by a 429, revoked, or marked with a credentials error: each waits while it
must and syncs once it may.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from db_probe import scalar
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.cli import sign_request
from debounce.config import Settings, SourceWindow
from debounce.infra.secrets import Keyring, new_key
from debounce.web import create_app
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer

pytestmark = pytest.mark.slow

EXAMPLE = json.loads(
    (Path(__file__).resolve().parent.parent / "examples" / "notion" / "page.content_updated.json").read_text()
)
ENV_TOKEN = "secret_liveness_env_token"
BETA_TOKEN = "ntn_liveness_beta_token"
BETA_ID = "7d0c5b0e-2b8f-4c55-9d54-2f1f0e6b9a31"
SECRET = "secret_liveness_signing_0000"
K = 4  # DEBOUNCE_WORKSPACE_CONCURRENCY
LEASE = 2.0  # DEBOUNCE_LEASE_SECONDS
POLL = 0.2  # DEBOUNCE_POLL_INTERVAL_SECONDS


@pytest.fixture
def notion() -> Iterator[tuple[FakeNotion, str, list[str], list[str]]]:
    api = FakeNotion(token=ENV_TOKEN)
    api.add_workspace(BETA_ID, "Beta", BETA_TOKEN)
    alpha_pages = api.add_pages(30, blocks=1, title="Alpha")
    beta_pages = api.add_pages(10, BETA_ID, blocks=1, title="Beta")
    with BackgroundServer(api.app()) as server:
        yield api, server.url, alpha_pages, beta_pages


def settings_for(database_url: str, notion_url: str, key: str) -> Settings:
    return Settings(
        database_url=database_url,
        notion_token=ENV_TOKEN,
        notion_base_url=notion_url,
        notion_webhook_secret=SECRET,
        secret_key=key,
        windows={"notion": SourceWindow(0, 0)},
        workspace_concurrency=K,
        backfill_on_connect=False,
        reconcile_interval_seconds=0,
    )


def webhook(page_id: str, workspace_id: str, n: int) -> tuple[bytes, dict[str, str]]:
    body = copy.deepcopy(EXAMPLE)
    body["id"] = f"00000000-0000-4000-8000-{n:012d}"
    body["workspace_id"] = workspace_id
    body["entity"]["id"] = page_id
    raw = json.dumps(body).encode()
    return raw, {**sign_request("notion", raw, SECRET), "content-type": "application/json"}


async def post_webhooks(
    settings: Settings, pool: AsyncConnectionPool[Any], pages: list[tuple[str, str]], first: int
) -> list[int]:
    """A web process started now (its lifespan, its directory of workspaces) answers one
    webhook per (page, workspace id); returns the status codes."""
    app = create_app(settings, pool=pool)
    codes = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://web") as client,
    ):
        for n, (page, workspace_id) in enumerate(pages, start=first):
            raw, headers = webhook(page, workspace_id, n)
            codes.append((await client.post("/webhooks/notion", content=raw, headers=headers)).status_code)
    return codes


async def wait_for(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"{what}: not reached within {timeout} s"
        await asyncio.sleep(0.1)


@pytest.fixture
async def world(
    pool: AsyncConnectionPool[Any], database_url: str, notion: tuple[FakeNotion, str, list[str], list[str]]
) -> AsyncIterator[dict[str, Any]]:
    api, url, alpha_pages, beta_pages = notion
    key = new_key()
    settings = settings_for(database_url, url, key)
    alpha = await workspaces.ensure_env_workspace(pool, "notion", ENV_TOKEN)
    beta = await workspaces.save(
        pool,
        Keyring(key),
        source_type="notion",
        external_id=BETA_ID,
        name="Beta",
        credentials={"access_token": BETA_TOKEN},
        origin="cli",
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "NOTION_TOKEN": ENV_TOKEN,
        "NOTION_BASE_URL": url,
        "DEBOUNCE_SECRET_KEY": key,
        "DEBOUNCE_LEASE_SECONDS": str(LEASE),
        "DEBOUNCE_POLL_INTERVAL_SECONDS": str(POLL),
        "DEBOUNCE_WORKSPACE_CONCURRENCY": str(K),
        "NOTION_BUDGET_PER_MINUTE": "0",
        "DEBOUNCE_BACKFILL_ON_CONNECT": "false",
        "DEBOUNCE_RECONCILE_INTERVAL_SECONDS": "0",
        "NOTION_DEBOUNCE_SECONDS": "0",
        "NOTION_MAX_WAIT_SECONDS": "0",
    }
    env.pop("SLACK_BOT_TOKEN", None)
    procs: list[subprocess.Popen[bytes]] = []

    def start_worker() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "debounce", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
        return proc

    try:
        yield {
            "api": api,
            "settings": settings,
            "pool": pool,
            "alpha": int(alpha["id"]),
            "beta": int(beta["id"]),
            "alpha_pages": alpha_pages,
            "beta_pages": beta_pages,
            "start_worker": start_worker,
            "procs": procs,
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


async def synced(pool: AsyncConnectionPool[Any], pages: list[str]) -> int:
    return int(
        await scalar(
            pool, "select count(*) from documents where document_id = any(%s) and deleted_at is null", pages
        )
    )


async def at_limit_with_a_dead_claim(world: dict[str, Any]) -> None:
    """The environment's workspace has due jobs for all of its pages, and a worker that died
    holds K of them: claimed by the production claim with a lease that expires, never
    completed."""
    pool, settings = world["pool"], world["settings"]
    codes = await post_webhooks(
        settings, pool, [(p, EXAMPLE["workspace_id"]) for p in world["alpha_pages"]], first=0
    )
    assert codes == [200] * len(world["alpha_pages"])
    dead = await queue.claim(
        pool,
        "worker-that-died",
        limit=K,
        lease_seconds=LEASE,
        source_slots={"notion": K},
        workspace_concurrency=K,
    )
    assert [w is not None and job.workspace_id == world["alpha"] for job, w in dead] == [True] * K
    assert (
        await scalar(pool, "select at_concurrency_limit from workspaces where id = %s", world["alpha"])
        is True
    )


async def test_the_schema_holds_no_infinite_time_and_returns_no_claim_bookkeeping(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """What made the outage impossible by construction: no time column of the schema takes
    an infinity (so nothing can reach psycopg that it cannot load), and 'at K' is a flag."""
    row = await workspaces.ensure_env_workspace(pool, "notion", ENV_TOKEN)
    assert "held_until" not in row and "credentials" not in row and row["origin"] == "env"
    await queue.resync(pool, "notion", BETA_ID)  # a job row to try the constraint on
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for table, column in (
            ("workspaces", "held_until"),
            ("workspaces", "blocked_until"),
            ("sync_jobs", "scheduled_at"),
        ):
            for value in ("infinity", "-infinity"):
                with pytest.raises(psycopg.errors.CheckViolation):
                    await conn.execute(f"update {table} set {column} = %s", (value,))
        # Every time column of every table is covered, including those a later migration adds.
        uncovered = await (
            await conn.execute(
                "select c.table_name || '.' || c.column_name from information_schema.columns c "
                " where c.table_schema = current_schema() and c.data_type like 'timestamp%%' "
                "   and c.table_name <> 'schema_migrations' "
                "   and not exists (select 1 from pg_constraint k "
                "                    where k.conrelid = (c.table_schema || '.' || c.table_name)::regclass "
                "                      and k.contype = 'c' "
                "                      and pg_get_constraintdef(k.oid) like "
                "                          '%%isfinite(' || c.column_name || ')%%')"
            )
        ).fetchall()
        assert uncovered == []


@pytest.mark.parametrize("beta_state", ["active", "paused", "blocked", "revoked", "credentials_error"])
async def test_workers_killed_and_restarted_sync_everything_due_whatever_the_rows_hold(
    world: dict[str, Any], beta_state: str
) -> None:
    pool, settings = world["pool"], world["settings"]
    alpha_pages, beta_pages = world["alpha_pages"], world["beta_pages"]
    beta = world["beta"]
    await at_limit_with_a_dead_claim(world)
    assert await post_webhooks(settings, pool, [(p, BETA_ID) for p in beta_pages], first=500) == [200] * len(
        beta_pages
    )
    blocked_until = None
    if beta_state in ("paused", "revoked"):
        await workspaces.set_status(pool, beta, beta_state)
    elif beta_state == "blocked":
        block = await workspaces.block(pool, beta, 3.0, "rate_limited")
        assert block is not None
        blocked_until = block["blocked_until"]
    elif beta_state == "credentials_error":  # said by an earlier worker with another key
        await workspaces.set_credentials_error(pool, beta, workspaces.WRONG_KEY)

    # A web process restarted now, with the environment's workspace at its limit: every
    # webhook answered 2xx (it was 500); a revoked workspace's are acknowledged and dropped.
    codes = await post_webhooks(
        settings,
        pool,
        [(p, BETA_ID) for p in beta_pages] + [(p, EXAMPLE["workspace_id"]) for p in alpha_pages[:5]],
        first=1000,
    )
    assert codes == [200] * (len(beta_pages) + 5)

    first = world["start_worker"]()
    await wait_for(
        "some of the environment's pages synced", lambda: _at_least(pool, alpha_pages, 8), timeout=60
    )
    first.send_signal(signal.SIGKILL)  # mid-load: its claims are left behind
    first.wait(10)
    world["start_worker"](), world["start_worker"]()

    await wait_for(
        "every page of the environment's workspace synced",
        lambda: _at_least(pool, alpha_pages, len(alpha_pages)),
        timeout=90,
    )
    if beta_state in ("paused", "revoked"):  # its jobs wait, then resume with it
        assert await synced(pool, beta_pages) == 0
        await workspaces.set_status(pool, beta, "active")
    await wait_for(
        "every page of the second workspace synced",
        lambda: _at_least(pool, beta_pages, len(beta_pages)),
        timeout=60,
    )
    await wait_for("nothing left due or in flight", lambda: _idle(pool), timeout=30)
    assert await scalar(pool, "select bool_or(at_concurrency_limit) from workspaces") is False
    await wait_for(
        "the workers' heartbeats saying they claimed (one beat every 5 s)",
        lambda: _claimed_recently(pool),
        timeout=20,
    )
    if blocked_until is not None:
        first_sync = await scalar(
            pool, "select min(synced_at) from documents where document_id = any(%s)", beta_pages
        )
        assert first_sync >= blocked_until
    if beta_state == "credentials_error":  # this worker's key decrypts it: the mark is gone
        assert await scalar(pool, "select credentials_error from workspaces where id = %s", beta) is None
    for proc in world["procs"][1:]:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""


async def _at_least(pool: AsyncConnectionPool[Any], pages: list[str], n: int) -> bool:
    return await synced(pool, pages) >= n


async def _idle(pool: AsyncConnectionPool[Any]) -> bool:
    return bool(
        await scalar(pool, "select count(*) = 0 from sync_jobs where status in ('pending', 'processing')")
    )


async def _claimed_recently(pool: AsyncConnectionPool[Any]) -> bool:
    """The two workers started after the kill are alive (at least), and one of them said it
    claimed within the last minute."""
    workers = (await queue.stats(pool))["workers"]
    age = workers["last_claim_age_seconds"]
    return bool(workers["alive"] >= 2 and age is not None and age < 60)
