"""``debounce serve --demo``: every source's local stand-in, and a tour that posts the example
webhooks to the running service and reports the documents the worker wrote."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import integrations
from debounce import queue
from debounce.cli.send import secret_for, sign_request
from debounce.config import Settings
from debounce.db import fetch_one
from debounce.sql import queries

__all__ = ["DEMO_ADMIN_TOKEN", "EXAMPLES", "demo_tour", "start_demo"]

log = logging.getLogger("debounce.cli")

DEMO_ADMIN_TOKEN = "demo-admin-token"
_HERE = Path(__file__).resolve().parent.parent
#: Example webhook bodies: the checkout's examples/, or the copy a wheel carries.
EXAMPLES = _HERE / "_examples" if (_HERE / "_examples").is_dir() else _HERE.parent / "examples"


def start_demo(settings: Settings, stack: contextlib.AsyncExitStack) -> tuple[Settings, list[Path]]:
    """Start every source's stand-in with demo content (stopped by ``stack``) and point
    ``settings`` at them; unset signing secrets and the admin token get demo values and the
    windows are short, so the tour is quick. Returns the settings and the example webhook
    files the tour posts."""
    changes: dict[str, Any] = {}
    files: list[Path] = []
    windows = dict(settings.windows)
    for source in integrations.sources().values():
        if source.demo is None:
            continue
        setup = source.demo()
        stack.callback(setup.stop)
        log.info("demo: local %s API stand-in at %s", source.source_type, setup.url)
        changes.update(setup.settings)
        windows[source.source_type] = setup.window
        if source.secret_setting and not source.signing_secret(settings):
            changes[source.secret_setting] = source.demo_secret
        for pattern in setup.examples:
            files.extend(sorted((EXAMPLES / source.source_type).glob(pattern)))
    demo = settings.with_(admin_token=settings.admin_token or DEMO_ADMIN_TOKEN, windows=windows,
                          **changes)
    return demo, files


async def demo_tour(
    settings: Settings, base: str, server: uvicorn.Server, pool: Any, files: list[Path]
) -> None:
    """Post the example webhooks to ourselves once the server is up, wait for the queue to
    drain (60 s at most), then log how many documents the worker wrote."""
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.05)
    async with httpx.AsyncClient(timeout=10) as client:
        for path in files:
            source = path.parent.name
            body = path.read_bytes()
            resp = await client.post(f"{base}/webhooks/{source}", content=body,
                                     headers=sign_request(source, body, secret_for(settings, source)[0]))
            log.info("demo: sent %s → %s %s", path.name, resp.status_code, resp.text[:200])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.should_exit:
        stats = await queue.stats(pool)
        if stats["totals"]["pending"] == 0 and stats["totals"]["processing"] == 0:
            break
        await asyncio.sleep(0.5)
    row = await fetch_one(pool, queries("cli")["document_summary"], {})
    log.info("demo: %s documents in the `documents` table — see them with "
             "`debounce documents` (DATABASE_URL unset uses the same embedded database)",
             row["n"] if row else 0)
