"""Workspaces (issue 11) on the real database: credentials encrypted at rest, routing of events
to their workspace, revocation, the environment's workspace, and the upgrade of a populated
database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import one_job
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from debounce import queue, workspaces
from debounce.infra.secrets import Keyring, SecretKeyError, fingerprint, new_key
from debounce.infra.sql import migrations
from debounce.migrate import migrate
from debounce.types import JobEvent, JobStatus
from debounce.worker.decrypter import Decrypter
from debounce.worker.key_check import CredentialMarks

TOKEN = "secret_workspace_token_0123456789"


async def read_token(
    pool: AsyncConnectionPool[Any], keyring: Keyring | None, workspace_id: int
) -> Mapping[str, Any] | None:
    """What a worker with ``keyring`` syncs workspace ``workspace_id`` with (as a backfill page
    reads it: ``Decrypter.for_workspace``)."""
    return await Decrypter(keyring, CredentialMarks(pool), pool).for_workspace(workspace_id)


async def test_credentials_are_encrypted_at_rest_and_never_listed(
    pool: AsyncConnectionPool[Any],
) -> None:
    keyring = Keyring(new_key())
    row = await workspaces.save(
        pool,
        keyring,
        source_type="notion",
        external_id="ws-1",
        name="Acme",
        credentials={"access_token": TOKEN},
    )
    assert row["token_fingerprint"] == fingerprint(TOKEN) and "credentials" not in row
    async with pool.connection() as conn:
        cur = await conn.execute("select * from workspaces")  # test-only SQL
        dump = repr(await cur.fetchall())
    assert TOKEN not in dump and "workspace_token" not in dump
    listed = await workspaces.list_workspaces(pool)
    assert TOKEN not in repr(listed) and listed[0]["name"] == "Acme"
    creds = await read_token(pool, keyring, row["id"])
    assert creds is not None and creds["access_token"] == TOKEN
    with pytest.raises(SecretKeyError):
        await read_token(pool, None, row["id"])
    with pytest.raises(SecretKeyError):  # another key cannot read them
        await read_token(pool, Keyring(new_key()), row["id"])


async def test_a_key_rotates(pool: AsyncConnectionPool[Any]) -> None:
    old, new = new_key(), new_key()
    row = await workspaces.save(
        pool,
        Keyring(old),
        source_type="slack",
        external_id="T1",
        name="Team",
        credentials={"access_token": "xoxb-1"},
    )
    assert await workspaces.rotate_key(pool, Keyring(f"{new},{old}")) == 1
    creds = await read_token(pool, Keyring(new), row["id"])  # the old key is gone
    assert creds is not None and creds["access_token"] == "xoxb-1"


def test_a_malformed_key_is_a_configuration_error() -> None:
    from debounce.config import Settings

    with pytest.raises(ValueError, match="DEBOUNCE_SECRET_KEY"):
        Settings.from_env({"DEBOUNCE_SECRET_KEY": "not-a-fernet-key"})


async def route(directory: workspaces.Directory, source_type: str, external_id: str) -> workspaces.Route:
    """An event's route as the web finds it (``web/webhooks._routed``): the copy re-read when
    stale, then looked up."""
    if directory.stale():
        await directory.refresh()
    return directory.lookup(source_type, external_id)


async def test_routing_by_workspace(pool: AsyncConnectionPool[Any]) -> None:
    directory = workspaces.Directory(pool, ttl=0)
    # No workspace at all for the source: as before workspaces existed.
    assert await route(directory, "notion", "ws-x") == workspaces.Route(True, None)
    keyring = Keyring(new_key())
    a = await workspaces.save(
        pool,
        keyring,
        source_type="notion",
        external_id="ws-a",
        name="A",
        credentials={"access_token": "secret_a"},
    )
    assert await route(directory, "notion", "ws-a") == workspaces.Route(True, a["id"])
    unknown = await route(directory, "notion", "ws-unknown")
    assert not unknown.accept and unknown.reason == "unknown_workspace"
    await workspaces.set_status(pool, a["id"], "paused")
    assert (await route(directory, "notion", "ws-a")).accept  # events of a paused one queue
    await workspaces.set_status(pool, a["id"], "revoked", "token_revoked")
    revoked = await route(directory, "notion", "ws-a")
    assert not revoked.accept and revoked.reason == "revoked_workspace"
    # The environment's workspace takes events until its id is learned.
    env = await workspaces.ensure_env_workspace(pool, "notion", "secret_env")
    assert await route(directory, "notion", "ws-new") == workspaces.Route(True, env["id"])
    await workspaces.learn_external_id(pool, env["id"], "ws-env", "Env")
    assert not (await route(directory, "notion", "ws-new")).accept
    assert (await route(directory, "notion", "ws-env")).workspace_id == env["id"]


async def test_jobs_of_a_paused_or_revoked_workspace_wait_and_others_are_claimed(
    pool: AsyncConnectionPool[Any],
) -> None:
    keyring = Keyring(new_key())
    a = await workspaces.save(
        pool, keyring, source_type="slack", external_id="TA", name="A", credentials={"access_token": "xoxb-a"}
    )
    b = await workspaces.save(
        pool, keyring, source_type="slack", external_id="TB", name="B", credentials={"access_token": "xoxb-b"}
    )
    await queue.enqueue(
        pool,
        [
            JobEvent("slack", "CA", {}, "ea", 0, 0, workspace_id=a["id"]),
            JobEvent("slack", "CB", {}, "eb", 0, 0, workspace_id=b["id"]),
        ],
    )
    await workspaces.set_status(pool, a["id"], "revoked", "invalid_auth")
    assert await queue.seconds_until_due(pool, ["notion", "slack"]) is not None
    (claimed,) = [
        c.job for c in await queue.claim(pool, "w", limit=10, lease_seconds=60, source_slots={"slack": 10})
    ]
    assert claimed.source_page_id == "CB" and claimed.workspace_id == b["id"]
    assert [
        c.job for c in await queue.claim(pool, "w", limit=10, lease_seconds=60, source_slots={"slack": 10})
    ] == []
    await workspaces.set_status(pool, a["id"], "active")  # re-installed
    (again,) = [
        c.job for c in await queue.claim(pool, "w", limit=10, lease_seconds=60, source_slots={"slack": 10})
    ]
    assert again.source_page_id == "CA"


async def test_a_shared_channel_is_one_job_synced_by_the_team_that_spoke_last(
    pool: AsyncConnectionPool[Any],
) -> None:
    keyring = Keyring(new_key())
    a = await workspaces.save(
        pool, keyring, source_type="slack", external_id="TA", name="A", credentials={"access_token": "xoxb-a"}
    )
    b = await workspaces.save(
        pool, keyring, source_type="slack", external_id="TB", name="B", credentials={"access_token": "xoxb-b"}
    )
    first = await one_job.enqueue_events(
        pool, [JobEvent("slack", "CSHARED", {}, "e1", 30, 300, workspace_id=a["id"])]
    )
    second = await one_job.enqueue_events(
        pool, [JobEvent("slack", "CSHARED", {}, "e2", 30, 300, workspace_id=b["id"])]
    )
    assert first[0].job is not None and second[0].job is not None
    assert first[0].job.id == second[0].job.id and second[0].job.workspace_id == b["id"]
    assert second[0].job.event_count == 2


@pytest.fixture
def old_schema(pg_server_url: str) -> Iterator[str]:
    """A schema migrated to version 5 (before workspaces)."""
    schema = "u_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')  # name is ours
    url = make_conninfo(pg_server_url, options=f"-c search_path={schema}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "create table schema_migrations (version integer primary key, name text "
            "not null, applied_at timestamptz not null default now())"
        )
        for version, name, text in migrations():
            if version >= 6:
                break
            conn.execute(text.encode())
            conn.execute("insert into schema_migrations (version, name) values (%s, %s)", (version, name))
    try:
        yield url
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema}" cascade')


async def test_migrations_upgrade_a_populated_database(old_schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(old_schema, autocommit=True) as conn:
        for i in range(5):  # what the previous release wrote (test-only SQL)
            await conn.execute(
                "insert into sync_jobs (source_type, source_page_id, payload, event_id, "
                "scheduled_at, first_event_at, max_wait_until, revision) values ('notion', %s, "
                "'{}', %s, now(), now(), now(), 1)",
                [f"p{i}", f"e{i}"],
            )
        await conn.execute(
            "insert into documents (source_type, document_id, source_page_id, title, content, "
            "content_sha256) values ('notion', 'd1', 'p1', 'Kept', '# Kept', 'x')"
        )
    assert [name for name in await migrate(old_schema)] == [
        name for version, name, _ in migrations() if version >= 6
    ]
    async with await psycopg.AsyncConnection.connect(old_schema, autocommit=True) as conn:
        jobs = await queue.list_jobs(conn, limit=10)
        assert len(jobs.jobs) == 5 and all(j.workspace_id is None for j in jobs.jobs)
        assert all(j.status is JobStatus.PENDING for j in jobs.jobs)
        cur = await conn.execute("select title, workspace_id from documents")
        assert await cur.fetchall() == [("Kept", None)]


async def test_web_routes_events_by_workspace_and_slack_uninstall_revokes(
    pool: AsyncConnectionPool[Any],
) -> None:
    import json

    import httpx
    from test_web import body_of, post, rows, settings

    from debounce.web import create_app

    keyring = Keyring(new_key())
    team = json.loads(body_of("slack", "message.json"))["team_id"]
    connected = await workspaces.save(
        pool,
        keyring,
        source_type="slack",
        external_id=team,
        name="Connected",
        credentials={"access_token": "xoxb-c"},
    )
    app = create_app(settings(), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        ok = await post(client, "slack", body_of("slack", "message.json"))
        assert ok.status_code == 200 and ok.json()["jobs"][0]["outcome"] == "created"
        stranger = json.loads(body_of("slack", "thread_reply.json"))
        stranger["team_id"] = "TSTRANGER"
        stranger["event_id"] = "EvStranger"
        for auth in stranger.get("authorizations") or []:
            auth["team_id"] = "TSTRANGER"
        dropped = await post(client, "slack", json.dumps(stranger).encode())
        assert dropped.status_code == 200 and dropped.json()["jobs"] == []
        uninstall = {
            "type": "event_callback",
            "team_id": team,
            "event_id": "EvUninstall",
            "event": {"type": "app_uninstalled"},
            "event_time": 1,
        }
        gone = await post(client, "slack", json.dumps(uninstall).encode())
        assert gone.status_code == 200
        text = (await client.get("/metrics")).text
        assert 'debounce_webhooks_total{outcome="unknown_workspace",source="slack"} 1.0' in text
        after = await post(client, "slack", body_of("slack", "message_changed.json"))
        assert after.status_code == 200 and after.json()["jobs"] == []  # revoked: dropped
        admin = {"Authorization": "Bearer test-admin-token"}
        listed = (await client.get("/workspaces", headers=admin)).json()
    (ws,) = listed["workspaces"]
    assert ws["id"] == connected["id"] and ws["status"] == "revoked"
    assert ws["pending_jobs"] == 1 and "xoxb" not in json.dumps(listed)
    assert [r[1] for r in await rows(pool)] == ["C2147483705"]


async def test_a_new_environment_token_reactivates_its_revoked_workspace(
    pool: AsyncConnectionPool[Any],
) -> None:
    env = await workspaces.ensure_env_workspace(pool, "notion", "secret_old")
    await workspaces.set_status(pool, env["id"], "revoked", "unauthorized")
    same = await workspaces.ensure_env_workspace(pool, "notion", "secret_old")
    assert same["status"] == "revoked"  # a restart with the same bad token changes nothing
    fixed = await workspaces.ensure_env_workspace(pool, "notion", "secret_new")
    assert fixed["id"] == env["id"] and fixed["status"] == "active"


async def test_a_429_seen_by_one_worker_stops_every_worker_for_that_workspace_only(
    pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    """Two workers (two claim loops sharing only the database). Workspace A's first sync gets
    a 429 with ``Retry-After: 1.5``: no worker syncs any of A's jobs before the block ends,
    while B's jobs go on; the reason is shown per workspace."""
    import asyncio
    from datetime import UTC, datetime, timedelta

    from debounce.config import Settings
    from debounce.contract import RateLimited, SyncContext, SyncResult
    from debounce.worker import Worker

    key = new_key()
    keyring = Keyring(key)
    a = await workspaces.save(
        pool, keyring, source_type="noop", external_id="A", name="A", credentials={"access_token": "a"}
    )
    b = await workspaces.save(
        pool, keyring, source_type="noop", external_id="B", name="B", credentials={"access_token": "b"}
    )
    calls: list[tuple[int | None, datetime]] = []

    class Limited:
        source_type = "noop"

        def parse_webhook(self, headers: Any, body: bytes) -> Any:
            raise NotImplementedError

        async def sync(self, job: Any, context: SyncContext) -> SyncResult:
            calls.append((job.workspace_id, datetime.now(UTC)))
            if job.workspace_id == a["id"] and len([c for c in calls if c[0] == a["id"]]) == 1:
                raise RateLimited(1.5, "429", reason="rate_limited")
            await asyncio.sleep(0.05)
            return SyncResult(written=1)

        async def aclose(self) -> None:
            return None

    await queue.enqueue(
        pool,
        [JobEvent("noop", f"a{i}", {}, f"ea{i}", 0, 0, workspace_id=a["id"]) for i in range(8)]
        + [JobEvent("noop", f"b{i}", {}, f"eb{i}", 0, 0, workspace_id=b["id"]) for i in range(4)],
    )
    settings = Settings(
        database_url=database_url,
        lease_seconds=30,
        poll_interval_seconds=0.2,
        worker_concurrency=2,
        shutdown_grace_seconds=1,
        secret_key=key,
    )
    workers = [Worker(settings, pool, {"noop": Limited()}, conninfo=database_url) for _ in range(2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while len([c for c in calls if c[0] == a["id"]]) < 9:  # the limited one, then 8 syncs
            assert asyncio.get_running_loop().time() < deadline, calls
            await asyncio.sleep(0.05)
    finally:
        for w in workers:
            w.stop()
        await asyncio.gather(*tasks)
    (shown,) = [w for w in await workspaces.list_workspaces(pool) if w["id"] == a["id"]]
    assert shown["rate_limit_reason"] == "rate_limited" and shown["blocked_until"] is not None
    first_429 = next(t for w, t in calls if w == a["id"])
    blocked_until = shown["blocked_until"]
    assert blocked_until >= first_429 + timedelta(seconds=1.4)
    # A sync another worker had claimed in the same instant may still run; every A sync that
    # started once the block was recorded waits for its end.
    later_a = [t for w, t in calls if w == a["id"] and t > first_429 + timedelta(seconds=0.3)]
    assert len(later_a) >= 4  # at most 4 slots were busy when the 429 came
    assert all(t >= blocked_until - timedelta(milliseconds=50) for t in later_a), (later_a, blocked_until)
    b_calls = [t for w, t in calls if w == b["id"]]
    assert len(b_calls) == 4 and min(b_calls) < blocked_until  # B was not held up by A's limit
