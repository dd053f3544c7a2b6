"""The environment's workspace learns its source id even when its budget is spent at the
moment it would ask (issue 42, point 6: the demo's Slack workspace spent its small budget on
its few syncs and stayed "source id not learned yet"): the question waits for the bucket to
refill, with a meter of its own, instead of for a later sync that may never come."""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import workspaces
from debounce.config import Settings
from debounce.types import ApiBudget, ClaimedWorkspace
from debounce.worker.env_workspaces import Learner
from debounce.workspaces import budgets
from debounce.workspaces.budgets import WorkspaceMeter
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

TOKEN = "xoxb-env-learning"


async def test_a_spent_budget_defers_the_question_until_it_refills(pool: AsyncConnectionPool[Any]) -> None:
    fake = FakeSlack.demo(token=TOKEN)
    with BackgroundServer(fake.app()) as server:
        settings = Settings(slack_bot_token=TOKEN, slack_api_url=f"{server.url}/api/")
        row = await workspaces.ensure_env_workspace(pool, "slack", TOKEN)
        workspace = ClaimedWorkspace(
            id=int(row["id"]), status="active", origin="env", external_id=None, bot_user_id=None
        )
        budget = ApiBudget(600.0, 1.0)  # a request every 0.1 s, none stored beyond one
        assert await budgets.take(pool, workspace.id, budget) == 0.0  # the bucket, spent
        made: list[int] = []

        def meter_for(workspace_id: int, source_type: str) -> WorkspaceMeter:
            made.append(workspace_id)
            return WorkspaceMeter(pool, workspace_id, budget)

        learner = Learner(settings, pool, meter_for)
        try:
            await learner.learn(workspace, "slack", WorkspaceMeter(pool, workspace.id, budget))
            rows = await workspaces.list_workspaces(pool, workspace.id)
            assert rows[0]["external_id"] is None  # not asked: no request left
            async with asyncio.timeout(10):
                while (await workspaces.list_workspaces(pool, workspace.id))[0]["external_id"] is None:
                    await asyncio.sleep(0.05)
        finally:
            await learner.close()
    learned = (await workspaces.list_workspaces(pool, workspace.id))[0]
    assert learned["external_id"] and learned["name"]
    assert made == [workspace.id]  # asked once more, with a meter of its own
