"""Backfill and reconciliation end to end (issue 13): the real worker, real SDKs, the stand-in
Notion and Slack APIs, real Postgres.

- Connecting a Notion workspace with 2 000 pages and a Slack team with 20 channels ends with a
  document for each; a live edit made during the backfill goes before the bulk jobs; a second
  backfill of the unchanged workspaces fetches no page content, only the listings.
- A worker killed mid-backfill: another one finishes it from the stored cursor without
  fetching again what was done.
- An edit whose webhook never came is synced by the next reconciliation; a page that disappeared is
  re-checked once and marked deleted by the full reconciliation.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import one_job
import pytest
from db_probe import scalar
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.config import Settings, SourceWindow
from debounce.documents.store import DocumentStore
from debounce.queue import backfills
from debounce.types import ApiBudget, JobEvent
from debounce.worker import Worker
from integrations import notion, slack
from standins.notion_api import DEMO_TOKEN, FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

SLACK_TOKEN = "xoxb-backfill-test"
#: Generous budgets: charged like any deployment's, large enough for a fast test.
FAST = {"notion": ApiBudget(60_000.0, 200.0), "slack": ApiBudget(60_000.0, 200.0)}


@pytest.fixture
def apis() -> Iterator[tuple[FakeNotion, FakeSlack, str, str]]:
    n, s = FakeNotion.demo(), FakeSlack.demo(token=SLACK_TOKEN)
    with BackgroundServer(n.app()) as ns, BackgroundServer(s.app()) as ss:
        yield n, s, ns.url, ss.url + "/api/"


def settings_for(database_url: str, notion_url: str, slack_url: str, **extra: Any) -> Settings:
    values: dict[str, Any] = dict(
        database_url=database_url,
        notion_token=DEMO_TOKEN,
        notion_base_url=notion_url,
        slack_bot_token=SLACK_TOKEN,
        slack_api_url=slack_url,
        slack_bot_user_id="U0BOT",
        poll_interval_seconds=0.1,
        worker_concurrency=8,
        workspace_concurrency=8,
        budgets=FAST,
        windows={"notion": SourceWindow(1, 5), "slack": SourceWindow(1, 5)},
    )
    values.update(extra)
    return Settings(**values)


class Running:
    """A worker in this process, with both sources' syncers."""

    def __init__(self, settings: Settings, pool: AsyncConnectionPool[Any]) -> None:
        self.syncers = {"notion": notion.SOURCE.build(settings), "slack": slack.SOURCE.build(settings)}
        self.worker = Worker(settings, pool, self.syncers)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.worker.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task
        for syncer in self.syncers.values():
            await syncer.aclose()


async def wait_for(what: str, check: Any, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def backfills_done(pool: AsyncConnectionPool[Any], count: int) -> bool:
    done = await scalar(pool, "select count(*) from backfills where status = 'done'")
    busy = await scalar(pool, "select count(*) from sync_jobs where status in ('pending', 'processing')")
    return bool(done >= count and busy == 0)


@pytest.mark.slow
async def test_connecting_workspaces_backfills_every_page_and_channel(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[FakeNotion, FakeSlack, str, str]
) -> None:
    api, slack_api, notion_url, slack_url = apis
    pages = api.add_pages(2000, blocks=2)
    channels = slack_api.add_channels(20, messages=3)
    settings = settings_for(database_url, notion_url, slack_url)
    live_page = pages[1500]
    async with Running(settings, pool):
        # A live edit while the backfill runs: it goes before the bulk lane.
        await wait_for(
            "the backfill to be under way",
            lambda: scalar(pool, "select count(*) > 100 from documents where source_type = 'notion'"),
        )
        api.edit_page(live_page, text="A live edit during the backfill.")
        ws = await scalar(pool, "select id from workspaces where source_type = 'notion'")
        sent_at = await scalar(pool, "select clock_timestamp()")
        (result,) = await queue.enqueue(
            pool,
            [
                JobEvent(
                    "notion",
                    live_page,
                    {"entity": {"id": live_page, "type": "page"}},
                    event_id="live-1",
                    debounce_seconds=1,
                    max_wait_seconds=5,
                    workspace_id=ws,
                )
            ],
        )
        assert result.outcome.value in ("created", "debounced")
        live_at = await wait_for(
            "the live edit",
            lambda: scalar(
                pool,
                "select synced_at from documents where document_id = %s "
                "and content like '%%A live edit during the backfill.%%'",
                live_page,
            ),
        )
        await wait_for("both backfills", lambda: backfills_done(pool, 2), timeout=180)
    # Due at its window's end, or at once when it joined the page's pending bulk job (which
    # was due already: the edit only raised its priority).
    assert result.scheduled_at is not None
    due_at = max(result.scheduled_at, sent_at)
    # Bulk documents written between the live job's due time and its own document: only the
    # syncs already in flight when it became due (one claim round of 8 slots, twice over).
    overtaken = await scalar(
        pool,
        "select count(*) from documents where source_type = 'notion' and synced_at > %s and synced_at < %s",
        due_at,
        live_at,
    )
    assert overtaken <= 16
    missing = await scalar(
        pool,
        "select count(*) from unnest(%s::text[]) p where not exists "
        "(select 1 from documents d where d.document_id = p)",
        pages,
    )
    assert missing == 0
    for channel in channels:
        assert await one_job.page_documents(DocumentStore(pool), "slack", channel), channel
    # GET /workspaces/{id}'s figures: the backfill, done.
    progress = await backfills.latest(pool, ws)
    assert progress is not None and progress.status == "done" and progress.remaining == 0
    assert progress.discovered >= 2000 and progress.enqueued >= 1999

    # A second backfill of the unchanged workspaces: the listings only.
    api.reset_usage()
    slack_api.reset_usage()
    for workspace in await workspaces.list_workspaces(pool):
        await backfills.request(pool, workspace["id"], "backfill")
    async with Running(settings, pool):
        await wait_for("the second backfills", lambda: backfills_done(pool, 4))
    notion_calls = api.usage().by_endpoint
    slack_calls = slack_api.usage().by_endpoint
    assert set(notion_calls) == {"search"}, notion_calls
    assert notion_calls["search"] <= 21  # 2 000 pages and the demo's, 100 a page
    assert set(slack_calls) == {"users.conversations", "files.list"}, slack_calls  # canvases: issue 39
    second = await backfills.latest(pool, ws)
    assert second is not None and second.enqueued == 0 and second.current >= 2000


@pytest.mark.slow
async def test_a_worker_killed_mid_backfill_is_relieved_without_fetching_twice(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[FakeNotion, FakeSlack, str, str]
) -> None:
    api, _, notion_url, _ = apis
    pages = api.add_pages(600, blocks=1)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "NOTION_TOKEN": DEMO_TOKEN,
        "NOTION_BASE_URL": notion_url,
        "DEBOUNCE_LEASE_SECONDS": "2",
        "DEBOUNCE_POLL_INTERVAL_SECONDS": "0.1",
        "NOTION_BUDGET_PER_MINUTE": "60000",
        "NOTION_BUDGET_BURST": "200",
        "DEBOUNCE_WORKSPACE_CONCURRENCY": "8",
    }
    for name in ("SLACK_BOT_TOKEN", "DEBOUNCE_SECRET_KEY"):
        env.pop(name, None)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "debounce", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    first = start()
    try:
        await wait_for(
            "the first worker's progress",
            lambda: scalar(pool, "select count(*) >= 150 from documents"),
            timeout=60,
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        before = api.calls["pages.retrieve"]
        second = start()
        try:
            await wait_for("the backfill", lambda: backfills_done(pool, 1), timeout=90)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(30) == 0
    finally:
        if first.poll() is None:
            first.kill()
    missing = await scalar(
        pool,
        "select count(*) from unnest(%s::text[]) p where not exists "
        "(select 1 from documents d where d.document_id = p)",
        pages,
    )
    assert missing == 0
    # Every page was fetched once, but those in flight when the first worker died (8 slots).
    assert api.calls["pages.retrieve"] <= len(pages) + 8 + 10, (before, api.calls)
    assert api.calls["search"] <= 2 * 7  # ~7 backfill pages, re-read at most once


async def test_a_lost_webhook_is_caught_by_the_next_sweep_and_a_vanished_page_is_rechecked(
    pool: AsyncConnectionPool[Any], database_url: str, apis: tuple[FakeNotion, FakeSlack, str, str]
) -> None:
    api, _, notion_url, slack_url = apis
    pages = api.add_pages(30, blocks=1)
    settings = settings_for(
        database_url,
        notion_url,
        slack_url,
        slack_bot_token=None,
        reconcile_interval_seconds=0.5,
        reconcile_full_interval_seconds=3600,
    )
    async with Running(settings, pool):
        await wait_for("the backfill", lambda: backfills_done(pool, 1))
        # An edit whose webhook never came.
        api.edit_page(pages[3], text="Edited while the webhooks were down.")
        await wait_for(
            "the reconciliation to sync the edit",
            lambda: scalar(
                pool,
                "select count(*) from documents where document_id = %s "
                "and content like '%%while the webhooks were down%%'",
                pages[3],
            ),
        )
    reconciliation = await backfills.latest(
        pool, int(await scalar(pool, "select id from workspaces where source_type = 'notion'"))
    )
    assert reconciliation is not None and reconciliation.kind == "reconcile" and reconciliation.enqueued >= 1
    # A page unshared: the next full reconciliation re-checks it once; the sync marks it deleted.
    api.unshare(pages[7])
    settings = settings.with_(reconcile_full_interval_seconds=0.5)
    async with Running(settings, pool):
        await wait_for(
            "the deletion",
            lambda: scalar(
                pool,
                "select count(*) from documents where document_id = %s and deleted_at is not null",
                pages[7],
            ),
        )
    assert await scalar(pool, "select count(*) from documents where deleted_at is not null") == 1


async def test_the_backfill_command_shows_progress_until_every_page_is_synced(
    pool: AsyncConnectionPool[Any],
    database_url: str,
    apis: tuple[FakeNotion, FakeSlack, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from debounce.cli import main

    api, _, notion_url, slack_url = apis
    api.add_pages(150, blocks=1)
    settings = settings_for(
        database_url,
        notion_url,
        slack_url,
        slack_bot_token=None,
        backfill_on_connect=False,
        reconcile_interval_seconds=0,
    )
    for name, value in {
        "DATABASE_URL": database_url,
        "NOTION_TOKEN": DEMO_TOKEN,
        "NOTION_BASE_URL": notion_url,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    await workspaces.ensure_env_workspace(pool, "notion", DEMO_TOKEN)
    async with Running(settings, pool):
        code = await asyncio.to_thread(main, ["backfill", "notion"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "backfill of workspace" in out and "started" in out
    assert "listed" in out and "synced" in out and "already current" in out
    assert await scalar(pool, "select count(*) from documents") >= 150
    assert await asyncio.to_thread(main, ["backfill", "notion", "--workspace", "999"]) == 1
    assert "no notion workspace 999" in capsys.readouterr().err
