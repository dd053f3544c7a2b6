"""Backfill under small budgets, end to end: a real worker (its enumerator and claim loop) with the real
integrations against the stand-ins through the real SDKs, on real Postgres — a Notion
workspace and a Slack team are connected, listed (``discover``) and synced completely, under
API budgets small enough to make syncs and listings yield, and every request is sent once."""

from __future__ import annotations

import asyncio
from typing import Any

from db_probe import scalar
from psycopg_pool import AsyncConnectionPool

from debounce import registry, workspaces
from debounce.config import Settings, SourceWindow
from debounce.infra.secrets import Keyring, new_key
from debounce.types import ApiBudget
from debounce.worker import Worker
from standins.notion_api import FakeNotion
from standins.notion_workspaces import DEFAULT_WORKSPACE_ID
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack
from standins.slack_teams import DEFAULT_TEAM_ID

N_TOKEN = "secret_backfill_notion"
S_TOKEN = "xoxb-backfill-slack"


async def until(pool: AsyncConnectionPool[Any], sql: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await scalar(pool, sql):
        assert asyncio.get_running_loop().time() < deadline, f"not reached: {sql}"
        await asyncio.sleep(0.1)


async def test_a_worker_backfills_a_notion_workspace_and_a_slack_team(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    notion = FakeNotion(token=N_TOKEN)
    pages = notion.add_pages(120, blocks=2)
    for i in range(3):
        notion.add_database(title=f"Tracker {i}")
    notion.set_trashed(pages[0])  # never listed, never synced
    notion.fail("search", 429, retry_after=2)  # the first backfill page: workspace blocked 2 s
    slack = FakeSlack(token=S_TOKEN)
    channels = slack.add_channels(5, messages=2)
    slack.add_channels(2, member=False, name="elsewhere")
    key = new_key()
    with BackgroundServer(notion.app()) as ns, BackgroundServer(slack.app()) as ss:
        settings = Settings(
            database_url=database_url,
            secret_key=key,
            notion_base_url=ns.url,
            slack_api_url=ss.url + "/api/",
            windows={"notion": SourceWindow(0, 0), "slack": SourceWindow(0, 0)},
            # Small buckets: syncs and backfill pages run dry and yield along the way.
            budgets={
                "notion": ApiBudget(per_minute=6000.0, burst=8.0),
                "slack": ApiBudget(per_minute=600.0, burst=2.0),
            },
        )
        keyring = Keyring(key)
        await workspaces.save(
            pool,
            keyring,
            source_type="notion",
            external_id=DEFAULT_WORKSPACE_ID,
            name="Notion",
            credentials={"access_token": N_TOKEN},
        )
        await workspaces.save(
            pool,
            keyring,
            source_type="slack",
            external_id=DEFAULT_TEAM_ID,
            name="Slack",
            credentials={"access_token": S_TOKEN},
        )
        worker = Worker(settings, pool, registry.create_all(settings), conninfo=database_url)
        running = asyncio.create_task(worker.run())
        try:
            await until(pool, "select count(*) = 2 from backfills where status = 'done'")
            await until(pool, "select count(*) = 0 from sync_jobs")
        finally:
            worker.stop()
            await asyncio.wait_for(running, 10)
            for syncer in worker.syncers.values():
                await syncer.aclose()
    docs = await scalar(
        pool,
        """select json_object_agg(source_type, n) from (
                                   select source_type, count(*) as n from documents
                                    where deleted_at is null group by source_type) t""",
    )
    assert docs == {"notion": 119 + 3, "slack": 5 * 2}
    listed = await scalar(pool, "select json_agg(discovered order by id) from backfills")
    assert sorted(listed) == [5, 122]
    slack_docs = await scalar(
        pool,
        "select array_agg(distinct split_part(document_id, '/', 1)) "
        "from documents where source_type = 'slack'",
    )
    assert sorted(slack_docs) == channels
    # Every request once, however often a sync or a backfill page yielded: Notion's 2 listing
    # pages (+ the one refused with 429), a page's Markdown and comments per page (its page
    # object travels with the bulk job from the listing: issue 31; a bulk job reads the
    # comments: issue 41), a data source's retrieve and its rows' query (one page each: issue
    # 41's table); Slack's listing (conversations, then canvases: issue 39) and one history
    # page per channel.
    assert notion.usage().by_endpoint == {
        "search": 3,
        "pages.markdown": 119,
        "comments.list": 119,
        "data_sources.retrieve": 3,
        "data_sources.query": 3,
    }
    assert slack.usage().by_endpoint == {
        "users.conversations": 1,
        "files.list": 1,
        "conversations.history": 5,
    }
