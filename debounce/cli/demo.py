"""``debounce serve --demo``: every source's local stand-in, and a tour that posts the example
webhooks to the running service and reports the documents the worker wrote.

The one production module that loads the stand-ins (``standins.demos``, imported when a demo
starts): the sources know nothing of their fakes, and the import contract in
``pyproject.toml`` allows this import only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn

import integrations
from debounce import queue, workspaces
from debounce.cli.send import secret_for, sign_request
from debounce.config import Settings
from debounce.contract import Source
from debounce.db import fetch_one
from debounce.secrets import Keyring, new_key
from debounce.sql import queries

if TYPE_CHECKING:
    from standins.demos import DemoSetup, DemoWorkspace

__all__ = ["DEMO_ADMIN_TOKEN", "EXAMPLES", "Demo", "connect_demo_workspaces", "demo_tour",
           "demo_setups", "fresh_event_id", "start_demo"]

log = logging.getLogger("debounce.cli")

DEMO_ADMIN_TOKEN = "demo-admin-token"
_HERE = Path(__file__).resolve().parent.parent
#: Example webhook bodies: the checkout's examples/, or the copy a wheel carries.
EXAMPLES = _HERE / "_examples" if (_HERE / "_examples").is_dir() else _HERE.parent / "examples"


@dataclass
class Demo:
    """What ``serve --demo`` started: the example webhook files the tour posts, and the further
    workspaces to connect (by source) with the webhook body of each."""

    files: list[Path] = field(default_factory=list)
    workspaces: list[tuple[str, DemoWorkspace]] = field(default_factory=list)


def demo_setups(stack: contextlib.ExitStack | contextlib.AsyncExitStack
                ) -> list[tuple[Source, DemoSetup]]:
    """Start the stand-in of every registered source that has one (``standins.demos``),
    stopped by ``stack``; returns each source with its :class:`~standins.demos.DemoSetup`."""
    from standins.demos import DEMOS

    started = []
    for source in integrations.sources().values():
        demo = DEMOS.get(source.source_type)
        if demo is None:
            continue
        setup = demo()
        stack.callback(setup.stop)
        started.append((source, setup))
    return started


def start_demo(settings: Settings, stack: contextlib.AsyncExitStack) -> tuple[Settings, Demo]:
    """Start every source's stand-in with demo content (stopped by ``stack``) and point
    ``settings`` at them; unset signing secrets and the admin token get demo values, the
    windows are short (so the tour is quick), and without ``DEBOUNCE_SECRET_KEY`` a demo key
    is kept in the data directory (it encrypts the demo workspaces' tokens). Returns the
    settings and what the tour needs (:class:`Demo`)."""
    changes: dict[str, Any] = {}
    demo_run = Demo()
    files = demo_run.files
    windows = dict(settings.windows)
    for source, setup in demo_setups(stack):
        log.info("demo: local %s API stand-in at %s", source.source_type, setup.url)
        changes.update(setup.settings)
        windows[source.source_type] = setup.window
        if source.secret_setting and not source.signing_secret(settings):
            changes[source.secret_setting] = source.demo_secret
        for pattern in setup.examples:
            files.extend(sorted((EXAMPLES / source.source_type).glob(pattern)))
        demo_run.workspaces.extend((source.source_type, w) for w in setup.workspaces)
    if not settings.secret_key:
        changes["secret_key"] = _demo_key(Path(settings.data_dir))
    demo = settings.with_(admin_token=settings.admin_token or DEMO_ADMIN_TOKEN, windows=windows,
                          **changes)
    return demo, demo_run


def _demo_key(data_dir: Path) -> str:
    """The demo's secret key, kept in ``<data dir>/demo-secret.key`` so a later demo run can
    read what an earlier one stored."""
    path = data_dir / "demo-secret.key"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = new_key()
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


async def connect_demo_workspaces(settings: Settings, pool: Any, demo_run: Demo) -> None:
    """Connect the stand-ins' further workspaces (the environment's token defines the first
    of each source), as ``debounce workspaces add`` would."""
    keyring = Keyring(settings.secret_key)
    for source_type, workspace in demo_run.workspaces:
        await workspaces.save(pool, keyring, source_type=source_type,
                              external_id=workspace.external_id, name=workspace.name,
                              credentials={"access_token": workspace.token}, origin="cli")
        log.info("demo: connected %s workspace %s (%s)", source_type, workspace.name,
                 workspace.external_id)


def fresh_event_id(body: bytes, run: str) -> bytes:
    """``body`` (a webhook's JSON) with its event id made unique to this run: the envelope's
    top-level ``event_id`` (Slack) or, failing that, ``id`` (Notion) gets ``-<run>`` appended,
    so a later demo run against the same database is not deduplicated as a redelivery. A body
    without either (or not a JSON object) comes back as it was."""
    try:
        event = json.loads(body)
    except ValueError:
        return body
    if not isinstance(event, dict):
        return body
    for key in ("event_id", "id"):
        if isinstance(event.get(key), str):
            event[key] = f"{event[key]}-{run}"
            return json.dumps(event).encode()
    return body


async def demo_tour(
    settings: Settings, base: str, server: uvicorn.Server, pool: Any, demo_run: Demo
) -> None:
    """Once the server is up, log where the dashboard is and how to sign in, post the example
    webhooks to ourselves (with event ids fresh to this run: :func:`fresh_event_id`), wait for
    the queue to drain (60 s at most), then log what became of the examples' jobs and how many
    documents the worker wrote."""
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.05)
    how = (f"the admin token {DEMO_ADMIN_TOKEN!r} (the demo's; DEBOUNCE_ADMIN_TOKEN sets "
           "another)" if settings.admin_token == DEMO_ADMIN_TOKEN else "DEBOUNCE_ADMIN_TOKEN")
    log.info("demo: dashboard at %s/admin/ — sign in with %s", base, how)
    run = "run" + secrets.token_hex(4)
    job_ids: set[int] = set()
    async with httpx.AsyncClient(timeout=10) as client:
        bodies = [(p.parent.name, p.name, p.read_bytes()) for p in demo_run.files]
        bodies += [(source, f"{w.name} ({source})", json.dumps(w.event).encode())
                   for source, w in demo_run.workspaces]
        for source, name, body in bodies:
            body = fresh_event_id(body, run)
            resp = await client.post(f"{base}/webhooks/{source}", content=body,
                                     headers=sign_request(source, body, secret_for(settings, source)[0]))
            log.info("demo: sent %s → %s %s", name, resp.status_code, resp.text[:200])
            job_ids.update(_job_ids(resp))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.should_exit:
        stats = await queue.stats(pool)
        if stats["totals"]["pending"] == 0 and stats["totals"]["processing"] == 0:
            break
        await asyncio.sleep(0.5)
    states: dict[str, int] = {}
    for job_id in sorted(job_ids):
        job = await queue.get(pool, job_id)
        state = job.status.value if job is not None else "gone"
        states[state] = states.get(state, 0) + 1
    row = await fetch_one(pool, queries("cli")["document_summary"], {})
    log.info("demo: the examples' %d jobs: %s; %s documents in the `documents` table — see "
             "them with `debounce documents` (DATABASE_URL unset uses the same embedded "
             "database)", len(job_ids),
             ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "none",
             row["n"] if row else 0)


def _job_ids(resp: httpx.Response) -> list[int]:
    """The job ids a webhook's answer names (``{"jobs": [{"job_id": …}]}``)."""
    try:
        body = resp.json()
    except ValueError:
        return []
    jobs = body.get("jobs") if isinstance(body, dict) else None
    return [int(j["job_id"]) for j in jobs or [] if isinstance(j, dict)
            and isinstance(j.get("job_id"), int)]
