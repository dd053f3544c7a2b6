"""Issue 41: a data source as the table people see (rows × properties, from the stored row
documents where fresh, ``data_sources.query`` where not), a page's open discussions, the
markdown endpoint's ``markdown_version`` and v2's shapes, and ``page.permissions_updated``.

The real ``notion-client`` against the stand-in on loopback, the real enqueue statement and a
real Postgres; requests are counted by the stand-in (``FakeNotion.calls``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from one_job import mark_completed
from psycopg.rows import dict_row

from debounce import queue
from debounce.contract import Document, SyncContext
from debounce.documents.store import DocumentStore
from debounce.types import JobEvent, SyncJob
from integrations.notion import NotionSettings, NotionSyncer
from integrations.notion.datasource import full_sync_requests
from integrations.notion.enhanced import enhanced_to_markdown
from integrations.notion.properties import page_properties, parent_summary
from integrations.notion.webhook import event_kinds
from standins.notion_api import FakeNotion, heading, paragraph, quote, rich_text, toggle
from standins.notion_content import files_property, property_value
from standins.server import BackgroundServer

TOKEN = "secret_test_notion_tables"
Conn = psycopg.AsyncConnection[Any]
OTHER = "5c0c2a4e-4b4b-4f7e-9a59-5d2f2e2d9c11"


@pytest.fixture
def fake() -> FakeNotion:
    return FakeNotion(token=TOKEN)


@pytest.fixture
def server(fake: FakeNotion) -> Iterator[BackgroundServer]:
    with BackgroundServer(fake.app()) as srv:
        yield srv


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
def context(store: DocumentStore) -> SyncContext:
    return SyncContext(store=store)


@pytest.fixture
async def notion(server: BackgroundServer) -> AsyncIterator[NotionSyncer]:
    syncer = NotionSyncer(
        NotionSettings(notion_token=TOKEN, notion_base_url=server.url), retry_delays=(0.0, 0.0)
    )
    yield syncer
    await syncer.aclose()


def event(event_type: str, entity: str, kind: str = "page", **extra: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "timestamp": "2026-11-21T08:00:31.500Z",
        "type": event_type,
        "workspace_id": "13950b26-c203-4f3b-b97d-93ec06319565",
        "entity": {"id": entity, "type": kind},
        "data": {},
        **extra,
    }


async def run(
    conn: Conn,
    notion: NotionSyncer,
    context: SyncContext,
    key: str,
    payload: dict[str, Any],
    priority: int = 0,
) -> SyncJob:
    """Enqueue one event through the real statement (its kinds as the webhook parser says),
    sync the job, finish it."""
    await queue.enqueue(
        conn,
        [
            JobEvent(
                "notion",
                key,
                payload,
                payload["id"],
                0,
                0,
                priority=priority,
                kinds=event_kinds(str(payload["type"]), payload),
            )
        ],
    )
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select * from sync_jobs where source_page_id = %s and status in ('pending', 'processing')",
            (key,),
        )
        row = await cur.fetchone()
    assert row is not None
    job = SyncJob.from_row(row)
    await notion.sync(job, context)
    await mark_completed(conn, job.id)
    return job


def asked(fake: FakeNotion) -> dict[str, int]:
    return {k: v for k, v in fake.calls.items() if v}


def stamp(n: int) -> str:
    when = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=n)
    return when.isoformat().replace("+00:00", ".000Z")


# -- a data source as a table --------------------------------------------------------------

#: Every property type, its value on the row, and its cell (property_value → property_cell).
EVERY_TYPE: list[tuple[str, dict[str, Any], str]] = [
    ("Notes", property_value("rich_text", rich_text("a | b *c*")), "a \\| b \\*c\\*"),
    ("Points", property_value("number", 3.5), "3.5"),
    ("Priority", property_value("select", {"id": "o", "name": "High"}), "High"),
    ("Tags", property_value("multi_select", [{"id": "a", "name": "A"}, {"id": "b", "name": "B"}]), "A, B"),
    ("State", property_value("status", {"id": "s", "name": "Done"}), "Done"),
    ("When", property_value("date", {"start": "2026-01-01", "end": "2026-01-02"}), "2026-01-01/2026-01-02"),
    ("Owner", property_value("people", [{"object": "user", "id": "u1"}]), "u1"),
    ("Files", files_property(("a.png", "https://x.example/a.png", False)), "a.png"),
    ("Done", property_value("checkbox", True), "Yes"),
    ("Link", property_value("url", "https://x.example"), "https://x.example"),
    ("Mail", property_value("email", "a@x.example"), "a@x.example"),
    ("Phone", property_value("phone_number", "+1 555"), "+1 555"),
    ("Formula", property_value("formula", {"type": "boolean", "boolean": False}), "No"),
    ("Related", property_value("relation", [{"id": OTHER}]), OTHER),
    ("Rollup", property_value("rollup", {"type": "number", "number": 7, "function": "sum"}), "7"),
    ("Created", property_value("created_time", "2026-01-01T00:00:00.000Z"), "2026-01-01T00:00:00.000Z"),
    ("Creator", property_value("created_by", {"object": "user", "id": "u2"}), "u2"),
    ("Edited", property_value("last_edited_time", "2026-01-02T00:00:00.000Z"), "2026-01-02T00:00:00.000Z"),
    ("Editor", property_value("last_edited_by", {"object": "user", "id": "u3"}), "u3"),
    ("Key", property_value("unique_id", {"prefix": "TASK", "number": 12}), "TASK-12"),
    ("Check", property_value("verification", {"state": "verified"}), "verified"),
    ("Act", property_value("button", {}), ""),
    ("Where", property_value("place", {"lat": 1, "lon": 2, "name": "Paris"}), "Paris"),
]


async def test_every_property_type_renders_the_same_from_the_api_and_the_stored_row(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    schema = {"Name": "title", **{name: value["type"] for name, value, _ in EVERY_TYPE}}
    db = fake.add_database(title="Everything", schema=schema)
    ds = fake.databases[db]["data_sources"][0]["id"]
    parent = {"type": "data_source_id", "data_source_id": ds, "database_id": db}
    full = fake.add_page(
        title="Full row",
        title_name="Name",
        parent=parent,
        properties={n: v for n, v, _ in EVERY_TYPE},
        created_time=stamp(1),
        last_edited_time=stamp(1),
    )
    newer = fake.add_page(
        title="Newer row", title_name="Name", parent=parent, created_time=stamp(2), last_edited_time=stamp(2)
    )
    for row in (full, newer):  # the rows' own page syncs write their documents
        await run(conn, notion, context, row, event("page.created", row))
    fake.calls.clear()
    await run(conn, notion, context, ds, event("data_source.created", ds, "data_source"))
    assert asked(fake) == {"data_sources.retrieve": 1, "data_sources.query": 1}
    doc = await store.get("notion", ds)
    assert doc is not None
    lines = doc["content"].splitlines()
    header = "| Name | " + " | ".join(n for n, _, _ in EVERY_TYPE) + " |"
    assert header in lines and "## Rows (2)" in lines
    cells = [c for _, _, c in EVERY_TYPE]
    url = fake.pages[full]["url"]
    assert f"| [Full row]({url}) | " + " | ".join(cells) + " |" in lines
    assert doc["metadata"]["rows"] == 2 and doc["metadata"]["columns"][0] == "Name"
    # A rows sync: the older row from its stored document, the newest from the query (the
    # watermark's minute is asked again): the same table, byte for byte.
    fake.calls.clear()
    await run(conn, notion, context, ds, event("data_source.content_updated", ds, "data_source"))
    assert asked(fake) == {"data_sources.query": 1}
    again = await store.get("notion", ds)
    assert again is not None and again["content"] == doc["content"]


async def test_each_data_source_of_a_database_is_its_own_table(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    db = fake.add_database(
        title="Projects", schema={"Name": "title", "Stage": "select"}, data_source_name="Active"
    )
    first = fake.databases[db]["data_sources"][0]["id"]
    second = str(uuid.uuid4())
    twin = copy.deepcopy(fake.data_sources[first])
    twin.update(id=second, title=rich_text("Archive"))
    twin["properties"]["Year"] = {"id": "y", "name": "Year", "type": "number", "number": {}}
    fake.data_sources[second] = twin
    fake._owners[second] = fake._owners[first]
    fake.databases[db]["data_sources"].append({"id": second, "name": "Archive"})
    for ds, title, props in (
        (first, "Ship it", {"Stage": property_value("select", {"name": "Go"})}),
        (second, "Old one", {"Year": property_value("number", 2024)}),
    ):
        fake.add_page(
            title=title,
            title_name="Name",
            properties=props,
            parent={"type": "data_source_id", "data_source_id": ds, "database_id": db},
        )
    await run(conn, notion, context, db, event("database.created", db, "database"))
    database = await store.get("notion", db)
    assert database is not None and "## Active" in database["content"]
    assert "## Archive" in database["content"]
    for ds in (first, second):
        await run(conn, notion, context, ds, event("data_source.created", ds, "data_source"))
    active, archive = await store.get("notion", first), await store.get("notion", second)
    assert active is not None and archive is not None
    assert "| Name | Stage |" in active["content"] and "Ship it" in active["content"]
    assert "Old one" not in active["content"]
    assert "| Name | Stage | Year |" in archive["content"] and "| 2024 |" in archive["content"]
    assert "Ship it" not in archive["content"]


async def test_a_5000_row_data_source_costs_51_requests_then_one_per_burst(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    db = fake.add_database(title="Big", schema={"Name": "title", "Points": "number"})
    ds = fake.databases[db]["data_sources"][0]["id"]
    rows = fake.add_rows(
        ds, 5000, properties=lambda n: {"Points": property_value("number", n)}, created=stamp
    )
    # The rows' documents as their page syncs write them (5 000 page syncs would cost 10 000
    # requests here; their own cost is tests/test_notion_requests.py's).
    async with conn.transaction():  # one commit for the 5 000 writes (speed alone)
        for n, row in enumerate(rows):
            page = fake.pages[row]
            await store.upsert(
                Document(
                    "notion",
                    row,
                    row,
                    f"Row {n + 1}",
                    "",
                    page["url"],
                    {
                        "object": "page",
                        "parent": parent_summary(page["parent"]),
                        "created_time": page["created_time"],
                        "properties": page_properties(page["properties"]),
                    },
                    datetime.fromisoformat(page["last_edited_time"]),
                )
            )
    fake.calls.clear()
    await run(conn, notion, context, ds, event("data_source.created", ds, "data_source"))
    assert asked(fake) == {"data_sources.retrieve": 1, "data_sources.query": 50}
    assert sum(asked(fake).values()) == full_sync_requests(5000) == 51
    doc = await store.get("notion", ds)
    assert doc is not None and "## Rows (5000)" in doc["content"]
    assert "### Rows 4501–5000 of 5000" in doc["content"]
    assert doc["content"].count("\n| --- | --- |\n") == 10
    assert doc["content"].count("\n| [Row ") == 5000
    # One row edited (its property and its time), a burst of content_updated: one request.
    fake.pages[rows[10]]["properties"]["Points"] = property_value("number", 99999)
    fake.touch(rows[10], stamp(9000))
    fake.calls.clear()
    for _ in range(3):  # a burst: one job
        await queue.enqueue(
            conn,
            [
                JobEvent("notion", ds, e, e["id"], 0, 0, kinds=event_kinds(e["type"], e))
                for e in [event("data_source.content_updated", ds, "data_source")]
            ],
        )
    await run(conn, notion, context, ds, event("data_source.content_updated", ds, "data_source"))
    assert asked(fake) == {"data_sources.query": 1}
    doc = await store.get("notion", ds)
    assert doc is not None and "| 99999 |" in doc["content"]
    assert doc["content"].count("\n| [Row ") == 5000


# -- comments --------------------------------------------------------------------------


async def test_open_discussions_end_the_page_and_cost_only_when_a_comment_changed(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(title="Plan", blocks=[paragraph("Body.")])
    _, first = fake.add_comment(
        page, "Is this **final**?", name="Ada Lovelace", created_time="2026-11-20T10:00:00.000Z"
    )
    fake.add_comment(
        page, "Not yet.", discussion_id=first, author="u-bob", created_time="2026-11-20T11:30:00.000Z"
    )
    fake.add_comment(page, "Second thread", name="Cy", created_time="2026-11-20T10:30:00.000Z")
    _, resolved = fake.add_comment(page, "Old question", name="Dee", created_time="2026-11-19T09:00:00.000Z")
    fake.resolve(resolved)
    await run(conn, notion, context, page, event("page.created", page), priority=100)
    doc = await store.get("notion", page)
    assert doc is not None
    assert doc["content"] == (
        "Body.\n\n## Comments\n\n### Discussion 1\n\n"
        "- **Ada Lovelace**, 2026-11-20 10:00 UTC: Is this \\*\\*final\\*\\*?\n"
        "- **user u-bob**, 2026-11-20 11:30 UTC: Not yet.\n\n"
        "### Discussion 2\n\n- **Cy**, 2026-11-20 10:30 UTC: Second thread\n"
    )
    assert "Old question" not in doc["content"]  # resolved: the API does not return it
    assert doc["metadata"]["comments"]["discussions"] == 2
    # A body edit reported no comment change: no comment request, the discussions kept.
    fake.set_blocks(page, [paragraph("New body.")])
    fake.calls.clear()
    await run(conn, notion, context, page, event("page.content_updated", page))
    assert asked(fake) == {"pages.markdown": 1}
    doc = await store.get("notion", page)
    assert doc is not None and doc["content"].startswith("New body.\n\n## Comments\n")
    assert "Not yet." in doc["content"]
    # A comment: the comments alone, the body kept.
    fake.add_comment(
        page, "Now it is.", discussion_id=first, name="Ada Lovelace", created_time="2026-11-21T08:00:00.000Z"
    )
    fake.calls.clear()
    await run(conn, notion, context, page, event("comment.created", page, "comment", data={"page_id": page}))
    assert asked(fake) == {"comments.list": 1}
    doc = await store.get("notion", page)
    assert doc is not None and doc["content"].startswith("New body.\n\n## Comments\n")
    assert "Not yet.\n- **Ada Lovelace**, 2026-11-21 08:00 UTC: Now it is.\n" in doc["content"]


async def test_comments_are_paged(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(title="Busy", blocks=[paragraph("Body.")])
    _, thread = fake.add_comment(page, "c0", created_time=stamp(0))
    for n in range(1, 150):
        fake.add_comment(page, f"c{n}", discussion_id=thread, created_time=stamp(n))
    await run(conn, notion, context, page, event("page.created", page))
    fake.calls.clear()
    await run(conn, notion, context, page, event("comment.updated", page, "comment", data={"page_id": page}))
    assert asked(fake) == {"comments.list": 2}
    doc = await store.get("notion", page)
    assert doc is not None and doc["content"].count("\n- **user ") == 150


# -- the markdown endpoint's version ------------------------------------------------------


async def test_the_markdown_endpoint_is_asked_for_v1_explicitly(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext
) -> None:
    page = fake.add_page(title="Plan", blocks=[paragraph("Body.")])
    await run(conn, notion, context, page, event("page.created", page))
    assert fake.markdown_versions == {"v1": 1}


V2_BLOCKS = [
    heading(1, "Plan"),
    paragraph("First line\nsecond line"),
    toggle("More", paragraph("inside")),
    {**quote("Quote"), "children": [paragraph("child")]},
    {**paragraph("Colored"), "paragraph": {**paragraph("Colored")["paragraph"], "color": "blue"}},
    {**paragraph("With child"), "children": [paragraph("nested")]},
    paragraph('Literal {color="red"}'),
]


async def test_v2_answers_convert_to_the_same_markdown_as_v1(
    fake: FakeNotion, server: BackgroundServer
) -> None:
    """The stand-in's v2 answer (blank lines between blocks, one newline a line break,
    ``<p>``/``<quote>``/``<toggle>`` with children after a blank line, colours on the tag,
    ``{color=…}`` as text) converts to what the v1 answer converts to."""
    import httpx

    page = fake.add_page(title="Plan", blocks=V2_BLOCKS)
    answers = {}
    async with httpx.AsyncClient(base_url=server.url) as http:
        for version in ("v1", "v2", "v3"):
            got = await http.get(
                f"/v1/pages/{page}/markdown",
                params={"markdown_version": version},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            answers[version] = got
    assert answers["v3"].status_code == 400
    v1, v2 = answers["v1"].json()["markdown"], answers["v2"].json()["markdown"]
    assert "<toggle>" in v2 and "<quote>" in v2 and '<p color="blue">Colored</p>' in v2
    assert "First line\nsecond line" in v2 and "\n\n" in v2
    assert '{color="' not in v2.replace('Literal \\{color="red"\\}', "")
    converted = enhanced_to_markdown(v1, page, "v1")
    assert enhanced_to_markdown(v2, page, "v2") == converted
    assert "First line\\\nsecond line" in converted and "> Quote\n>\n> child" in converted


def test_v2_keeps_an_attribute_list_as_text_v1_drops_it() -> None:
    assert enhanced_to_markdown('Text {color="red"}\n', None, "v1") == "Text\n"
    assert enhanced_to_markdown('Text {color="red"}\n', None, "v2") == 'Text {color="red"}\n'
    assert enhanced_to_markdown("a\nb\n", None, "v1") == "a\n\nb\n"
    assert enhanced_to_markdown("a\nb\n", None, "v2") == "a\\\nb\n"


# -- page.permissions_updated --------------------------------------------------------------


async def test_permissions_updated_with_accessible_by_costs_no_request(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    page = fake.add_page(title="Shared", blocks=[paragraph("Body.")])
    await run(conn, notion, context, page, event("page.created", page))
    fake.calls.clear()
    people = [{"id": "u-2", "type": "person"}, {"id": "u-1", "type": "person"}]
    await run(conn, notion, context, page, event("page.permissions_updated", page, accessible_by=people))
    assert asked(fake) == {}
    doc = await store.get("notion", page)
    assert doc is not None and doc["audience_accessible_by"] == ["u-1", "u-2"]
    assert doc["content"] == "Body.\n"
    # An internal connection's event carries no accessible_by: the page object (a 404 once
    # the page is unshared).
    fake.unshare(page)
    await run(conn, notion, context, page, event("page.permissions_updated", page))
    assert asked(fake) == {"pages.retrieve": 1}
    gone = await store.get("notion", page)
    assert gone is not None and gone["deleted_at"] is not None


async def test_a_rows_sync_adds_new_rows_and_drops_deleted_ones(
    fake: FakeNotion, notion: NotionSyncer, conn: Conn, context: SyncContext, store: DocumentStore
) -> None:
    db = fake.add_database(title="Tasks", schema={"Name": "title"})
    ds = fake.databases[db]["data_sources"][0]["id"]
    parent = {"type": "data_source_id", "data_source_id": ds, "database_id": db}
    keep, drop = (
        fake.add_page(
            title=t, title_name="Name", parent=parent, created_time=stamp(n), last_edited_time=stamp(n)
        )
        for n, t in ((1, "Keep"), (2, "Drop"))
    )
    for row in (keep, drop):
        await run(conn, notion, context, row, event("page.created", row))
    await run(conn, notion, context, ds, event("data_source.created", ds, "data_source"))
    # "Drop" is trashed (its page sync marks its document deleted), "New" is added.
    fake.set_trashed(drop)
    await run(conn, notion, context, drop, event("page.deleted", drop))
    new = fake.add_page(
        title="New", title_name="Name", parent=parent, created_time=stamp(3), last_edited_time=stamp(3)
    )
    fake.calls.clear()
    await run(conn, notion, context, ds, event("data_source.content_updated", ds, "data_source"))
    assert asked(fake) == {"data_sources.query": 1}
    doc = await store.get("notion", ds)
    assert doc is not None and "## Rows (2)" in doc["content"]
    assert "[Keep](" in doc["content"] and "[New](" in doc["content"]
    assert "[Drop](" not in doc["content"]
    # "New" has no document yet: the watermark stays at its time, so the next rows sync asks
    # for it again (from the API) until its page sync has written it.
    state = await store.get_state("notion", ds)
    assert state["watermark"] == stamp(3)
    await run(conn, notion, context, new, event("page.created", new))
    fake.calls.clear()
    await run(conn, notion, context, ds, event("data_source.content_updated", ds, "data_source"))
    assert asked(fake) == {"data_sources.query": 1}
    again = await store.get("notion", ds)
    assert again is not None and again["content"] == doc["content"]


async def test_the_stand_in_query_sorts_pages_and_refuses_what_it_does_not_know(
    fake: FakeNotion, server: BackgroundServer
) -> None:
    from notion_client import APIResponseError, AsyncClient

    db = fake.add_database(title="Tasks", schema={"Name": "title", "Points": "number"})
    ds = fake.databases[db]["data_sources"][0]["id"]
    fake.add_rows(ds, 5, properties=lambda n: {"Points": property_value("number", 10 - n)}, created=stamp)
    client = AsyncClient(auth=TOKEN, base_url=server.url)
    try:
        first = await client.data_sources.query(
            data_source_id=ds, page_size=2, sorts=[{"property": "Points", "direction": "ascending"}]
        )
        assert first["has_more"] and len(first["results"]) == 2
        assert [r["properties"]["Points"]["number"] for r in first["results"]] == [6, 7]
        rest = await client.data_sources.query(
            data_source_id=ds,
            page_size=100,
            start_cursor=first["next_cursor"],
            sorts=[{"property": "Points", "direction": "ascending"}],
        )
        assert [r["properties"]["Points"]["number"] for r in rest["results"]] == [8, 9, 10]
        assert not rest["has_more"] and rest["next_cursor"] is None
        since = await client.data_sources.query(
            data_source_id=ds,
            filter={"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": stamp(3)}},
        )
        assert len(since["results"]) == 2
        with pytest.raises(APIResponseError) as refused:
            await client.data_sources.query(
                data_source_id=ds, filter={"property": "Points", "number": {"equals": 7}}
            )
        assert refused.value.status == 400
        listed = await client.comments.list(block_id=fake.add_page(title="No comments"))
        assert listed["results"] == [] and listed["type"] == "comment"
    finally:
        await client.aclose()
