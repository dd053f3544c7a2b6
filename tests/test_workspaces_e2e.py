"""Two Notion workspaces and two Slack teams connected by OAuth, end to end (issue 11): install
→ callback → stored encrypted → webhook → job → sync with that workspace's token through the
real SDKs against the stand-ins → document tagged with its workspace; a forged or replayed
state stores nothing; a revoked token stops its workspace only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from db_probe import scalar
from psycopg_pool import AsyncConnectionPool

from debounce import registry
from debounce.cli import sign_request
from debounce.config import Settings, SourceWindow
from debounce.infra.secrets import new_key
from debounce.web import create_app
from debounce.worker import Worker
from standins.notion_api import DEMO_PAGE_ID, DEMO_SECOND_PAGE_ID, DEMO_SECOND_WORKSPACE_ID, FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import DEMO_SECOND_CHANNEL, DEMO_SECOND_TEAM_ID, FakeSlack
from standins.slack_teams import DEFAULT_TEAM_ID

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTION_SECRET, SLACK_SECRET, ADMIN = "secret_e2e_signing_00000000", "e2e-slack-secret", "admin"
NOTION_A = "13950b26-c203-4f3b-b97d-93ec06319565"  # the examples' workspace


@pytest.fixture
async def world(pool: AsyncConnectionPool[Any], database_url: str) -> AsyncIterator[dict[str, Any]]:
    notion, slack = FakeNotion.demo(), FakeSlack.demo()
    notion.oauth_client("notion-client", "notion-secret")
    slack.oauth_client("slack-client", "slack-secret")
    with BackgroundServer(notion.app()) as ns, BackgroundServer(slack.app()) as ss:
        settings = Settings(
            database_url=database_url,
            admin_token=ADMIN,
            secret_key=new_key(),
            notion_base_url=ns.url,
            notion_client_id="notion-client",
            notion_client_secret="notion-secret",
            notion_webhook_secret=NOTION_SECRET,
            slack_api_url=ss.url + "/api/",
            slack_client_id="slack-client",
            slack_client_secret="slack-secret",
            slack_signing_secret=SLACK_SECRET,
            slack_authorize_url=ss.url + "/oauth/v2/authorize",
            public_url="https://debounce.test",
            windows={"notion": SourceWindow(0, 0), "slack": SourceWindow(0, 0)},
            # Tokens and webhooks only: no backfill or reconciliation adds jobs of its own (those are
            # tests/test_backfill_e2e.py's).
            backfill_on_connect=False,
            reconcile_interval_seconds=0,
        )
        app = create_app(settings, pool=pool)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="https://debounce.test"
            ) as client,
        ):
            yield {"notion": notion, "slack": slack, "client": client, "settings": settings, "pool": pool}


async def install(client: httpx.AsyncClient, source: str, code: str) -> httpx.Response:
    start = await client.get(f"/{source}/install")
    assert start.status_code == 302, start.text
    query = parse_qs(urlparse(start.headers["location"]).query)
    assert query["redirect_uri"] == [f"https://debounce.test/{source}/oauth_redirect"]
    return await client.get(f"/{source}/oauth_redirect", params={"code": code, "state": query["state"][0]})


def got_ws(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    workspace: dict[str, Any] = response.json()["workspace"]
    return workspace


async def test_forged_and_replayed_states_are_refused_and_store_nothing(world: dict[str, Any]) -> None:
    client, notion = world["client"], world["notion"]
    notion.authorization_code("code-a", NOTION_A)
    forged = await client.get("/notion/oauth_redirect", params={"code": "code-a", "state": "forged"})
    assert forged.status_code == 400 and "invalid" in forged.text
    start = await client.get("/notion/install")
    state = parse_qs(urlparse(start.headers["location"]).query)["state"][0]
    assert (
        await client.get("/notion/oauth_redirect", params={"error": "access_denied", "state": state})
    ).status_code == 400
    replayed = await client.get("/notion/oauth_redirect", params={"code": "code-a", "state": state})
    assert replayed.status_code == 400  # the state was used up by the denied attempt
    other = await client.get("/slack/oauth_redirect", params={"code": "x", "state": state})
    assert other.status_code == 400
    assert await scalar(world["pool"], "select count(*) from workspaces") == 0
    refused = await install(client, "notion", "no-such-code")
    assert refused.status_code == 400 and await scalar(world["pool"], "select count(*) from workspaces") == 0


async def test_two_workspaces_per_source_sync_with_their_own_tokens(world: dict[str, Any]) -> None:
    notion, slack, pool = world["notion"], world["slack"], world["pool"]
    client: httpx.AsyncClient = world["client"]
    notion.authorization_code("n-a", NOTION_A, access_token="ntn_token_a")
    notion.authorization_code("n-b", DEMO_SECOND_WORKSPACE_ID, access_token="ntn_token_b")
    slack.authorization_code("s-a", DEFAULT_TEAM_ID)
    slack.authorization_code("s-b", DEMO_SECOND_TEAM_ID)
    for source, code in (("notion", "n-a"), ("notion", "n-b"), ("slack", "s-a"), ("slack", "s-b")):
        done = await install(client, source, code)
        assert done.status_code == 200, done.text
    listed = (await client.get("/workspaces", headers={"Authorization": f"Bearer {ADMIN}"})).json()
    assert sorted(w["external_id"] for w in listed["workspaces"]) == sorted(
        [NOTION_A, DEMO_SECOND_WORKSPACE_ID, DEFAULT_TEAM_ID, DEMO_SECOND_TEAM_ID]
    )
    dump = json.dumps(listed) + str(await scalar(pool, "select array_agg(credentials::text) from workspaces"))
    assert "ntn_token" not in dump and "xoxb-" not in dump

    async def send(source: str, body: dict[str, Any]) -> httpx.Response:
        raw = json.dumps(body).encode()
        secret = NOTION_SECRET if source == "notion" else SLACK_SECRET
        return await client.post(
            f"/webhooks/{source}", content=raw, headers=sign_request(source, raw, secret)
        )

    page_a = json.loads((EXAMPLES / "notion" / "page.created.json").read_text())
    page_b = {
        **page_a,
        "id": "evt-b",
        "workspace_id": DEMO_SECOND_WORKSPACE_ID,
        "entity": {"id": DEMO_SECOND_PAGE_ID, "type": "page"},
    }
    message_a = json.loads((EXAMPLES / "slack" / "message.json").read_text())
    message_b = {
        **message_a,
        "event_id": "EvB",
        "team_id": DEMO_SECOND_TEAM_ID,
        "authorizations": [],
        "event": {**message_a["event"], "channel": DEMO_SECOND_CHANNEL},
    }
    for source, body in (("notion", page_a), ("notion", page_b), ("slack", message_a), ("slack", message_b)):
        resp = await send(source, body)
        assert resp.status_code == 200 and resp.json()["jobs"][0]["outcome"] == "created", resp.text

    settings = world["settings"]
    worker = Worker(settings, pool, registry.create_all(settings), conninfo=settings.database_url)
    running = asyncio.create_task(worker.run())
    try:
        await until(pool, "select count(*) = 4 from finished_jobs where status = 'completed'")
        tagged = await scalar(
            pool,
            """select json_agg(json_build_array(d.source_type, d.source_page_id,
                                          w.external_id) order by d.document_id)
                                        from documents d join workspaces w on w.id = d.workspace_id""",
        )
        pages = {(s, p.split("/")[0]): w for s, p, w in tagged}
        assert pages[("notion", DEMO_PAGE_ID)] == NOTION_A
        assert pages[("notion", DEMO_SECOND_PAGE_ID)] == DEMO_SECOND_WORKSPACE_ID
        assert pages[("slack", "C2147483705")] == DEFAULT_TEAM_ID
        assert pages[("slack", DEMO_SECOND_CHANNEL)] == DEMO_SECOND_TEAM_ID
        assert await scalar(pool, "select count(*) from documents where workspace_id is null") == 0

        # Workspace A's token is revoked: A stops (parked, revoked), B keeps syncing.
        notion.revoke("ntn_token_a")
        for suffix in ("2",):
            assert (await send("notion", {**page_a, "id": "evt-a" + suffix})).status_code == 200
            assert (await send("notion", {**page_b, "id": "evt-b" + suffix})).status_code == 200
        await until(pool, "select count(*) = 1 from workspaces where status = 'revoked'")
        await until(pool, "select count(*) = 5 from finished_jobs where status = 'completed'")
        parked = await scalar(
            pool,
            f"""select json_build_array(j.status, j.last_error, w.status)
                                          from sync_jobs j join workspaces w on w.id = j.workspace_id
                                         where j.source_page_id = '{DEMO_PAGE_ID}'
                                           and j.status in ('pending', 'processing')""",
        )
        assert parked[0] == "pending" and "AuthRevoked" in parked[1] and parked[2] == "revoked"
        calls_before = sum(notion.calls.values())
        await asyncio.sleep(1.0)
        assert sum(notion.calls.values()) == calls_before  # nothing retries in a loop
        # Re-installing reactivates it and the parked job runs.
        notion.authorization_code("n-a2", NOTION_A, access_token="ntn_token_a2")
        assert (await install(client, "notion", "n-a2")).status_code == 200
        await until(pool, "select count(*) = 6 from finished_jobs where status = 'completed'")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
        for syncer in worker.syncers.values():
            await syncer.aclose()


async def until(pool: AsyncConnectionPool[Any], sql: str, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await scalar(pool, sql):
        assert asyncio.get_running_loop().time() < deadline, f"not reached: {sql}"
        await asyncio.sleep(0.1)


async def test_operating_workspaces_from_the_cli_and_the_api(
    world: dict[str, Any],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from debounce.cli import main
    from standins.slack_api import DEMO_SECOND_TOKEN as SLACK_SECOND_TOKEN

    settings, client = world["settings"], world["client"]
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SLACK_API_URL", registry.get("slack").configure(settings).slack_api_url)
    monkeypatch.delenv("DEBOUNCE_SECRET_KEY", raising=False)
    code = await asyncio.to_thread(main, ["workspaces", "add", "slack", "--token", SLACK_SECOND_TOKEN])
    assert code == 2 and "DEBOUNCE_SECRET_KEY is not set" in capsys.readouterr().err
    monkeypatch.setenv("DEBOUNCE_SECRET_KEY", settings.secret_key)
    assert await asyncio.to_thread(main, ["workspaces", "add", "slack", "--token", SLACK_SECOND_TOKEN]) == 0
    out = capsys.readouterr().out
    assert f"slack {DEMO_SECOND_TEAM_ID}" in out and "sha256:" in out and SLACK_SECOND_TOKEN not in out
    assert await asyncio.to_thread(main, ["workspaces", "list"]) == 0
    listing = capsys.readouterr().out
    assert DEMO_SECOND_TEAM_ID in listing and SLACK_SECOND_TOKEN not in listing
    admin = {"Authorization": f"Bearer {ADMIN}"}
    (ws,) = (await client.get("/workspaces", headers=admin)).json()["workspaces"]
    paused = await client.post(f"/workspaces/{ws['id']}/pause", headers=admin)
    assert paused.status_code == 200 and paused.json()["workspace"]["status"] == "paused"
    assert (await client.post(f"/workspaces/{ws['id']}/resume", headers=admin)).json()["workspace"][
        "status"
    ] == "active"
    assert (await client.post("/workspaces/999/pause", headers=admin)).status_code == 404
    assert (await client.get("/workspaces/x", headers=admin)).status_code == 404
    assert ws["budget"] == {"per_minute": 45.0, "burst": 5.0, "available": 5.0, "source_default": True}
    wid = str(ws["id"])
    assert (
        await asyncio.to_thread(main, ["workspaces", "set-budget", wid, "--per-minute", "1", "--burst", "1"])
        == 0
    )
    assert "budget 1/min +1 (set for this workspace)" in capsys.readouterr().out
    got = (await client.get(f"/workspaces/{wid}", headers=admin)).json()["workspace"]["budget"]
    assert got == {"per_minute": 1.0, "burst": 1.0, "available": 1.0, "source_default": False}
    assert await asyncio.to_thread(main, ["workspaces", "set-budget", wid, "--burst", "0"]) == 2
    assert "burst must be a number >= 1" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["workspaces", "set-budget", wid]) == 2
    assert "--default" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["workspaces", "set-budget", wid, "--default"]) == 0
    assert "45/min +5 (the source's default)" in capsys.readouterr().out
    # A backfill by the API: 202, idempotent, its progress in GET /workspaces/{id}.
    assert got_ws(await client.get(f"/workspaces/{wid}", headers=admin))["backfill"] is None
    started = await client.post(f"/workspaces/{wid}/backfill", headers=admin)
    assert started.status_code == 202
    first = started.json()["workspace"]["backfill"]
    assert first["kind"] == "backfill" and first["status"] == "running"
    again = await client.post(f"/workspaces/{wid}/backfill", headers=admin)
    assert again.status_code == 202 and again.json()["workspace"]["backfill"]["id"] == first["id"]
    assert got_ws(await client.get(f"/workspaces/{wid}", headers=admin))["backfill"] == first
    assert (await client.post("/workspaces/999/backfill", headers=admin)).status_code == 404
    assert await asyncio.to_thread(main, ["backfill", "slack", "--workspace", wid, "--no-wait"]) == 0
    assert "already running" in capsys.readouterr().out
    # --workspace takes the source's id of it too (issue 20, item 11); another source's is refused.
    assert (
        await asyncio.to_thread(main, ["backfill", "slack", "--workspace", DEMO_SECOND_TEAM_ID, "--no-wait"])
        == 0
    )
    assert f"backfill of workspace {wid} ({DEMO_SECOND_TEAM_ID}): already running" in capsys.readouterr().out
    assert (
        await asyncio.to_thread(main, ["backfill", "notion", "--workspace", DEMO_SECOND_TEAM_ID, "--no-wait"])
        == 1
    )
    assert f"no notion workspace {DEMO_SECOND_TEAM_ID}" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["workspaces", "set-reconcile", wid, "on"]) == 0
    assert "reconciliation on" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["workspaces", "pause", str(ws["id"])]) == 0
    assert "is paused" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["workspaces", "remove", str(ws["id"])]) == 0
    # removed is a tombstone (migration 022): removing it again changes nothing, and may still
    # ask for its documents' deletion
    assert await asyncio.to_thread(main, ["workspaces", "remove", str(ws["id"]), "--purge-documents"]) == 0
    assert "0 pending jobs and 0 backfills cancelled" in capsys.readouterr().out.splitlines()[-1]
    assert await asyncio.to_thread(main, ["workspaces", "remove", "999"]) == 1
    assert "no workspace" in capsys.readouterr().err


@pytest.mark.slow
def test_a_worker_with_stored_tokens_and_no_key_exits_with_one_line(database_url: str) -> None:
    import os
    import subprocess
    import sys

    async def store() -> None:
        from psycopg_pool import AsyncConnectionPool as Pool

        from debounce import workspaces as ws
        from debounce.infra.secrets import Keyring

        async with Pool(database_url, kwargs={"autocommit": True}, open=False) as pool:
            await ws.save(
                pool,
                Keyring(new_key()),
                source_type="slack",
                external_id="TX",
                name="X",
                credentials={"access_token": "xoxb-x"},
            )

    asyncio.run(store())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEBOUNCE_", "SLACK_", "NOTION_"))}
    env["DATABASE_URL"] = database_url
    done = subprocess.run(
        [sys.executable, "-m", "debounce", "worker"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "configuration error" in done.stderr and "DEBOUNCE_SECRET_KEY is not set" in done.stderr
    assert "Traceback" not in done.stderr
    # One line names the variable (issue 20, item 2: it was said 4 times).
    assert sum("DEBOUNCE_SECRET_KEY" in line for line in done.stderr.splitlines()) == 1, done.stderr
