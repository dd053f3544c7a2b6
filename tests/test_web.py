"""The HTTP surface over real HTTP semantics (httpx ASGITransport, lifespan running) against the
real database, with the example webhooks signed the way Notion and Slack sign them."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette

from debounce import workspaces
from debounce.cli import sign_request
from debounce.config import Settings, SourceWindow
from debounce.infra.secrets import Keyring, new_key
from debounce.migrate import migrate
from debounce.web import create_app

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTION_SECRET = json.loads((EXAMPLES / "notion" / "verification.json").read_text())["verification_token"]
SLACK_SECRET = "test-slack-signing-secret"
ADMIN = "test-admin-token"


def settings(**changes: Any) -> Settings:
    base = Settings(
        database_url="postgresql://unused",
        notion_webhook_secret=NOTION_SECRET,
        slack_signing_secret=SLACK_SECRET,
        admin_token=ADMIN,
        windows={"notion": SourceWindow(300, 3600), "slack": SourceWindow(30, 300)},
    )
    return base.with_(**changes)


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        yield c


def body_of(source: str, name: str) -> bytes:
    return (EXAMPLES / source / name).read_bytes()


async def post(
    client: httpx.AsyncClient,
    source: str,
    body: bytes,
    *,
    secret: str | None = None,
    headers: dict[str, str] | None = None,
    timestamp: int | None = None,
) -> httpx.Response:
    key = secret or (NOTION_SECRET if source == "notion" else SLACK_SECRET)
    h = sign_request(source, body, key, timestamp=timestamp)
    h.update(headers or {})
    return await client.post(f"/webhooks/{source}", content=body, headers=h)


async def rows(
    pool: AsyncConnectionPool[Any],
    sql: str = "select source_type, source_page_id, event_count, status from sync_jobs order by id",
) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(sql)  # test-only SQL
        found: list[tuple[Any, ...]] = await cur.fetchall()
        return found


NOTION_PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
NOTION_DB = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"


@pytest.mark.parametrize(
    ("source", "name", "page"),
    [
        ("notion", "page.created.json", NOTION_PAGE),
        ("notion", "page.content_updated.json", NOTION_PAGE),
        ("notion", "page.properties_updated.json", NOTION_PAGE),
        ("notion", "page.deleted.json", NOTION_PAGE),
        ("notion", "page.undeleted.json", NOTION_PAGE),
        ("notion", "comment.created.json", NOTION_PAGE),
        ("notion", "database.schema_updated.json", NOTION_DB),
        ("slack", "message.json", "C2147483705"),
        ("slack", "thread_reply.json", "C2147483705"),
        ("slack", "message_changed.json", "C2147483705"),
        ("slack", "message_deleted.json", "C2147483705"),
        ("slack", "private_channel_message.json", "G0PRIVATE1"),
        ("slack", "bot_message.json", "C2147483705"),
    ],
)
async def test_each_event_creates_its_job_and_a_replay_changes_nothing(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any], source: str, name: str, page: str
) -> None:
    body = body_of(source, name)
    resp = await post(client, source, body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["jobs"][0]["outcome"] == "created"
    assert await rows(pool) == [(source, page, 1, "pending")]
    replay_headers = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    again = await post(client, source, body, headers=replay_headers if source == "slack" else None)
    assert again.status_code == 200
    assert again.json()["jobs"][0]["outcome"] == "duplicate"
    assert await rows(pool) == [(source, page, 1, "pending")]


async def test_events_of_one_page_debounce_into_one_job(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    for name in (
        "page.created.json",
        "page.content_updated.json",
        "page.properties_updated.json",
        "comment.created.json",
    ):
        resp = await post(client, "notion", body_of("notion", name))
        assert resp.status_code == 200
    assert await rows(pool) == [("notion", NOTION_PAGE, 4, "pending")]
    (payload,) = await rows(pool, "select payload->>'type' from sync_jobs")
    assert payload == ("comment.created",)


async def test_concurrent_deliveries_are_batched_and_all_acknowledged(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    template = json.loads(body_of("notion", "page.content_updated.json"))

    async def one(i: int) -> int:
        event = dict(template, id=f"evt-{i}", entity={"id": f"page-{i % 10}", "type": "page"})
        return (await post(client, "notion", json.dumps(event).encode())).status_code

    statuses = await asyncio.gather(*(one(i) for i in range(200)))
    assert set(statuses) == {200}
    counts = await rows(pool, "select sum(event_count), count(*) from sync_jobs")
    assert counts == [(200, 10)]


@pytest.mark.parametrize(
    ("source", "name", "expected"),
    [
        ("notion", "file_upload.completed.json", {"ok": True}),
        ("slack", "reaction_added.json", {"ok": True}),
        ("slack", "app_rate_limited.json", {"ok": True}),
        (
            "slack",
            "url_verification.json",
            {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
        ),
    ],
)
async def test_acknowledged_without_a_job(
    client: httpx.AsyncClient,
    pool: AsyncConnectionPool[Any],
    source: str,
    name: str,
    expected: dict[str, Any],
) -> None:
    resp = await post(client, source, body_of(source, name))
    assert resp.status_code == 200, resp.text
    for key, value in expected.items():
        assert resp.json()[key] == value
    assert await rows(pool) == []


async def test_notion_verification_token_is_surfaced(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any], caplog: pytest.LogCaptureFixture
) -> None:
    body = body_of("notion", "verification.json")
    unsigned = await client.post(
        "/webhooks/notion", content=body, headers={"Content-Type": "application/json"}
    )
    assert unsigned.status_code == 401  # a secret is configured: handshakes must be signed
    resp = await post(client, "notion", body)
    assert resp.status_code == 200
    assert NOTION_SECRET in caplog.text
    assert await rows(pool) == []
    token = await client.get("/admin/verification-token/notion", headers={"Authorization": f"Bearer {ADMIN}"})
    assert token.status_code == 200 and token.json()["token"] == NOTION_SECRET


async def test_metrics_count_webhooks_and_queue_depth(client: httpx.AsyncClient) -> None:
    await post(client, "notion", body_of("notion", "page.created.json"))
    await post(client, "notion", body_of("notion", "page.created.json"))
    await post(client, "slack", body_of("slack", "app_rate_limited.json"))
    text = (await client.get("/metrics")).text
    assert 'debounce_webhooks_total{outcome="created",source="notion"} 1.0' in text
    assert 'debounce_webhooks_total{outcome="duplicate",source="notion"} 1.0' in text
    assert 'debounce_webhook_warnings_total{source="slack"} 1.0' in text
    assert 'debounce_jobs{source="notion",state="pending"} 1.0' in text
    assert "debounce_enqueue_seconds_bucket" in text


# --- refused requests write nothing -----------------------------------------------------------


async def test_forged_signatures_are_401(client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]) -> None:
    for source, name in (("notion", "page.created.json"), ("slack", "message.json")):
        resp = await post(client, source, body_of(source, name), secret="wrong-secret")
        assert resp.status_code == 401, resp.text
        assert resp.json()["error"] and resp.json()["detail"]
        unsigned = await client.post(f"/webhooks/{source}", content=body_of(source, name))
        assert unsigned.status_code == 401
    assert await rows(pool) == []
    assert await rows(pool, "select * from seen_events") == []


async def test_stale_slack_timestamp_is_401(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    resp = await post(client, "slack", body_of("slack", "message.json"), timestamp=int(time.time()) - 6 * 60)
    assert resp.status_code == 401
    assert await rows(pool) == []


async def test_oversized_body_is_413(pool: AsyncConnectionPool[Any]) -> None:
    app = create_app(settings(max_body_bytes=1024), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        event = json.loads(body_of("notion", "page.created.json"))
        event["padding"] = "x" * 5000
        resp = await post(c, "notion", json.dumps(event).encode())
        assert resp.status_code == 413 and resp.json()["error"] == "payload_too_large"

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: streamed
            for _ in range(10):
                yield b"x" * 500

        streamed = await c.post("/webhooks/notion", content=chunks())
        assert streamed.status_code == 413
    assert await rows(pool) == []


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2, 3]", b'{"type": "page.created"}', b"", b'{"type": "page.created", "id": "x"}'],
)
async def test_malformed_bodies_are_400(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any], body: bytes
) -> None:
    resp = await post(client, "notion", body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"] and resp.json()["detail"]
    assert await rows(pool) == []


async def test_malformed_slack_body_is_400(client: httpx.AsyncClient) -> None:
    resp = await post(client, "slack", b"{not json")
    assert resp.status_code == 400 and resp.json()["error"]


async def test_unknown_source_is_400_naming_the_parameter(client: httpx.AsyncClient) -> None:
    resp = await client.post("/webhooks/jira", content=b"{}")
    assert resp.status_code == 400 and resp.json()["error"] == "unknown_source"
    assert resp.json()["detail"] == "source must be one of notion, slack, got 'jira'"


async def test_unconfigured_source_is_503(pool: AsyncConnectionPool[Any]) -> None:
    app = create_app(settings(slack_signing_secret=None), pool=pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        resp = await post(c, "slack", body_of("slack", "message.json"))
        assert resp.status_code == 503 and "SLACK_SIGNING_SECRET" in resp.json()["detail"]


# --- admin routes --------------------------------------------------------------------------------


async def test_admin_routes_refuse_without_token(client: httpx.AsyncClient) -> None:
    for method, path in (
        ("POST", "/resync/notion/abc"),
        ("GET", "/jobs"),
        ("GET", "/jobs/1"),
        ("POST", "/jobs/1/retry"),
        ("GET", "/stats"),
    ):
        assert (await client.request(method, path)).status_code == 401
        wrong = await client.request(method, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"


async def test_admin_routes_disabled_without_configured_token(
    pool: AsyncConnectionPool[Any],
) -> None:
    app = create_app(settings(admin_token=None), pool=pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        resp = await c.get("/jobs", headers={"Authorization": "Bearer anything"})
        assert resp.status_code == 503 and "DEBOUNCE_ADMIN_TOKEN" in resp.json()["detail"]


async def test_admin_resync_jobs_retry_stats(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    auth = {"Authorization": f"Bearer {ADMIN}"}
    resp = await client.post(f"/resync/notion/{NOTION_PAGE}", headers=auth)
    assert resp.status_code == 202
    job = resp.json()["job"]
    assert job["source_page_id"] == NOTION_PAGE and job["priority"] == 100
    assert (await client.post("/resync/jira/x", headers=auth)).status_code == 400
    listed = (await client.get("/jobs?status=pending&source=notion", headers=auth)).json()
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    assert (await client.get("/jobs?status=bogus", headers=auth)).status_code == 400
    assert (await client.get(f"/jobs/{job['id']}", headers=auth)).json()["job"]["id"] == job["id"]
    assert (await client.get("/jobs/999999", headers=auth)).status_code == 404
    assert (await client.get("/jobs/abc", headers=auth)).status_code == 404
    conflict = await client.post(f"/jobs/{job['id']}/retry", headers=auth)
    assert conflict.status_code == 409 and conflict.json()["error"] == "conflict"
    assert (await client.post("/jobs/999999/retry", headers=auth)).status_code == 404
    stats = (await client.get("/stats", headers=auth)).json()
    assert stats["totals"]["pending"] == 1


async def test_resync_by_undashed_notion_id_hits_the_webhook_job(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    await post(client, "notion", body_of("notion", "page.created.json"))
    resp = await client.post(
        f"/resync/notion/{NOTION_PAGE.replace('-', '').upper()}", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert resp.status_code == 202 and resp.json()["job"]["source_page_id"] == NOTION_PAGE
    assert await rows(pool) == [("notion", NOTION_PAGE, 1, "pending")]


async def test_resync_names_the_workspace_whose_token_reads_a_new_page(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    auth = {"Authorization": f"Bearer {ADMIN}"}
    ws = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type="slack",
        external_id="T0RESYNC",
        name="Resync",
        credentials={"access_token": "xoxb-resync"},
    )
    resp = await client.post(f"/resync/slack/C0NEW?workspace_id={ws['id']}", headers=auth)
    assert resp.status_code == 202 and resp.json()["job"]["workspace_id"] == ws["id"]
    # An active job keeps its workspace; a workspace of another source, an unknown one or a
    # malformed id is refused before anything is written.
    again = await client.post("/resync/slack/C0NEW", headers=auth)
    assert again.json()["job"]["workspace_id"] == ws["id"]
    for query, detail in (
        (f"workspace_id={ws['id']}", "is not a notion workspace"),
        ("workspace_id=999999", "is not a notion workspace"),
        ("workspace_id=x", "workspace_id must be a whole number"),
    ):
        refused = await client.post(f"/resync/notion/{NOTION_PAGE}?{query}", headers=auth)
        assert refused.status_code == 400 and detail in refused.json()["detail"], refused.text
    assert await rows(pool) == [("slack", "C0NEW", 0, "pending")]


async def test_jobs_cursor_paging(client: httpx.AsyncClient) -> None:
    auth = {"Authorization": f"Bearer {ADMIN}"}
    for i in range(5):
        await client.post(f"/resync/slack/C{i}", headers=auth)
    first = (await client.get("/jobs?limit=3", headers=auth)).json()
    second = (await client.get(f"/jobs?limit=3&cursor={first['next_cursor']}", headers=auth)).json()
    assert len(first["jobs"]) == 3 and len(second["jobs"]) == 2 and second["next_cursor"] is None


# --- health -------------------------------------------------------------------------------------


async def test_healthz(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"ok": True}
    assert (await client.get("/readyz")).status_code == 200


async def test_readyz_and_webhooks_follow_the_database_down_and_back() -> None:
    """A database of its own, stopped and started again: /readyz and webhooks answer 503
    quickly while it is down (nothing accepted, so the sender redelivers) and recover."""
    import pgserver

    with tempfile.TemporaryDirectory(prefix="debounce-readyz-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        url = server.get_uri()
        try:
            await migrate(url)
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                url,
                min_size=1,
                max_size=4,
                timeout=1.5,
                kwargs={"autocommit": True},
                open=False,
                reconnect_timeout=60,
            )
            await pool.open(wait=True)
            app: Starlette = create_app(settings(), pool=pool)
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
            ):
                assert (await c.get("/readyz")).status_code == 200
                await asyncio.to_thread(server.cleanup)  # stop Postgres
                started = time.monotonic()
                down = await c.get("/readyz")
                assert down.status_code == 503 and down.json()["error"] == "database_unavailable"
                hook = await post(c, "notion", body_of("notion", "page.created.json"))
                assert hook.status_code == 503 and hook.json()["error"] == "database_unavailable"
                assert time.monotonic() - started < 10
                server = pgserver.get_server(data_dir, cleanup_mode="stop")  # start it again
                deadline = time.monotonic() + 30
                while (await c.get("/readyz")).status_code != 200:
                    assert time.monotonic() < deadline, "readyz did not recover"
                    await asyncio.sleep(0.2)
                again = await post(c, "notion", body_of("notion", "page.created.json"))
                assert again.status_code == 200 and again.json()["jobs"][0]["outcome"] == "created"
            await pool.close()
            async with await psycopg.AsyncConnection.connect(url) as conn:
                cur = await conn.execute("select count(*) from sync_jobs")
                assert (await cur.fetchone()) == (1,)
        finally:
            server.cleanup()
