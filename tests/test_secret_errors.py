"""A worker that cannot decrypt a workspace's stored token (issue 20, item 6): started with a
wrong ``DEBOUNCE_SECRET_KEY``, or without one while a token gets stored. Real worker processes,
real SDKs against the stand-ins, real Postgres.

It says so once per workspace (one warning line naming the workspace and the variable, no
traceback), marks the workspace (``credentials_error`` in ``list_workspaces``, ``GET
/workspaces/{id}``, ``debounce workspaces list``), spends no attempt of its jobs (they wait,
parked, like a paused workspace's), ``debounce backfill`` says what blocks the backfill and
exits 1, and a worker restarted with the right key clears the mark and syncs the job.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_probe import scalar
from psycopg_pool import AsyncConnectionPool
from test_backfill_e2e import wait_for

from debounce import queue, workspaces
from debounce.config import Settings, SourceWindow
from debounce.contract import Syncer
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import backfills
from debounce.types import JobEvent
from debounce.web import create_app
from debounce.worker import Worker
from integrations import notion, slack
from standins.notion_api import DEMO_TOKEN, FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack
from standins.slack_teams import DEFAULT_TEAM_ID

SLACK_TOKEN = "xoxb-secret-errors-test"
CHANNEL = "C2147483705"  # the demo team's channel (standins/slack_demo.py)
ADMIN = "admin-secret-errors"


@pytest.fixture
def apis() -> Iterator[tuple[str, str]]:
    """The Notion stand-in (the environment's workspace: a sentinel whose syncs show the
    worker's loops went round) and the Slack one (the stored token's team)."""
    n, s = FakeNotion.demo(), FakeSlack.demo(token=SLACK_TOKEN)
    with BackgroundServer(n.app()) as ns, BackgroundServer(s.app()) as ss:
        yield ns.url, ss.url + "/api/"


def worker_env(database_url: str, apis: tuple[str, str], key: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBOUNCE_", "SLACK_", "NOTION_", "DATABASE_URL"))
    }
    env.update(
        {
            "DATABASE_URL": database_url,
            "NOTION_TOKEN": DEMO_TOKEN,
            "NOTION_BASE_URL": apis[0],
            "SLACK_API_URL": apis[1],
            "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.05",
            "DEBOUNCE_BACKFILL_ON_CONNECT": "0",
            "DEBOUNCE_RECONCILE_INTERVAL_SECONDS": "0",
            "DEBOUNCE_LOG_LEVEL": "INFO",
        }
    )
    if key is not None:
        env["DEBOUNCE_SECRET_KEY"] = key
    return env


class WorkerProcess:
    """``python -m debounce worker`` with its stderr in a file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._file = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "debounce", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._file,
        )

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                assert self.proc.wait(30) == 0
            finally:
                if self.proc.poll() is None:
                    self.proc.kill()
        self._file.close()
        return self.log.read_text()


async def store_slack_workspace(pool: AsyncConnectionPool[Any], key: str) -> int:
    row = await workspaces.save(
        pool,
        Keyring(key),
        source_type="slack",
        external_id=DEFAULT_TEAM_ID,
        name="Demo team",
        credentials={"access_token": SLACK_TOKEN},
        origin="cli",
        bot_user_id="U0BOT",
    )
    return int(row["id"])


async def enqueue_channel(pool: AsyncConnectionPool[Any], workspace_id: int) -> int:
    (result,) = await queue.enqueue(
        pool, [JobEvent("slack", CHANNEL, {}, None, 0.0, 0.0, workspace_id=workspace_id)]
    )
    assert result.job_id is not None
    return result.job_id


async def credentials_error(pool: AsyncConnectionPool[Any], workspace_id: int) -> str | None:
    (row,) = await workspaces.list_workspaces(pool, workspace_id)
    error = row["credentials_error"]
    return None if error is None else str(error)


async def sentinel_round(pool: AsyncConnectionPool[Any]) -> None:
    """A backfill of the environment's Notion workspace, walked and synced to its end: the
    worker's enumerator and claim loop both went round after what came before."""
    env_ws = int(
        await scalar(pool, "select id from workspaces where origin = 'env' and source_type = 'notion'")
    )
    started = await backfills.request(pool, env_ws, "backfill")
    assert started is not None

    async def done() -> bool:
        status = await scalar(pool, "select status from backfills where id = %s", started["id"])
        busy = await scalar(
            pool,
            "select count(*) from sync_jobs where workspace_id = %s and status in ('pending', 'processing')",
            env_ws,
        )
        return bool(status == "done" and busy == 0)

    await wait_for("the sentinel backfill of the Notion workspace", done)


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debounce", *args], env=env, capture_output=True, text=True, timeout=60
    )


def warnings_about(log: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


async def attempts_and_status(pool: AsyncConnectionPool[Any], job_id: int) -> tuple[int, str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "select attempts, status from (select * from sync_jobs union all "
            "select * from finished_jobs) j where id = %s",
            (job_id,),
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


@pytest.mark.slow
async def test_a_worker_with_a_wrong_key_says_so_once_parks_the_workspace_and_a_restart_clears_it(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[str, str], tmp_path: Path
) -> None:
    right, wrong = new_key(), new_key()
    ws = await store_slack_workspace(pool, right)
    job_id = await enqueue_channel(pool, ws)
    await backfills.request(pool, ws, "backfill")

    worker = WorkerProcess(worker_env(database_url, apis, wrong), tmp_path / "wrong.log")
    try:
        await wait_for("the credentials error", lambda: credentials_error(pool, ws))
        await sentinel_round(pool)
        await sentinel_round(pool)  # and once more: nothing is said twice

        # The state shows it: list_workspaces, GET /workspaces/{id}, `workspaces list`.
        assert await credentials_error(pool, ws) == workspaces.WRONG_KEY
        app = create_app(Settings(database_url=database_url, admin_token=ADMIN), pool=pool)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://debounce.test"
            ) as client,
        ):
            got = await client.get(f"/workspaces/{ws}", headers={"Authorization": f"Bearer {ADMIN}"})
        assert got.status_code == 200, got.text
        body = got.json()["workspace"]
        assert body["credentials_error"] == workspaces.WRONG_KEY
        assert body["credentials_error_at"]
        env = worker_env(database_url, apis, wrong)
        listed = cli(["workspaces", "list"], env)
        assert listed.returncode == 0, listed.stderr
        assert f"credentials error: {workspaces.WRONG_KEY}" in listed.stdout

        # `debounce backfill` says what blocks it and exits 1 (no "is a worker running?").
        backfill = cli(["backfill", "slack"], env)
        assert backfill.returncode == 1, (backfill.stdout, backfill.stderr)
        blocked = [line for line in backfill.stderr.splitlines() if "blocked" in line]
        assert len(blocked) == 1, backfill.stderr
        assert f"workspace {ws} (slack {DEFAULT_TEAM_ID})" in blocked[0]
        assert workspaces.WRONG_KEY in blocked[0]
        assert "Traceback" not in backfill.stderr and "is a worker running" not in backfill.stdout

        # The job waits with its attempts intact.
        assert await attempts_and_status(pool, job_id) == (0, "pending")
    finally:
        log = worker.stop()
    said = warnings_about(log, "DEBOUNCE_SECRET_KEY does not decrypt")
    assert len(said) == 1, log
    assert "WARNING" in said[0] and f"workspace {ws} (slack {DEFAULT_TEAM_ID})" in said[0]
    assert "Traceback" not in log and "retrying" not in log, log

    # Restarted with the right key: the mark is cleared, the job syncs, the backfill goes on.
    worker = WorkerProcess(worker_env(database_url, apis, right), tmp_path / "right.log")
    try:
        await wait_for(
            "the job's sync",
            lambda: scalar(
                pool,
                "select status = 'completed' from (select * from sync_jobs union all "
                "select * from finished_jobs) j where id = %s",
                job_id,
            ),
        )
        assert await credentials_error(pool, ws) is None
        await wait_for(
            "the Slack backfill",
            lambda: scalar(pool, "select status = 'done' from backfills where workspace_id = %s", ws),
        )
    finally:
        log = worker.stop()
    assert await scalar(pool, "select count(*) from documents where workspace_id = %s", ws) > 0
    assert await attempts_and_status(pool, job_id) == (1, "completed")
    assert len(warnings_about(log, "credentials error cleared")) == 1, log
    assert "Traceback" not in log and not warnings_about(log, "does not decrypt"), log


@pytest.mark.slow
async def test_a_worker_without_a_key_marks_a_workspace_stored_after_it_started(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[str, str], tmp_path: Path
) -> None:
    key = new_key()
    worker = WorkerProcess(worker_env(database_url, apis, None), tmp_path / "nokey.log")
    try:
        await wait_for(
            "the environment's workspace",
            lambda: scalar(pool, "select count(*) from workspaces where origin = 'env'"),
        )
        await sentinel_round(pool)  # the worker is past its start
        ws = await store_slack_workspace(pool, key)
        job_id = await enqueue_channel(pool, ws)
        # The worker claims the job, cannot decrypt the token: the attempt is given back.
        await wait_for("the credentials error", lambda: credentials_error(pool, ws))
        assert await credentials_error(pool, ws) == workspaces.NO_KEY
        await wait_for(
            "the job back in line",
            lambda: scalar(
                pool, "select status = 'pending' and locked_by is null from sync_jobs where id = %s", job_id
            ),
        )
        await sentinel_round(pool)
        assert await attempts_and_status(pool, job_id) == (0, "pending")
        env = worker_env(database_url, apis, None)
        backfill = cli(["backfill", "slack", "--no-wait"], env)
        assert backfill.returncode == 1, (backfill.stdout, backfill.stderr)
        assert f"workspace {ws} (slack {DEFAULT_TEAM_ID}) blocked since" in backfill.stderr
        assert workspaces.NO_KEY in backfill.stderr and "Traceback" not in backfill.stderr
        await sentinel_round(pool)
        # The backfill requested above stays parked too: the enumerator never walks it.
        assert await scalar(pool, "select listing_pages from backfills where workspace_id = %s", ws) == 0
    finally:
        log = worker.stop()
    said = warnings_about(log, "DEBOUNCE_SECRET_KEY is not set")
    assert len(said) == 1, log
    assert "WARNING" in said[0] and f"workspace {ws} (slack {DEFAULT_TEAM_ID})" in said[0]
    assert "Traceback" not in log, log

    worker = WorkerProcess(worker_env(database_url, apis, key), tmp_path / "key.log")
    try:
        await wait_for(
            "the job's sync",
            lambda: scalar(
                pool,
                "select status = 'completed' from (select * from sync_jobs union all "
                "select * from finished_jobs) j where id = %s",
                job_id,
            ),
        )
    finally:
        log = worker.stop()
    assert await credentials_error(pool, ws) is None
    assert await attempts_and_status(pool, job_id) == (1, "completed")
    assert "Traceback" not in log, log


async def test_the_enumerator_defers_a_backfill_it_cannot_decrypt_without_a_traceback(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    notion_url, slack_url = apis
    settings = Settings(
        database_url=database_url,
        secret_key=new_key(),
        notion_token=DEMO_TOKEN,
        notion_base_url=notion_url,
        slack_api_url=slack_url,
        poll_interval_seconds=0.05,
        backfill_on_connect=False,
        reconcile_interval_seconds=0,
        windows={"notion": SourceWindow(0, 0), "slack": SourceWindow(0, 0)},
    )
    sources: dict[str, Syncer] = {
        "notion": notion.SOURCE.build(settings),
        "slack": slack.SOURCE.build(settings),
    }
    worker = Worker(settings, pool, sources)
    task = asyncio.create_task(worker.run())
    try:
        await wait_for(
            "the environment's workspace",
            lambda: scalar(pool, "select count(*) from workspaces where origin = 'env'"),
        )
        await sentinel_round(pool)
        ws = await store_slack_workspace(pool, new_key())  # another key than the worker's
        backfill = await backfills.request(pool, ws, "backfill")
        assert backfill is not None
        await wait_for("the credentials error", lambda: credentials_error(pool, ws))
        await sentinel_round(pool)
        await sentinel_round(pool)
    finally:
        worker.stop()
        await task
    row = await backfills.latest(pool, ws)
    assert row is not None and row.status == "running" and row.discovered == 0
    assert row.error == f"credentials error: {workspaces.WRONG_KEY}"
    assert await scalar(pool, "select lease_owner from backfills where id = %s", backfill["id"]) is None
    said = [r for r in caplog.records if workspaces.WRONG_KEY in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING", said
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
