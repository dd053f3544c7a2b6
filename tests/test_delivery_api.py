"""Push delivery's admin API (``/subscriptions``) and CLI (``debounce subscriptions``): each
route's answer, and bad input refused with a clear error that changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from test_demo_edits import clean_env, debounce
from test_web import ADMIN, settings

from debounce import delivery
from debounce.web import create_app

AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", headers=AUTH) as c,
    ):
        yield c


async def test_register_rotate_disable_enable_replay_remove(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    made = await client.post(
        "/subscriptions",
        json={
            "url": "https://consumer.example/hook",
            "source": "notion",
            "kinds": ["delete"],
            "full_content": True,
            "description": "the index",
        },
    )
    assert made.status_code == 201, made.text
    sub, secret = made.json()["subscription"], made.json()["secret"]
    assert secret.startswith("whsec_") and "secret" not in sub
    assert (sub["source_type"], sub["kinds"], sub["full_content"], sub["status"]) == (
        "notion",
        ["delete"],
        True,
        "active",
    )
    assert sub["cursor"] is not None  # from the head by default
    listed = (await client.get("/subscriptions")).json()["subscriptions"]
    assert [s["id"] for s in listed] == [sub["id"]] and listed[0]["lag_changes"] == 0
    rotated = await client.post(f"/subscriptions/{sub['id']}/rotate", json={"overlap_seconds": 60})
    assert rotated.status_code == 200 and rotated.json()["secret"] not in (secret, None)
    assert rotated.json()["subscription"]["previous_secret_until"] is not None
    off = await client.post(f"/subscriptions/{sub['id']}/disable")
    assert off.json()["subscription"]["status"] == "disabled"
    on = await client.post(f"/subscriptions/{sub['id']}/enable")
    assert on.json()["subscription"]["status"] == "active"
    replayed = await client.post(f"/subscriptions/{sub['id']}/replay", json={"from": "oldest"})
    assert replayed.status_code == 200 and replayed.json()["subscription"]["cursor"] is None
    assert (await client.delete(f"/subscriptions/{sub['id']}")).status_code == 204
    gone = await client.get(f"/subscriptions/{sub['id']}")
    assert gone.status_code == 404 and gone.json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"url": "ftp://x/"}, "url must be an absolute http(s) URL"),
        ({}, "url is required"),
        ({"url": "https://x/", "kinds": ["create"]}, "unknown kind(s) of change create"),
        ({"url": "https://x/", "kinds": "delete"}, "kinds has the wrong type"),
        ({"url": "https://x/", "from": "nonsense"}, "start must be 'head', 'oldest' or a feed cursor"),
        ({"url": "https://x/", "workspace_id": "7"}, "workspace_id has the wrong type"),
        ({"url": "https://x/", "full_content": 1}, "full_content has the wrong type"),
        ({"url": "https://x/", "source": "nosuch"}, "nosuch"),
    ],
)
async def test_bad_input_is_a_400_and_registers_nothing(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any], body: dict[str, Any], says: str
) -> None:
    answer = await client.post("/subscriptions", json=body)
    assert answer.status_code == 400, answer.text
    error = "unknown_source" if "source" in body else "bad_request"
    assert answer.json()["error"] == error and says in answer.json()["detail"]
    assert await delivery.list_subscriptions(pool) == []


async def test_unknown_ids_actions_and_bodies(client: httpx.AsyncClient) -> None:
    assert (await client.get("/subscriptions/99")).status_code == 404
    assert (await client.get("/subscriptions/x")).status_code == 404
    assert (await client.post("/subscriptions/99/enable")).status_code == 404
    made = (await client.post("/subscriptions", json={"url": "http://x/"})).json()
    sub_id = made["subscription"]["id"]
    assert (await client.post(f"/subscriptions/{sub_id}/explode")).status_code == 404
    missing = await client.post(f"/subscriptions/{sub_id}/replay", json={})
    assert missing.status_code == 400 and "from is required" in missing.json()["detail"]
    broken = await client.post("/subscriptions", content=b"{not json")
    assert broken.status_code == 400 and broken.json()["error"] == "bad_request"
    overlap = await client.post(f"/subscriptions/{sub_id}/rotate", json={"overlap_seconds": -1})
    assert overlap.status_code == 400
    anonymous = await client.get("/subscriptions", headers={"Authorization": ""})
    assert anonymous.status_code == 401


@pytest.mark.slow
def test_the_cli_adds_lists_and_refuses_in_one_line(database_url: str) -> None:
    env = clean_env(DATABASE_URL=database_url)
    added = debounce("subscriptions", "add", "http://127.0.0.1:9/hook", "--kinds", "upsert", env=env)
    assert added.returncode == 0 and "secret: whsec_" in added.stdout, added.stderr
    listed = debounce("subscriptions", "list", env=env)
    assert listed.stdout.startswith("1  http://127.0.0.1:9/hook  active  lag 0 changes")
    bad = debounce("subscriptions", "add", "ftp://x", env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "url must be an absolute http(s) URL" in bad.stderr
    missing = debounce("subscriptions", "enable", "42", env=env)
    assert missing.returncode == 1 and "no subscription 42" in missing.stderr
