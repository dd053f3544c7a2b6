"""What start-up loaded is frozen in the processes' own entry points (``uvicorn
debounce.web:app``, ``debounce worker``), and only there: an app built inside another program
(a test) leaves that program's collector alone (:mod:`debounce.infra.heap`)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from typing import Any

import httpx
from psycopg_pool import AsyncConnectionPool

from debounce.config import Settings
from debounce.web import create_app

#: Run in a child process: the web app of the Procfile's line (``debounce.web:app``) through its
#: lifespan, then the worker's entry point until it has started; prints the frozen counts.
CHILD = """
import asyncio, gc, json, sys
import httpx
from debounce.infra import eventloop
from debounce.cli import run_worker
from debounce.config import Settings

before = gc.get_freeze_count()
from debounce.web import app

async def web():
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://web") as client:
        assert (await client.get("/healthz")).status_code == 200
        return gc.get_freeze_count()

web_frozen = eventloop.run(web())
gc.unfreeze()

async def worker():
    task = asyncio.ensure_future(run_worker(Settings.from_env(), install_signal_handlers=False))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if gc.get_freeze_count():
            break
    frozen = gc.get_freeze_count()
    task.cancel()
    try:
        await task
    except BaseException:
        pass
    return frozen

print(json.dumps({"before": before, "web": web_frozen, "worker": eventloop.run(worker())}))
"""


def test_the_processes_freeze_what_start_up_loaded(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "DEBOUNCE_LOG_LEVEL": "WARNING"}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["before"] == 0
    # the app, Starlette, psycopg, the SDKs' modules: tens of thousands of objects
    assert counts["web"] > 10_000, counts
    assert counts["worker"] > 10_000, counts


async def test_an_app_built_inside_another_program_freezes_nothing(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    before = gc.get_freeze_count()
    app = create_app(Settings(database_url=database_url), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://web") as client,
    ):
        assert (await client.get("/healthz")).status_code == 200
    assert gc.get_freeze_count() == before
