"""The read API (debounce.web.read_api): the read token, the documents, the change feed over
HTTP (410, 400, filters, long-polling woken by NOTIFY)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from xids import advance_past, closed, newest_bound

from debounce import registry
from debounce.config import Settings
from debounce.contract import Audience
from debounce.delivery import subscriptions
from debounce.documents import feed
from debounce.documents.store import Document, DocumentStore, content_sha256
from debounce.web import create_app

READ = "test-read-token"
ADMIN = "test-admin-token"
THREAD = "C0123ABCD/1732450000.000100"


def app_for(pool: AsyncConnectionPool[Any], **changes: Any) -> Starlette:
    base = Settings(database_url="postgresql://unused", admin_token=ADMIN, read_token=READ)
    return create_app(base.with_(**changes), pool=pool)


@pytest.fixture
async def app(pool: AsyncConnectionPool[Any]) -> AsyncIterator[Starlette]:
    application = app_for(pool)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {READ}"},
    ) as c:
        yield c


async def test_the_401_names_the_tokens_that_may_read_never_their_values(
    pool: AsyncConnectionPool[Any],
) -> None:
    how = " as 'Authorization: Bearer <token>'"
    for changes, which in (
        ({}, "the read token (DEBOUNCE_READ_TOKEN) or the admin token (DEBOUNCE_ADMIN_TOKEN)"),
        ({"admin_token": None}, "the read token (DEBOUNCE_READ_TOKEN)"),
        (
            {"read_token": None},
            "the admin token (DEBOUNCE_ADMIN_TOKEN); DEBOUNCE_READ_TOKEN, "
            "unset here, sets a token that may read and nothing else",
        ),
    ):
        application = app_for(pool, **changes)
        async with (
            application.router.lifespan_context(application),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://test") as c,
        ):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                refused = await c.get("/documents/changes", headers=headers)
                assert refused.status_code == 401 and refused.json() == {
                    "error": "unauthorized",
                    "detail": f"missing or wrong token: reads take {which}{how}",
                }
                assert READ not in refused.text and ADMIN not in refused.text


def doc(document_id: str, content: str, source: str = "notion") -> Document:
    return Document(
        source_type=source,
        document_id=document_id,
        source_page_id=document_id.split("/")[0],
        title=f"Title of {document_id}",
        url=f"https://example.com/{document_id}",
        content=content,
        metadata={"len": len(content)},
    )


async def test_reads_take_the_read_or_admin_token_and_the_read_token_opens_nothing_else(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    assert (await client.get("/documents")).status_code == 200
    admin = {"Authorization": f"Bearer {ADMIN}"}
    assert (await client.get("/documents/changes", headers=admin)).status_code == 200
    for path in ("/jobs", "/stats", "/workspaces"):
        refused = await client.get(path)
        assert refused.status_code == 401 and "DEBOUNCE_ADMIN_TOKEN" in refused.json()["detail"]
    assert (await client.post("/jobs/1/retry")).status_code == 401
    for headers in ({"Authorization": "Bearer wrong"}, {"Authorization": READ}):
        wrong = await client.get("/documents", headers=headers)
        assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"
        assert "DEBOUNCE_READ_TOKEN" in wrong.json()["detail"]
    off = app_for(pool, read_token=None, admin_token=None)
    async with (
        off.router.lifespan_context(off),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=off), base_url="http://test") as c,
    ):
        for path in ("/documents", "/documents/changes", f"/documents/slack/{THREAD}"):
            disabled = await c.get(path, headers={"Authorization": f"Bearer {READ}"})
            assert disabled.status_code == 503, path
            assert disabled.json() == {
                "error": "reads_disabled",
                "detail": (
                    "document reads are disabled: set DEBOUNCE_READ_TOKEN and send "
                    "'Authorization: Bearer <token>'"
                ),
            }


async def test_a_document_whose_id_has_a_slash_is_read_encoded_or_not(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    await DocumentStore(pool).upsert(doc(THREAD, "the thread", source="slack"))
    raw = await client.get(f"/documents/slack/{THREAD}")
    encoded = await client.get("/documents/slack/" + THREAD.replace("/", "%2F"))
    assert raw.status_code == encoded.status_code == 200
    assert raw.json() == encoded.json()
    got = raw.json()["document"]
    assert got["document_id"] == THREAD and got["source_page_id"] == "C0123ABCD"
    assert got["content"] == "the thread" and got["metadata"] == {"len": 10}
    assert got["content_sha256"] == content_sha256("the thread") and got["deleted_at"] is None
    missing = await client.get("/documents/slack/C0123ABCD/1.0")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    unknown = await client.get(f"/documents/gitlab/{THREAD}")
    assert unknown.status_code == 400 and unknown.json()["error"] == "unknown_source"


async def test_the_listing_pages_by_keyset_filters_and_includes_tombstones(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    store = DocumentStore(pool)
    for i in range(5):
        await store.upsert(doc(f"page{i}", f"content {i}"))
    await store.upsert(doc(THREAD, "thread", source="slack"))
    await store.mark_deleted("notion", ["page1"])
    seen: list[str] = []
    cursor = ""
    while True:
        page = await client.get("/documents", params={"source": "notion", "limit": 2, "cursor": cursor})
        assert page.status_code == 200, page.text
        seen += [d["document_id"] for d in page.json()["documents"]]
        if page.json()["next_cursor"] is None:
            break
        cursor = page.json()["next_cursor"]
        # A write between pages does not move rows across the cursor.
        await store.upsert(doc("page0", f"edited at {cursor}"))
    assert seen == ["page0", "page1", "page2", "page3", "page4"]
    everything = (await client.get("/documents")).json()["documents"]
    tombstones = [d["document_id"] for d in everything if d["deleted_at"] is not None]
    assert tombstones == ["page1"] and len(everything) == 6
    row = await store.get("slack", THREAD)
    assert row is not None
    since = (row["updated_at"] - timedelta(microseconds=1)).isoformat()
    recent = (await client.get("/documents", params={"updated_after": since})).json()
    assert THREAD in [d["document_id"] for d in recent["documents"]]
    assert "page2" not in [d["document_id"] for d in recent["documents"]]
    for params, word in (
        ({"updated_after": "yesterday"}, "updated_after"),
        ({"updated_after": "2026-11-24T12:00:00"}, "offset"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"cursor": "x"}, "cursor"),
        ({"source": "gitlab"}, "source"),
        ({"workspace_id": "-1"}, "workspace_id"),
    ):
        bad = await client.get("/documents", params=params)
        assert bad.status_code == 400 and word in bad.json()["detail"], (params, bad.text)


async def test_documents_carry_their_audience_and_visible_to_filters_by_slack_user(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    """Issue 23's audience through the read API: each document's audience, and ?visible_to=
    returning the team's public channels plus the conversations the user is in."""
    async with pool.connection() as conn:
        cur = await conn.execute(  # test-only SQL: two CLI-connected Slack teams
            "insert into workspaces (source_type, external_id, origin, credentials) "
            "values ('slack', 'TAAAA', 'cli', '\\x00'), ('slack', 'TBBBB', 'cli', '\\x00') "
            "returning id"
        )
        a, b = [int(r[0]) for r in await cur.fetchall()]
    store = DocumentStore(pool)
    written = {
        "C1/1.1": (a, Audience("public_channel")),
        "G1/2.1": (a, Audience("private_channel", ("U2", "U1"))),
        "D1/3.1": (a, Audience("im", ("U1", "U3"))),
        "G2/4.1": (a, Audience("mpim", ("U2", "U3", "U4"))),
        "C2/6.1": (b, Audience("public_channel")),
    }
    for document_id, (ws, audience) in written.items():
        await store.upsert(
            dataclasses.replace(doc(document_id, f"text of {document_id}", source="slack"), audience=audience)
        )
        async with pool.connection() as conn:  # an unfenced store writes no workspace
            await conn.execute(
                "update documents set workspace_id = %s where document_id = %s", (ws, document_id)
            )  # test-only SQL
    got = (await client.get("/documents/slack/G1/2.1")).json()["document"]
    assert got["audience"] == {
        "kind": "private_channel",
        "members": ["U1", "U2"],
        "member_count": 2,
        "accessible_by": None,
    }

    async def visible(user: str, ws: int, **extra: Any) -> list[str]:
        page = await client.get("/documents", params={"visible_to": user, "workspace_id": ws, **extra})
        assert page.status_code == 200, page.text
        return [d["document_id"] for d in page.json()["documents"]]

    assert await visible("U1", a) == ["C1/1.1", "G1/2.1", "D1/3.1"]
    assert await visible("U3", a) == ["C1/1.1", "D1/3.1", "G2/4.1"]
    assert await visible("U9", a) == ["C1/1.1"]
    assert await visible("U1", b) == ["C2/6.1"]
    assert await visible("U3", a, limit=2) == ["C1/1.1", "D1/3.1"]
    bad_queries: list[tuple[dict[str, str | int], str]] = [
        ({"visible_to": "U1"}, "workspace_id"),
        ({"visible_to": "U1", "workspace_id": a, "source": "notion"}, "source=slack"),
    ]
    for params, word in bad_queries:
        bad = await client.get("/documents", params=params)
        assert bad.status_code == 400 and word in bad.json()["detail"], (params, bad.text)


async def test_visible_to_asks_the_registry_which_sources_carry_audiences(
    pool: AsyncConnectionPool[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No source is named in the read path: ``visible_to`` filters the sources whose spec
    declares audiences (``Source.audiences``), and says which when there are several."""
    assert registry.get("slack").audiences and not registry.get("notion").audiences
    chat = dataclasses.replace(registry.get("slack"), source_type="chat")
    monkeypatch.setitem(registry._extra, "chat", chat)  # a second source with audiences
    application = app_for(pool)
    async with (
        application.router.lifespan_context(application),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application),
            base_url="http://test",
            headers={"Authorization": f"Bearer {READ}"},
        ) as client,
    ):
        params = {"visible_to": "U1", "workspace_id": "1"}
        ambiguous = await client.get("/documents", params=params)
        assert ambiguous.status_code == 400
        assert "source=chat or slack" in ambiguous.json()["detail"], ambiguous.text
        for source in ("chat", "slack"):
            chosen = await client.get("/documents", params={**params, "source": source})
            assert chosen.status_code == 200 and chosen.json()["documents"] == [], chosen.text
        refused = await client.get("/documents", params={**params, "source": "notion"})
        assert refused.status_code == 400, refused.text


async def test_the_feed_answers_400_for_bad_parameters(client: httpx.AsyncClient) -> None:
    for params, word in (
        ({"after": "garbage"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"wait": "61"}, "wait"),
        ({"wait": "nan"}, "wait"),
        ({"wait": "-1"}, "wait"),
        ({"source": "gitlab"}, "source"),
    ):
        bad = await client.get("/documents/changes", params=params)
        assert bad.status_code == 400, (params, bad.text)
        assert bad.json()["error"] == "bad_request" and word in bad.json()["detail"]


async def test_the_feed_serves_changes_in_order_and_410_says_where_to_follow_from(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    store = DocumentStore(pool)
    await store.upsert(doc("a", "1"))
    await store.upsert(doc(THREAD, "t", source="slack"))
    await store.mark_deleted("notion", ["a"])
    await servable(pool)
    body = (await client.get("/documents/changes")).json()
    assert [(c["source"], c["document_id"], c["op"]) for c in body["changes"]] == [
        ("notion", "a", "upsert"),
        ("slack", THREAD, "upsert"),
        ("notion", "a", "delete"),
    ]
    assert set(body["changes"][0]) == {
        "cursor",
        "source",
        "workspace_id",
        "document_id",
        "kind",
        "source_page_id",
        "op",
        "updated_at",
        "content_sha256",
        "sections",
    }
    slack_only = (await client.get("/documents/changes", params={"source": "slack"})).json()
    assert [c["document_id"] for c in slack_only["changes"]] == [THREAD]
    assert slack_only["next"] == body["next"]
    stale = feed.Cursor.decode(body["changes"][0]["cursor"])
    async with pool.connection() as conn:
        await conn.execute("update document_changes set changed_at = now() - interval '8 days'")
    bound = await newest_bound(pool)  # retention drops whole closed partitions (migration 028)
    await advance_past(pool, bound)
    await closed(pool, bound)
    pruned = await feed.prune_changes(pool, 7 * 86400)
    assert pruned is not None and pruned.changes == 3  # servable: read above
    gone = await client.get("/documents/changes", params={"after": stale.encode()})
    assert gone.status_code == 410
    assert gone.json()["error"] == "cursor_gone" and gone.json()["reason"] == "pruned"
    assert "GET /documents" in gone.json()["detail"]
    await store.upsert(doc("b", "2"))
    await servable(pool)
    follow = await client.get("/documents/changes", params={"after": gone.json()["cursor"]})
    assert [c["document_id"] for c in follow.json()["changes"]] == ["b"]
    other = feed.Cursor("1", stale.xid, stale.seq).encode()
    foreign = await client.get("/documents/changes", params={"after": other})
    assert foreign.status_code == 410 and foreign.json()["reason"] == "epoch"


async def test_a_long_poll_is_woken_by_a_write_and_times_out_with_the_same_next(
    pool: AsyncConnectionPool[Any], app: Starlette, client: httpx.AsyncClient
) -> None:
    head = (await client.get("/documents/changes")).json()["next"]
    timed_out = await client.get("/documents/changes", params={"after": head, "wait": "0.05"})
    assert timed_out.json() == {"changes": [], "next": head}
    assert timed_out.headers["debounce-served-by"] == "primary"
    assert timed_out.headers["debounce-replica-lag-seconds"] == "0.000"
    signal = app.state.web.feed_signal()
    await signal.listening.wait()
    polling = asyncio.create_task(client.get("/documents/changes", params={"after": head, "wait": "60"}))
    while signal.waiting == 0:  # the poll read nothing and waits
        assert not polling.done(), polling.result().text
        await asyncio.sleep(0)
    await DocumentStore(pool).upsert(doc("woken", "hello"))
    answer = await asyncio.wait_for(polling, 90)
    assert [c["document_id"] for c in answer.json()["changes"]] == ["woken"]


async def test_metrics_export_the_feed_lag(client: httpx.AsyncClient) -> None:
    text = (await client.get("/metrics")).text
    assert "# TYPE debounce_feed_lag_seconds gauge" in text
    assert "debounce_feed_lag_seconds 0.0" in text
    assert "debounce_replica_lag_seconds 0.0" in text


async def test_metrics_export_each_subscriptions_lag_and_state(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    """docs/deploying.md, "Alerts": a subscription's waiting changes, its failed attempts and
    whether it is disabled are gauges labelled with its id, read at scrape time."""
    store = DocumentStore(pool)
    for i in range(3):
        await store.upsert(doc(f"page{i}", f"content {i}"))
    await servable(pool)
    following, _ = await subscriptions.create(
        pool, "https://example.org/hook", start=subscriptions.Start(None)
    )
    stopped, _ = await subscriptions.create(
        pool, "https://example.org/other", start=await subscriptions.parse_start(pool, "head")
    )
    await subscriptions.disable(pool, stopped.id)
    text = (await client.get("/metrics")).text
    assert f'debounce_subscription_lag_changes{{subscription="{following.id}"}} 3.0' in text
    assert f'debounce_subscription_lag_changes{{subscription="{stopped.id}"}} 0.0' in text
    assert f'debounce_subscription_disabled{{subscription="{following.id}"}} 0.0' in text
    assert f'debounce_subscription_disabled{{subscription="{stopped.id}"}} 1.0' in text
    assert f'debounce_subscription_failed_attempts{{subscription="{following.id}"}} 0.0' in text
    assert f'debounce_subscription_delivered_changes{{subscription="{following.id}"}} 0.0' in text
    lag = [
        line
        for line in text.splitlines()
        if line.startswith(f'debounce_subscription_lag_seconds{{subscription="{following.id}"}}')
    ]
    assert len(lag) == 1 and 0.0 < float(lag[0].split()[-1]) < 600.0
    await subscriptions.remove(pool, stopped.id)
    text = (await client.get("/metrics")).text
    assert f'subscription="{stopped.id}"' not in text  # a removed subscription's gauges go


async def test_an_empty_parameter_is_the_same_as_none(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient
) -> None:
    """docs/consumers.md: an empty parameter counts as left out (the example consumer's first
    page asks `cursor=`), any other cursor but a returned one answers 400."""
    store = DocumentStore(pool)
    for i in range(3):
        await store.upsert(doc(f"page{i}", f"content {i}"))
    bare = (await client.get("/documents", params={"limit": 2})).json()
    empty = (
        await client.get("/documents", params={"limit": 2, "cursor": "", "source": "", "workspace_id": ""})
    ).json()
    assert empty == bare and [d["document_id"] for d in empty["documents"]] == ["page0", "page1"]
    for cursor in ("0x1", " ", "-3"):
        bad = await client.get("/documents", params={"cursor": cursor})
        assert bad.status_code == 400 and "cursor" in bad.json()["detail"], (cursor, bad.text)
    await servable(pool)  # the server is shared: another session may hold xmin back
    feed_bare = (await client.get("/documents/changes")).json()
    feed_empty = (await client.get("/documents/changes", params={"after": "", "wait": ""})).json()
    assert feed_empty == feed_bare


async def test_a_long_poll_is_held_at_most_the_routers_limit(pool: AsyncConnectionPool[Any]) -> None:
    """A wait above DEBOUNCE_FEED_MAX_WAIT_SECONDS is answered, empty, after the cap (here
    0.2 s; 25 s by default, under Heroku's 30 s), so a router never cuts a silent request."""
    application = app_for(pool, feed_max_wait_seconds=0.2)
    async with (
        application.router.lifespan_context(application),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application),
            base_url="http://test",
            headers={"Authorization": f"Bearer {READ}"},
        ) as c,
    ):
        head = (await c.get("/documents/changes")).json()["next"]
        answer = await asyncio.wait_for(
            c.get("/documents/changes", params={"after": head, "wait": "60"}), timeout=10
        )
    assert answer.status_code == 200
    assert answer.json() == {"changes": [], "next": head}
    assert Settings().feed_max_wait_seconds == 25.0
