"""Deletions held when they look like a mistake (issue 40, point 3; migration 027,
debounce.documents.deletions): the one guard every deletion goes through, a hold applied,
dismissed or released by the page coming back — through the store, the admin API and the CLI,
on real Postgres."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_probe import scalar
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from test_cli_errors import ROOT, clean_env, one_line, run
from test_dashboard import csrf_of, sign_in

from debounce import workspaces
from debounce.config import Settings
from debounce.documents import deletions, feed
from debounce.documents.deletions import DeletionGuard
from debounce.documents.store import Document, DocumentStore
from debounce.infra.secrets import Keyring, new_key
from debounce.web import create_app

ADMIN = "test-admin-token"


async def workspace_with(pool: AsyncConnectionPool[Any], n: int, name: str = "W") -> int:
    """A Notion workspace with ``n`` live documents ``<name>-0`` .. ``<name>-<n-1>``."""
    row = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type="notion",
        external_id=name,
        name=name,
        credentials={"access_token": f"tok-{name}"},
    )
    ws = int(row["id"])
    store = DocumentStore(pool)
    for i in range(n):
        await store.upsert(
            Document("notion", f"{name}-{i}", f"{name}-{i}", f"Page {i}", f"# Page {i}\n\ntext\n")
        )
    async with pool.connection() as conn:  # test-only SQL: the fence sets it in a sync
        await conn.execute(
            "update documents set workspace_id = %s where document_id like %s", (ws, f"{name}-%")
        )
    return ws


async def live(pool: AsyncConnectionPool[Any], ws: int) -> int:
    return int(
        await scalar(
            pool, "select count(*) from documents where workspace_id = %s and deleted_at is null", ws
        )
    )


async def test_small_deletions_go_through_and_a_burst_is_held_live_and_not_reported(
    pool: AsyncConnectionPool[Any],
) -> None:
    ws = await workspace_with(pool, 30)
    store = DocumentStore(pool)
    # 5 of 30 within the window: below the count, done.
    assert await store.mark_deleted("notion", [f"W-{i}" for i in range(5)]) == [f"W-{i}" for i in range(5)]
    await servable(pool)
    head = await feed.head(pool)
    # 8 more: 13 > 10 and 13 > 10 % of 30: held, reported as not deleted, still live.
    burst = [f"W-{i}" for i in range(5, 13)]
    assert await store.mark_deleted("notion", burst, why="answered object_not_found") == []
    assert await live(pool, ws) == 25
    (hold,) = await deletions.list_holds(pool)
    assert (hold.workspace_id, hold.status, hold.held) == (ws, "held", 8)
    assert hold.reason == (
        "13 notion documents answered object_not_found within 10 minutes: 43 % of the workspace"
    )
    # Holding is the operator's business: consumers see no change.
    await servable(pool)
    assert (await feed.read_changes(pool, head, 100)).changes == []
    # A held document asked to be deleted again stays held; one more joins the same hold.
    assert await store.mark_page_deleted("notion", "W-5") == []
    assert await store.mark_page_deleted("notion", "W-20") == []
    (hold,) = await deletions.list_holds(pool)
    assert hold.held == 9 and hold.reason.startswith("14 notion documents were found gone")


async def test_a_share_below_the_limit_deletes_even_many(pool: AsyncConnectionPool[Any]) -> None:
    ws = await workspace_with(pool, 30)
    store = DocumentStore(pool, guard=DeletionGuard(max_count=3, max_share=0.5))
    # 12 > 3 but 12 of 30 is 40 % < 50 %: both limits must be exceeded to hold.
    assert len(await store.mark_deleted("notion", [f"W-{i}" for i in range(12)])) == 12
    assert await live(pool, ws) == 18 and await deletions.list_holds(pool) == []
    # Past the window the earlier deletions no longer count.
    quick = DocumentStore(pool, guard=DeletionGuard(max_count=3, max_share=0.05, window_seconds=0))
    assert len(await quick.mark_deleted("notion", ["W-12", "W-13", "W-14"])) == 3


async def test_an_applied_hold_deletes_in_the_feed_and_a_dismissed_one_keeps(
    pool: AsyncConnectionPool[Any],
) -> None:
    ws = await workspace_with(pool, 20)
    store = DocumentStore(pool)
    assert await store.mark_deleted("notion", [f"W-{i}" for i in range(12)]) == []
    (hold,) = await deletions.list_holds(pool)
    await servable(pool)
    head = await feed.head(pool)
    applied = await deletions.resolve(pool, hold.id, "apply")
    assert (applied.status, applied.resolved) == ("applied", 12)
    assert await live(pool, ws) == 8
    await servable(pool)
    page = await feed.read_changes(pool, head, 100)
    assert sorted(c.document_id for c in page.changes if c.op == "delete") == sorted(
        f"W-{i}" for i in range(12)
    )
    with pytest.raises(deletions.HoldNotOpen):
        await deletions.resolve(pool, hold.id, "dismiss")
    # An operator's deletions do not count in the guard's window: one more goes through.
    assert await store.mark_deleted("notion", ["W-12"]) == ["W-12"]
    # A second burst, dismissed: the documents stay live and are released.
    other = await workspace_with(pool, 15, "V")
    assert await store.mark_deleted("notion", [f"V-{i}" for i in range(11)]) == []
    (second,) = await deletions.list_holds(pool, workspace_id=other)
    dismissed = await deletions.resolve(pool, second.id, "dismiss")
    assert (dismissed.status, dismissed.resolved) == ("dismissed", 11)
    assert await live(pool, other) == 15
    assert await scalar(pool, "select count(*) from documents where held_by = %s", second.id) == 0
    assert await deletions.list_holds(pool) == []
    assert [h.status for h in await deletions.list_holds(pool, status=None)] == ["dismissed", "applied"]


async def test_a_held_document_written_again_is_released(pool: AsyncConnectionPool[Any]) -> None:
    ws = await workspace_with(pool, 20)
    store = DocumentStore(pool)
    assert await store.mark_deleted("notion", [f"W-{i}" for i in range(12)]) == []
    # The page is back (its share restored): the sync writes it, unchanged.
    assert await store.upsert(Document("notion", "W-3", "W-3", "Page 3", "# Page 3\n\ntext\n")) == "unchanged"
    (hold,) = await deletions.list_holds(pool)
    assert hold.held == 11
    assert {d["document_id"] for d in await deletions.held_documents(pool, hold.id)} == {
        f"W-{i}" for i in range(12) if i != 3
    }
    applied = await deletions.resolve(pool, hold.id, "apply")
    assert applied.resolved == 11 and await live(pool, ws) == 9


@pytest.fixture
async def admin(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_url="postgresql://unused", admin_token=ADMIN), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://test",
            headers={"Authorization": f"Bearer {ADMIN}"},
        ) as c,
    ):
        yield c


async def test_the_admin_api_lists_shows_applies_and_dismisses(
    pool: AsyncConnectionPool[Any], admin: httpx.AsyncClient
) -> None:
    ws = await workspace_with(pool, 20)
    await DocumentStore(pool).mark_deleted("notion", [f"W-{i}" for i in range(12)])
    (listed,) = (await admin.get("/admin/deletions")).json()["holds"]
    assert (listed["workspace_id"], listed["workspace_name"], listed["held"]) == (ws, "W", 12)
    assert "12 notion documents were found gone within 10 minutes" in listed["reason"]
    shown = (await admin.get(f"/admin/deletions/{listed['id']}")).json()
    assert len(shown["documents"]) == 12 and shown["hold"]["status"] == "held"
    assert (await admin.get("/admin/deletions", params={"status": "nope"})).status_code == 400
    assert (await admin.get("/admin/deletions/99999")).status_code == 404
    assert (await admin.post(f"/admin/deletions/{listed['id']}/explode")).status_code == 404
    answer = await admin.post(f"/admin/deletions/{listed['id']}/apply")
    assert answer.status_code == 200 and answer.json()["hold"]["resolved"] == 12
    again = await admin.post(f"/admin/deletions/{listed['id']}/dismiss")
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    assert (await admin.get("/admin/deletions")).json()["holds"] == []
    anonymous = await admin.get("/admin/deletions", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def test_the_cli_lists_and_resolves_holds(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    await workspace_with(pool, 20)
    await DocumentStore(pool).mark_deleted("notion", [f"W-{i}" for i in range(12)])
    (hold,) = await deletions.list_holds(pool)
    env = clean_env(tmp_path, DATABASE_URL=database_url)

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(run, ["deletions", *args], env, ROOT)

    listed = await cli("list")
    assert listed.returncode == 0, listed.stderr
    assert f"{hold.id:>5} held" in listed.stdout and "held=12" in listed.stdout
    assert hold.reason in listed.stdout
    shown = await cli("show", str(hold.id))
    assert "notion W-0  Page 0" in shown.stdout
    assert "needs the hold's id" in one_line(await cli("apply"))
    dismissed = await cli("dismiss", str(hold.id))
    assert dismissed.stdout.strip() == f"hold {hold.id} dismissed: 12 document(s) kept"
    assert f"no open hold {hold.id}" in one_line(await cli("apply", str(hold.id)))
    assert (await cli("list")).stdout.strip() == "no held deletions"


async def test_the_dashboard_shows_holds_and_applies_one(pool: AsyncConnectionPool[Any]) -> None:
    ws = await workspace_with(pool, 20)
    await DocumentStore(pool).mark_deleted("notion", [f"W-{i}" for i in range(12)])
    (hold,) = await deletions.list_holds(pool)
    app = create_app(Settings(database_url="postgresql://unused", admin_token=ADMIN), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        assert (await sign_in(client, ADMIN)).status_code == 303
        overview = await client.get("/admin/")
        assert overview.status_code == 200
        assert "Held deletions" in overview.text and escape(hold.reason) in overview.text
        token = csrf_of(overview.text)
        refused = await client.post(f"/admin/holds/{hold.id}/apply", data={"csrf_token": "x"})
        assert refused.status_code == 403 and await live(pool, ws) == 20
        done = await client.post(f"/admin/holds/{hold.id}/apply", data={"csrf_token": token})
        assert done.status_code == 303 and done.headers["location"] == "/admin/"
        shown = (await client.get("/admin/")).text
        assert f"Hold {hold.id} applied: 12 document(s) deleted." in shown
        assert "Held deletions" not in shown and await live(pool, ws) == 8
        await client.post(f"/admin/holds/{hold.id}/dismiss", data={"csrf_token": token})
        assert f"Nothing done: no open hold {hold.id}" in (await client.get("/admin/")).text


async def test_a_removed_workspaces_hold_holds_nothing_once_its_documents_move_on(
    pool: AsyncConnectionPool[Any],
) -> None:
    ws = await workspace_with(pool, 20)
    store = DocumentStore(pool)
    assert await store.mark_deleted("notion", [f"W-{i}" for i in range(12)]) == []
    assert (await workspaces.remove(pool, ws))["status"] == "removed"  # a tombstone
    assert await deletions.list_holds(pool) == []  # its hold is not shown any more
    # Connected again as a new workspace: a deletion there is judged afresh, not stuck.
    again = await workspace_with(pool, 0, "V")
    async with pool.connection() as conn:
        await conn.execute("update documents set workspace_id = %s", (again,))
    assert await store.mark_deleted("notion", ["W-0"]) == ["W-0"]
