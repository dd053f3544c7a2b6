"""Each document's audience on a real Postgres: the store writes it, the conversation cache
(``AudienceStore``) keeps it and sets it on a conversation's documents, and ``list_visible``
(the read API's ``visible_to``) returns what a Slack user may read, through its indexes."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from debounce.contract import Audience, Document, WriteOutcome
from debounce.documents.audiences import AudienceStore, audience_json, list_visible
from debounce.documents.store import DocumentStore

Conn = psycopg.AsyncConnection[Any]


async def workspace(conn: Conn, team: str) -> int:
    cur = await conn.execute(  # test-only SQL: a CLI-connected workspace
        "insert into workspaces (source_type, external_id, origin, credentials) "
        "values ('slack', %s, 'cli', '\\x00') returning id",
        (team,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def write(
    store: DocumentStore,
    conn: Conn,
    workspace_id: int | None,
    channel: str,
    ts: str,
    audience: Audience | None,
    *,
    source: str = "slack",
) -> int:
    doc_id = f"{channel}/{ts}" if source == "slack" else channel
    await store.upsert(
        Document(source, doc_id, channel, f"thread {ts}", f"{channel} says {ts}", audience=audience)
    )
    # An unfenced store writes no workspace (the job's fence gives it): set it as a sync would.
    cur = await conn.execute(
        "update documents set workspace_id = %s where document_id = %s returning id", (workspace_id, doc_id)
    )  # test-only SQL
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
async def teams(conn: Conn, store: DocumentStore) -> dict[str, Any]:
    """Team A: a public channel, a private channel (U1, U2), a DM (U1, U3), a group DM
    (U2, U3, U4), a document of unknown audience and a Notion page; team B: a public channel
    and a private channel that U1 (an Enterprise Grid user id, W…) is in too."""
    a, b = await workspace(conn, "TAAAA"), await workspace(conn, "TBBBB")
    ids = {
        "pub": await write(store, conn, a, "C1", "1.1", Audience("public_channel")),
        "pub2": await write(store, conn, a, "C1", "1.2", Audience("public_channel")),
        "priv": await write(store, conn, a, "G1", "2.1", Audience("private_channel", ("U2", "U1"))),
        "dm": await write(store, conn, a, "D1", "3.1", Audience("im", ("U1", "U3"))),
        "mpim": await write(store, conn, a, "G2", "4.1", Audience("mpim", ("U2", "U3", "U4"))),
        "unknown": await write(store, conn, a, "C9", "5.1", None),
        "notion": await write(store, conn, a, "page-1", "", Audience("workspace"), source="notion"),
        "b_pub": await write(store, conn, b, "C2", "6.1", Audience("public_channel")),
        "b_priv": await write(store, conn, b, "G3", "7.1", Audience("private_channel", ("U1",))),
    }
    return {"a": a, "b": b, "ids": ids}


async def visible_rows(conn: Conn, workspace_id: int, user: str, **kw: Any) -> list[dict[str, Any]]:
    return await list_visible(conn, source_type="slack", workspace_id=workspace_id, user_id=user, **kw)


async def visible(conn: Conn, workspace_id: int, user: str, **kw: Any) -> list[str]:
    return [r["document_id"] for r in await visible_rows(conn, workspace_id, user, **kw)]


async def test_a_user_sees_public_channels_and_the_conversations_they_are_in(
    conn: Conn, teams: dict[str, Any]
) -> None:
    a, b = teams["a"], teams["b"]
    # U1: member of the private channel and the DM, not of the group DM.
    assert await visible(conn, a, "U1") == ["C1/1.1", "C1/1.2", "G1/2.1", "D1/3.1"]
    # U3: the DM and the group DM; not the private channel.
    assert await visible(conn, a, "U3") == ["C1/1.1", "C1/1.2", "D1/3.1", "G2/4.1"]
    # Nobody's conversations: the public channels only (no Notion page, no unknown audience).
    assert await visible(conn, a, "U9") == ["C1/1.1", "C1/1.2"]
    # Team B's public channel is not team A's; U1's private channel of team B is B's.
    assert await visible(conn, b, "U1") == ["C2/6.1", "G3/7.1"]
    assert await visible(conn, b, "U2") == ["C2/6.1"]


async def test_a_dm_is_visible_only_to_its_two_members(conn: Conn, teams: dict[str, Any]) -> None:
    seen_by = {u for u in ("U1", "U2", "U3", "U4", "U9") if "D1/3.1" in await visible(conn, teams["a"], u)}
    assert seen_by == {"U1", "U3"}


async def test_pages_follow_the_id_cursor_and_deleted_documents_are_left_out(
    conn: Conn, store: DocumentStore, teams: dict[str, Any]
) -> None:
    a = teams["a"]
    first = await visible_rows(conn, a, "U1", limit=3)
    rest = await visible_rows(conn, a, "U1", after_id=first[-1]["id"], limit=3)
    assert [r["document_id"] for r in first + rest] == ["C1/1.1", "C1/1.2", "G1/2.1", "D1/3.1"]
    assert [r["id"] for r in first] == sorted(r["id"] for r in first)
    assert await store.mark_deleted("slack", ["G1/2.1"]) == ["G1/2.1"]
    assert "G1/2.1" not in await visible(conn, a, "U1")
    assert "G1/2.1" in await visible(conn, a, "U1", include_deleted=True)
    with pytest.raises(ValueError, match="limit must be between 1 and 1000"):
        await visible_rows(conn, a, "U1", limit=0)


async def test_the_listing_is_served_by_the_audience_indexes(conn: Conn, teams: dict[str, Any]) -> None:
    from debounce.infra.sql import queries

    # A team with thousands of public and private documents, a few of them U1's, next to
    # a bigger team: the listing must not walk the other team's documents.
    await conn.execute(  # test-only SQL: bulk rows
        "insert into documents (source_type, document_id, source_page_id, content_sha256, "
        "workspace_id, audience_kind, audience_members) "
        "select 'slack', 'bulk/' || i, 'bulk' || (i %% 50), '', %(a)s, "
        "case when i %% 2 = 0 then 'public_channel' else 'private_channel' end, "
        "case when i %% 2 = 0 then null when i %% 997 = 1 then array['U1', 'U7'] "
        "else array['U7', 'U8'] end "
        "from generate_series(1, 6000) i",
        {"a": teams["a"]},
    )
    await conn.execute(  # test-only SQL: bulk rows of the other team, interleaved ids
        "insert into documents (source_type, document_id, source_page_id, content_sha256, "
        "workspace_id, audience_kind) "
        "select 'slack', 'other/' || i, 'other', '', %(b)s, 'public_channel' "
        "from generate_series(1, 30000) i",
        {"b": teams["b"]},
    )
    await conn.execute("analyze documents")
    cur = await conn.execute(
        "explain " + queries("audiences")["list_visible"],
        {
            "source_type": "slack",
            "workspace_id": teams["a"],
            "visible_to": "U1",
            "after_id": 0,
            "limit": 50,
            "include_deleted": False,
            "updated_after": None,
            "document_kind": None,
        },
    )
    plan = "\n".join(str(r[0]) for r in await cur.fetchall())
    assert "documents_audience_public" in plan, plan
    assert "documents_audience_members" in plan, plan
    assert "Seq Scan" not in plan, plan
    rows: list[dict[str, Any]] = []
    while page := await visible_rows(
        conn, teams["a"], "U1", limit=1000, after_id=rows[-1]["id"] if rows else 0
    ):
        rows += page
    assert len(rows) == 4 + 3000 + 4  # the fixture's, the public bulk, U1's private bulk
    assert sorted(
        int(r["document_id"][5:])
        for r in rows
        if r["document_id"].startswith("bulk/") and r["audience_kind"] == "private_channel"
    ) == [1, 1995, 3989, 5983]


async def test_the_store_writes_the_audience_and_keeps_it_when_a_sync_does_not_say(
    conn: Conn, store: DocumentStore
) -> None:
    doc = Document("slack", "G1/1.0", "G1", "t", "text", audience=Audience("mpim", ("U2", "U1")))
    assert await store.upsert(doc) is WriteOutcome.INSERTED
    row = await store.get("slack", "G1/1.0")
    assert row is not None
    assert audience_json(row) == {
        "kind": "mpim",
        "members": ["U1", "U2"],
        "member_count": 2,
        "accessible_by": None,
    }
    # Unknown audience: the stored one stays, nothing rewritten.
    bare = Document("slack", "G1/1.0", "G1", "t", "text")
    assert await store.upsert(bare) is WriteOutcome.UNCHANGED
    # A new member list is a change.
    moved = Document("slack", "G1/1.0", "G1", "t", "text", audience=Audience("mpim", ("U1", "U2", "U5")))
    assert await store.upsert(moved) is WriteOutcome.UPDATED
    # Notion: an event without accessible_by keeps the list an earlier event gave.
    page = Document(
        "notion", "p1", "p1", "Page", "body", audience=Audience("workspace", None, ("u-b", "u-a"))
    )
    await store.upsert(page)
    assert (
        await store.upsert(Document("notion", "p1", "p1", "Page", "body", audience=Audience("workspace")))
        is WriteOutcome.UNCHANGED
    )
    row = await store.get("notion", "p1")
    assert row is not None and audience_json(row) == {
        "kind": "workspace",
        "members": None,
        "member_count": None,
        "accessible_by": ["u-a", "u-b"],
    }


async def test_the_cache_records_a_conversation_and_sets_its_documents(
    conn: Conn, store: DocumentStore
) -> None:
    a = await workspace(conn, "TAAAA")
    for ts in ("1.1", "1.2"):
        await store.upsert(
            Document("slack", f"G1/{ts}", "G1", "t", ts, audience=Audience("private_channel", ("U1", "U2")))
        )
    await store.upsert(
        Document("slack", "G9/1.1", "G9", "t", "other", audience=Audience("private_channel", ("U1", "U2")))
    )
    cache = AudienceStore(conn, "slack", a)
    assert await cache.get(["G1"]) == {}
    assert await cache.put("G1", Audience("private_channel", ("U1",))) == 2
    assert await cache.put("G1", Audience("private_channel", ("U1",))) == 0  # nothing new
    got = await cache.get(["G1", "G2"])
    assert set(got) == {"G1"} and got["G1"].audience == Audience("private_channel", ("U1",))
    assert got["G1"].refreshed_at.tzinfo is not None
    # The other conversation's documents, and another workspace's cache, are untouched.
    other = await store.get("slack", "G9/1.1")
    assert other is not None and other["audience_members"] == ["U1", "U2"]
    assert await AudienceStore(conn, "slack", None).get(["G1"]) == {}
    # A channel made public: kind changes, members dropped.
    assert await cache.put("G1", Audience("public_channel")) == 2
    row = await store.get("slack", "G1/1.2")
    assert row is not None and (row["audience_kind"], row["audience_members"]) == ("public_channel", None)
    with pytest.raises(ValueError, match="audience kind is one of"):
        await cache.put("G1", Audience("workspace"))


def test_the_cli_lists_and_prints_each_document_s_audience(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from debounce.cli import main

    async def seed() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            store = DocumentStore(c)
            await store.upsert(
                Document(
                    "slack",
                    "G1/1.1",
                    "G1",
                    "Leads",
                    "budget",
                    audience=Audience("private_channel", ("U2", "U1", "U3")),
                )
            )
            await store.upsert(
                Document("slack", "C1/1.1", "C1", "General", "hello", audience=Audience("public_channel"))
            )
            await store.upsert(Document("notion", "p-1", "p-1", "Archive", "text"))

    asyncio.run(seed())
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert main(["documents"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-2:] == ["audience", "title"]
    by_title = {ln.split()[-1]: ln.split()[-2] for ln in lines[1:4]}
    assert by_title == {"Leads": "private(3)", "General": "public", "Archive": "-"}
    assert main(["documents", "--id", "G1/1.1"]) == 0
    assert (
        "<!-- audience: Slack private channel: 3 members (U1, U2, U3) -->"
        in capsys.readouterr().out.splitlines()
    )
