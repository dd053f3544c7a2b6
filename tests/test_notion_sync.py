"""The sync half of the Notion integration: the real ``notion-client`` against the local fake
Notion API (``standins.notion_api``) on loopback, writing to a real Postgres."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from notion_client import APIResponseError
from notion_client.errors import HTTPResponseError

from debounce.contract import PermanentError, RateLimited, SyncContext, SyncResult
from debounce.documents.store import DocumentStore
from debounce.types import JobStatus, SyncJob
from integrations.notion import NotionSettings, NotionSyncer, render_rich_text
from standins.notion_api import (
    DEMO_DATABASE_ID,
    DEMO_PAGE_ID,
    FakeNotion,
    block,
    bookmark,
    bulleted,
    callout,
    child_database,
    child_page,
    code,
    date_property,
    divider,
    embed,
    equation,
    file,
    heading,
    image,
    numbered,
    paragraph,
    people_property,
    quote,
    status_property,
    table,
    text,
    to_do,
    toggle,
)
from standins.notion_content import every_block_type, files_property, media, rollup_property
from standins.server import BackgroundServer

TOKEN = "secret_test_notion_token"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "notion"
PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
USER = "c7c11cca-1d73-471d-9b6e-bdef51470190"

Conn = psycopg.AsyncConnection[Any]


def make_job(source_page_id: str, payload: dict[str, Any] | None = None, **fields: Any) -> SyncJob:
    """A claimed-looking ``SyncJob`` for ``source_page_id`` (payload default: page event)."""
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": 1,
        "source_type": "notion",
        "source_page_id": source_page_id,
        "status": JobStatus.PROCESSING,
        "payload": payload
        if payload is not None
        else {
            "type": "page.content_updated",
            "id": "evt-1",
            "entity": {"id": source_page_id, "type": "page"},
        },
        "event_id": "evt-1",
        "event_count": 1,
        "priority": 0,
        "attempts": 1,
        "max_attempts": 5,
        "scheduled_at": now,
        "first_event_at": now,
        "max_wait_until": now,
        "retry_at": None,
        "lease_expires_at": now,
        "locked_by": "test",
        "lease_token": "lease",
        "revision": 1,
        "claimed_revision": 1,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
        "finished_at": None,
    }
    values.update(fields)
    return SyncJob(**values)


def example_payload(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return payload


@pytest.fixture
def fake() -> FakeNotion:
    """These tests pin the block walk (its requests and its Markdown): the workspace has no
    read-content capability for the markdown endpoint, so every page sync takes the walk
    (``tests/test_notion_markdown.py`` covers the markdown path)."""
    fake = FakeNotion(token=TOKEN)
    fake.deny_read_content()
    return fake


@pytest.fixture
def server(fake: FakeNotion) -> Iterator[BackgroundServer]:
    with BackgroundServer(fake.app()) as srv:
        yield srv


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
def context(store: DocumentStore) -> SyncContext:
    """What the worker hands a sync (here unfenced, no workspace, no meter)."""
    return SyncContext(store=store)


@pytest.fixture
def settings(server: BackgroundServer) -> NotionSettings:
    return NotionSettings(notion_token=TOKEN, notion_base_url=server.url)


@pytest.fixture
async def notion(settings: NotionSettings) -> AsyncIterator[NotionSyncer]:
    # No sleeps in tests: in-process retries happen at once.
    syncer = NotionSyncer(settings, retry_delays=(0.0, 0.0))
    yield syncer
    await syncer.aclose()


# --------------------------------------------------------------------------------------------
# Rendering a page
# --------------------------------------------------------------------------------------------

CHILD_PAGE = "0f1e2d3c-4b5a-4968-8776-655443322110"
CHILD_DB = "1f1e2d3c-4b5a-4968-8776-655443322110"

REPRESENTATIVE_BLOCKS = [
    heading(1, "Overview"),
    paragraph(
        [
            text("Plain "),
            text("bold", bold=True),
            text(" and "),
            text("italic", italic=True),
            text(", "),
            text("gone", strikethrough=True),
            text(", "),
            text("x = 1", code=True),
            text(", a "),
            text("link", link="https://example.com/a"),
            text(" and "),
            text("both ", bold=True, italic=True),
            text("end."),
        ]
    ),
    heading(2, "Lists"),
    bulleted("level one", bulleted("level two", bulleted("level three")), bulleted("level two, again")),
    bulleted("second top item"),
    numbered("first"),
    numbered("second", numbered("second.a"), numbered("second.b")),
    numbered("third"),
    paragraph("A paragraph ends the list."),
    numbered("numbering restarts"),
    to_do("written", True),
    to_do("reviewed"),
    heading(3, "Everything else"),
    toggle("More details", paragraph("Hidden until opened.")),
    quote("Latest payload wins."),
    callout("Mind the rate limit.", "⚠️"),
    code("def f(x):\n    return x + 1", "python"),
    divider(),
    equation("e^{i\\pi} + 1 = 0"),
    table([["Source", "Window"], ["Notion", "300 s"], ["a|b", ""]]),
    image("https://img.example/cat.png", "A cat"),
    file("https://files.example/report.pdf", name="report.pdf"),
    bookmark("https://example.org/"),
    embed("https://embed.example/x", "An embed"),
    child_page("Sub page", CHILD_PAGE),
    child_database("Tasks", CHILD_DB),
    block("ai_block", {}),
]

REPRESENTATIVE_MARKDOWN = """\
# Overview

Plain **bold** and *italic*, ~~gone~~, `x = 1`, a [link](https://example.com/a) and ***both*** end.

## Lists

- level one
  - level two
    - level three
  - level two, again
- second top item

1. first
2. second
   1. second.a
   2. second.b
3. third

A paragraph ends the list.

1. numbering restarts

- [x] written
- [ ] reviewed

### Everything else

More details

Hidden until opened.

> Latest payload wins.

> ⚠️ Mind the rate limit.

```python
def f(x):
    return x + 1
```

---

$$
e^{i\\pi} + 1 = 0
$$

| Source | Window |
| --- | --- |
| Notion | 300 s |
| a\\|b |  |

![A cat](https://img.example/cat.png)

[report.pdf](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#{file_block})

[https://example.org/](https://example.org/)

[An embed](https://embed.example/x)

Page: [Sub page](https://www.notion.so/0f1e2d3c4b5a49688776655443322110)

Database: [Tasks](https://www.notion.so/1f1e2d3c4b5a49688776655443322110)

[unsupported Notion block: ai_block]
"""


async def test_representative_page_paginated_and_nested(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.page_size_cap = 2  # every children list spans several pages
    fake.add_page(
        PAGE,
        title=[text("Sync "), text("design", bold=True)],
        blocks=REPRESENTATIVE_BLOCKS,
        last_edited_time="2026-11-21T08:30:00.000Z",
        created_by="11111111-1111-4111-8111-111111111111",
    )
    result = await notion.sync(make_job(PAGE), context)
    assert result.written == 1 and result.unchanged == 0 and result.deleted == 0

    doc = await store.get("notion", PAGE)
    assert doc is not None
    # The Notion-hosted file links to its block, not to its signed URL.
    [file_block] = [b for b, v in fake.blocks.items() if v["type"] == "file"]
    compact = file_block.replace("-", "")
    expected = named_files(REPRESENTATIVE_MARKDOWN.replace("{file_block}", compact), {compact: "/report.pdf"})
    assert doc["content"] == expected
    assert doc["title"] == "Sync design"
    assert doc["source_page_id"] == PAGE
    assert doc["url"] == "https://www.notion.so/Sync-design-153104cd477e809d8dc4ff2d96ae3090"
    assert doc["source_updated_at"] == datetime(2026, 11, 21, 8, 30, tzinfo=UTC)
    assert doc["deleted_at"] is None
    meta = doc["metadata"]
    assert meta["parent"] == {"type": "workspace"}
    assert meta["created_by"] == "11111111-1111-4111-8111-111111111111"
    assert meta["last_edited_by"] == USER
    assert meta["authors"] == sorted(["11111111-1111-4111-8111-111111111111", USER])

    # Exactly one page retrieval; block lists: 27 top-level blocks at 2 per page = 14, plus
    # one request for each of "level one", "level two", "second", the toggle, and two for the
    # table's three rows. Child pages/databases are not entered.
    assert fake.calls["pages.retrieve"] == 1
    assert fake.calls["blocks.children.list"] == 14 + 4 + 2
    assert fake.calls["databases.retrieve"] == 0


async def test_more_than_one_hundred_blocks(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Long", blocks=[paragraph(f"line {i}") for i in range(250)])
    await notion.sync(make_job(PAGE), context)
    doc = await store.get("notion", PAGE)
    assert doc is not None
    assert doc["content"] == "\n\n".join(f"line {i}" for i in range(250)) + "\n"
    assert fake.calls["blocks.children.list"] == 3  # 100 + 100 + 50
    assert fake.calls["pages.retrieve"] == 1


async def test_unchanged_second_sync_is_not_rewritten(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Stable", blocks=[paragraph("same")])
    assert (await notion.sync(make_job(PAGE), context)).written == 1
    first = await store.get("notion", PAGE)

    again = await notion.sync(make_job(PAGE, event_id="evt-2"), context)
    assert again == SyncResult(unchanged=1, files=())  # the block walk: no hosted file
    second = await store.get("notion", PAGE)
    assert first is not None and second is not None
    assert second["updated_at"] == first["updated_at"]
    assert second["synced_at"] >= first["synced_at"]

    fake.set_blocks(PAGE, [paragraph("different")])
    fake.touch(PAGE, "2026-11-22T00:00:00.000Z")
    assert (await notion.sync(make_job(PAGE), context)).written == 1
    third = await store.get("notion", PAGE)
    assert third is not None and third["content"] == "different\n"


EVERY_BLOCK_MARKDOWN = """\
A paragraph with **bold** text.

# Heading 1

## Heading 2

### Heading 3

#### Heading 4

#### Toggle heading 4

Under the toggle heading.

- Bullet
  - Nested bullet

1. First
2. Second

- [x] Done
- [ ] Open

A toggle

Toggle body.

> A quote\\
> on two lines

> ⚠️ A callout

```python
print(1)
```

A caption

$$
E = mc^2
$$

---

Left column

Right column

| Key | Value |
| --- | --- |
| **a** | 1 |

|  |  |
| --- | --- |
| x | y |

Tab one

First tab body.

📌 Tab two

Second tab body.

![A cat](https://img.example/cat.png)

[Image: A dog](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#0f1e2d3c4b5a49688776655443322113)

[Video](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#0f1e2d3c4b5a49688776655443322114)

[The talk](https://audio.example/talk.mp3)

[report.pdf](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#0f1e2d3c4b5a49688776655443322115)

[Slides](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#0f1e2d3c4b5a49688776655443322116)

[Example](https://example.org/)

[https://embed.example/x](https://embed.example/x)

[https://github.com/makenotion/notion-sdk-js/pull/1](https://github.com/makenotion/notion-sdk-js/pull/1)

Link to page: [Sub page](https://www.notion.so/0f1e2d3c4b5a49688776655443322111)

[Link to page](https://www.notion.so/0f1e2d3c4b5a49688776655443322119)

Link to database: [Tasks](https://www.notion.so/0f1e2d3c4b5a49688776655443322112)

[Link to comment](https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090#0f1e2d3c4b5a49688776655443322117)

Page: [Sub page](https://www.notion.so/0f1e2d3c4b5a49688776655443322111)

Database: [Tasks](https://www.notion.so/0f1e2d3c4b5a49688776655443322112)

Synced content.

Synced content.

Add a task

- [ ] New task

Meeting notes: Weekly sync

Summary of the meeting.

Notes taken during it.

[unsupported Notion block: form]

Text of a future type

Its child.
"""


def named_files(markdown: str, files: dict[str, str]) -> str:
    """``markdown`` with each hosted file's link (ending in the block id, a key of ``files``)
    followed by the file document it names (``file:`` and the URL's path: issue 39)."""
    for block_id, path in files.items():
        markdown = markdown.replace(f"#{block_id})\n", f"#{block_id}) · document `file:{path}`\n")
    return markdown


EVERY_BLOCK_MARKDOWN = named_files(
    EVERY_BLOCK_MARKDOWN,
    {
        "0f1e2d3c4b5a49688776655443322113": "/ws/1/dog.png",
        "0f1e2d3c4b5a49688776655443322114": "/ws/2/clip.mp4",
        "0f1e2d3c4b5a49688776655443322115": "/ws/3/r.pdf",
        "0f1e2d3c4b5a49688776655443322116": "/ws/4/s.pdf",
    },
)


async def test_every_block_type_of_the_reference_renders(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Everything", blocks=every_block_type())
    assert (await notion.sync(make_job(PAGE), context)).written == 1
    doc = await store.get("notion", PAGE)
    assert doc is not None
    assert doc["content"] == EVERY_BLOCK_MARKDOWN
    assert "unsupported Notion block: " not in doc["content"].replace("block: form]", "")
    assert "amazonaws" not in doc["content"]


HOSTED = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws/f1"


async def test_hosted_files_resigned_on_every_fetch_leave_the_document_unchanged(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(
        PAGE,
        title="Files",
        properties={
            "Attachments": files_property(
                ("spec.pdf", f"{HOSTED}/spec.pdf", True), ("logo.png", "https://x.example/logo.png", False)
            ),
            "Rolled up": rollup_property(
                "array",
                [{"type": "files", "files": files_property(("a.png", f"{HOSTED}/a.png", True))["files"]}],
            ),
        },
        blocks=[
            media("image", f"{HOSTED}/chart.png", "Chart"),
            media("file", f"{HOSTED}/data.csv", name="data.csv"),
            media("pdf", f"{HOSTED}/deck.pdf"),
            media("video", f"{HOSTED}/demo.mp4", "Demo"),
            media("audio", f"{HOSTED}/call.m4a"),
        ],
    )
    # The stand-in signs like Notion: a new URL and expiry on every response.
    api = notion.client.api(TOKEN)
    image_id = fake.children[PAGE][0]
    one = await api.blocks.retrieve(block_id=image_id)
    two = await api.blocks.retrieve(block_id=image_id)
    assert one["image"]["file"]["url"] != two["image"]["file"]["url"]
    assert one["image"]["file"]["url"].startswith(f"{HOSTED}/chart.png?X-Amz-")
    assert one["image"]["file"]["expiry_time"] > "2026"

    assert (await notion.sync(make_job(PAGE), context)).written == 1
    before = await store.get("notion", PAGE)
    assert before is not None
    stored = json.dumps({"content": before["content"], "metadata": before["metadata"]})
    assert "amazonaws" not in stored and "X-Amz" not in stored and "expiry" not in stored
    assert before["metadata"]["properties"] == {
        "Attachments": ["spec.pdf", "logo.png"],
        "Rolled up": ["a.png"],
    }
    link = f"https://www.notion.so/{PAGE.replace('-', '')}#"
    assert before["content"].startswith(
        f"[Image: Chart]({link}{image_id.replace('-', '')}) · document `file:/ws/f1/chart.png`\n"
    )

    again = await notion.sync(make_job(PAGE, event_id="evt-2"), context)
    assert (again.written, again.unchanged, again.deleted) == (0, 1, 0)
    # The files are reported by the URL's path (hosted) or the URL (external): the same files,
    # though every URL changed; blocks' first, then the files property's (a rollup's files
    # are another page's).
    assert again.files is not None
    assert [(f.file_id, f.media_type, f.external) for f in again.files] == [
        ("/ws/f1/chart.png", "image/png", False),
        ("/ws/f1/data.csv", "", False),
        ("/ws/f1/deck.pdf", "", False),
        ("/ws/f1/demo.mp4", "video/mp4", False),
        ("/ws/f1/call.m4a", "audio/mp4", False),
        ("/ws/f1/spec.pdf", "", False),
        ("https://x.example/logo.png", "", True),
    ]
    after = await store.get("notion", PAGE)
    assert after is not None and after["updated_at"] == before["updated_at"]


async def test_unknown_block_type_leaves_a_placeholder(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(
        PAGE,
        blocks=[
            paragraph("before"),
            block("unsupported", {}),
            block("future_block", {"title": []}, [paragraph("child of the unknown")]),
            {"type": "mystery"},  # a type with no body at all
            paragraph("after"),
        ],
    )
    await notion.sync(make_job(PAGE), context)
    doc = await store.get("notion", PAGE)
    assert doc is not None
    assert doc["content"] == (
        "before\n\n[unsupported Notion block: unsupported]\n\n"
        "[unsupported Notion block: future_block]\n\nchild of the unknown\n\n"
        "[unsupported Notion block: mystery]\n\nafter\n"
    )
    assert doc["title"] == "Untitled"


async def test_database_row_page_keeps_its_properties(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(
        PAGE,
        title="Ship it",
        title_name="Name",
        parent={"type": "data_source_id", "data_source_id": CHILD_DB, "database_id": CHILD_PAGE},
        properties={
            "Status": status_property("In progress"),
            "Due": date_property("2026-12-01", "2026-12-03"),
            "Owner": people_property(USER),
        },
    )
    await notion.sync(make_job(PAGE), context)
    doc = await store.get("notion", PAGE)
    assert doc is not None
    assert doc["title"] == "Ship it"
    assert doc["content"] == ""
    assert doc["metadata"]["parent"] == {
        "type": "data_source_id",
        "id": CHILD_DB,
        "database_id": CHILD_PAGE,
    }
    assert doc["metadata"]["properties"] == {
        "Status": "In progress",
        "Due": "2026-12-01/2026-12-03",
        "Owner": [USER],
    }


async def test_comment_event_syncs_its_page(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Commented", blocks=[paragraph("text")])
    await notion.sync(make_job(PAGE, example_payload("comment.created.json")), context)
    assert (await store.get("notion", PAGE)) is not None
    assert fake.calls["pages.retrieve"] == 1


async def test_documents_carry_their_workspace_and_the_event_s_accessible_by(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Shared", blocks=[paragraph("text")])
    event = example_payload("page.content_updated.json")  # a public integration's event
    await notion.sync(make_job(PAGE, event), context)
    row = await store.get("notion", PAGE)
    assert row is not None
    assert (row["audience_kind"], row["audience_members"], row["audience_accessible_by"]) == (
        "workspace",
        None,
        ["1edc05f6-2702-81b5-8408-00279347f034", "556a1abf-4f08-40c6-878a-75890d2a88ba"],
    )
    # A manual re-sync (no event, so no accessible_by) keeps what the event said.
    await notion.sync(make_job(PAGE, {}), context)
    row = await store.get("notion", PAGE)
    assert row is not None and row["audience_accessible_by"] == [
        "1edc05f6-2702-81b5-8408-00279347f034",
        "556a1abf-4f08-40c6-878a-75890d2a88ba",
    ]
    # An event listing other people replaces the list.
    event["accessible_by"] = [{"id": "0c9f5a6e-0000-4000-8000-00000000beef", "type": "person"}]
    await notion.sync(make_job(PAGE, event), context)
    row = await store.get("notion", PAGE)
    assert row is not None and row["audience_accessible_by"] == ["0c9f5a6e-0000-4000-8000-00000000beef"]


# --------------------------------------------------------------------------------------------
# Errors and retries
# --------------------------------------------------------------------------------------------


async def test_rate_limited_with_long_retry_after_returns_promptly(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    fake.fail("pages.retrieve", 429, retry_after=30)
    started = time.monotonic()
    with pytest.raises(RateLimited) as info:
        await notion.sync(make_job(PAGE), context)
    assert info.value.retry_after == 30
    assert time.monotonic() - started < 5  # not the SDK sleeping 30 s (or 60 s) inside
    assert fake.calls["pages.retrieve"] == 1  # and not hammering the limit again


async def test_rate_limited_mid_walk_hands_back_too(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[paragraph("x")])
    fake.fail("blocks.children.list", 429, retry_after="120")
    with pytest.raises(RateLimited) as info:
        await notion.sync(make_job(PAGE), context)
    assert info.value.retry_after == 120


async def test_rate_limited_without_retry_after_uses_a_default(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    fake.fail("pages.retrieve", 429)
    with pytest.raises(RateLimited) as info:
        await notion.sync(make_job(PAGE), context)
    assert info.value.retry_after == 30


async def test_short_retry_after_is_waited_in_process(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[paragraph("ok")])
    fake.fail("pages.retrieve", 429, retry_after=0)
    result = await notion.sync(make_job(PAGE), context)
    assert result.written == 1
    assert fake.calls["pages.retrieve"] == 2


@pytest.mark.parametrize(("status", "code"), [(401, None), (403, "restricted_resource")])
async def test_unauthorized_or_restricted_is_permanent(
    fake: FakeNotion, notion: NotionSyncer, status: int, code: str | None, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    fake.fail("pages.retrieve", status, code=code)
    with pytest.raises(PermanentError):
        await notion.sync(make_job(PAGE), context)
    assert fake.calls["pages.retrieve"] == 1


async def test_wrong_token_is_permanent(
    server: BackgroundServer, store: DocumentStore, context: SyncContext
) -> None:
    settings = NotionSettings(notion_token="secret_revoked", notion_base_url=server.url)
    notion = NotionSyncer(settings, retry_delays=(0.0, 0.0))
    try:
        with pytest.raises(PermanentError, match="unauthorized"):
            await notion.sync(make_job(PAGE), context)
    finally:
        await notion.aclose()


async def test_missing_token_is_permanent_and_says_what_to_set(
    store: DocumentStore, context: SyncContext
) -> None:
    notion = NotionSyncer(NotionSettings(notion_token=None))
    with pytest.raises(PermanentError, match="NOTION_TOKEN"):
        await notion.sync(make_job(PAGE), context)
    await notion.aclose()


async def test_not_found_marks_the_document_deleted(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, title="Doomed", blocks=[paragraph("bye")])
    await notion.sync(make_job(PAGE), context)
    fake.remove(PAGE)
    result = await notion.sync(make_job(PAGE, example_payload("page.deleted.json")), context)
    assert result.deleted == 1 and result.written == 0
    doc = await store.get("notion", PAGE)
    assert doc is not None and doc["deleted_at"] is not None
    # A 404 for a page never synced is still a success.
    other = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
    assert (await notion.sync(make_job(other), context)).deleted == 0


async def test_injected_404_marks_deleted(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    await notion.sync(make_job(PAGE), context)
    fake.fail("pages.retrieve", 404, object_id=PAGE)
    assert (await notion.sync(make_job(PAGE), context)).deleted == 1


async def test_trashed_page_is_deleted_and_restored_page_comes_back(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[paragraph("content")])
    await notion.sync(make_job(PAGE), context)
    fake.set_trashed(PAGE)
    result = await notion.sync(make_job(PAGE, example_payload("page.deleted.json")), context)
    assert result.deleted == 1
    assert fake.calls["blocks.children.list"] == 1  # a trashed page's blocks are not walked
    doc = await store.get("notion", PAGE)
    assert doc is not None and doc["deleted_at"] is not None

    fake.set_trashed(PAGE, False)
    result = await notion.sync(make_job(PAGE, example_payload("page.undeleted.json")), context)
    assert result.written == 1
    doc = await store.get("notion", PAGE)
    assert doc is not None and doc["deleted_at"] is None


@pytest.mark.parametrize("status", [500, 503, 502])
async def test_server_error_once_is_retried_in_process(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, status: int, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[paragraph("fine")])
    fake.fail("pages.retrieve", status)
    result = await notion.sync(make_job(PAGE), context)
    assert result.written == 1
    assert fake.calls["pages.retrieve"] == 2


async def test_persistent_server_error_propagates_for_the_queue_to_retry(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[paragraph("fine")])
    fake.fail("blocks.children.list", 500, times=10)
    with pytest.raises(APIResponseError) as info:
        await notion.sync(make_job(PAGE), context)
    assert not isinstance(info.value, (PermanentError, RateLimited))
    assert info.value.status == 500
    assert fake.calls["blocks.children.list"] == 3  # one call + two in-process retries


async def test_gateway_page_propagates_as_http_error(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    fake.fail("pages.retrieve", 502, times=3)
    with pytest.raises(HTTPResponseError):
        await notion.sync(make_job(PAGE), context)


async def test_nested_block_vanishing_mid_walk_does_not_fail_the_sync(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    fake.add_page(PAGE, blocks=[toggle("Open me", paragraph("inside")), paragraph("after")])
    toggle_id = fake.children[PAGE][0]
    fake.fail("blocks.children.list", 404, object_id=toggle_id)
    await notion.sync(make_job(PAGE), context)
    doc = await store.get("notion", PAGE)
    assert doc is not None
    assert doc["content"] == "Open me\n\nafter\n"


async def test_client_is_created_once_and_closed(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    fake.add_page(PAGE)
    await notion.sync(make_job(PAGE), context)
    client = notion.client._clients[TOKEN]
    await notion.sync(make_job(PAGE), context)
    assert notion.client._clients[TOKEN] is client is not None
    await notion.aclose()
    assert notion.client._clients == {}
    await notion.aclose()  # idempotent


# --------------------------------------------------------------------------------------------
# Databases and data sources
# --------------------------------------------------------------------------------------------

DATABASE = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"
DATA_SOURCE = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20"

DATABASE_MARKDOWN = """\
What ships *when*.

## Roadmap

| Property | Type | Details |
| --- | --- | --- |
| Name | title |  |
| Status | status | Not started, Done |
| Due | date |  |
"""


def add_roadmap(fake: FakeNotion) -> None:
    fake.add_database(
        DATABASE,
        title="Roadmap",
        description=[text("What ships "), text("when", italic=True), text(".")],
        schema={"Name": "title", "Status": "status", "Due": "date"},
        options={"Status": ["Not started", "Done"]},
        data_source_id=DATA_SOURCE,
        last_edited_time="2026-11-20T12:00:00.000Z",
    )


async def test_database_event_syncs_title_and_schema(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    add_roadmap(fake)
    job = make_job(DATABASE, example_payload("database.schema_updated.json"))
    assert (await notion.sync(job, context)).written == 1
    doc = await store.get("notion", DATABASE)
    assert doc is not None
    assert doc["title"] == "Roadmap"
    assert doc["content"] == DATABASE_MARKDOWN
    assert doc["source_updated_at"] == datetime(2026, 11, 20, 12, tzinfo=UTC)
    assert doc["metadata"]["schema"] == {"Roadmap": {"Name": "title", "Status": "status", "Due": "date"}}
    assert doc["metadata"]["data_sources"] == [{"id": DATA_SOURCE, "name": "Roadmap"}]
    assert fake.calls["pages.retrieve"] == 0
    assert fake.calls["databases.retrieve"] == 1
    assert fake.calls["data_sources.retrieve"] == 1

    fake.set_trashed(DATABASE)
    assert (await notion.sync(job, context)).deleted == 1


async def test_data_source_event_syncs_its_schema(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    add_roadmap(fake)
    payload = {
        "type": "data_source.schema_updated",
        "id": "e1",
        "entity": {"id": DATA_SOURCE, "type": "data_source"},
    }
    assert (await notion.sync(make_job(DATA_SOURCE, payload), context)).written == 1
    doc = await store.get("notion", DATA_SOURCE)
    assert doc is not None
    assert doc["title"] == "Roadmap"
    # The database's document without the per-data-source heading.
    # The database's document without the per-data-source heading, then its (empty) table.
    assert doc["content"] == (
        DATABASE_MARKDOWN.replace("## Roadmap\n\n", "") + "\n## Rows (0)\n\n(no rows)\n"
    )
    assert doc["metadata"]["parent"] == {"type": "database_id", "id": DATABASE}


async def test_manual_resync_tries_page_then_database(
    fake: FakeNotion, notion: NotionSyncer, store: DocumentStore, context: SyncContext
) -> None:
    add_roadmap(fake)
    fake.add_page(PAGE, title="A page")
    manual = {"type": "manual_resync"}

    assert (await notion.sync(make_job(PAGE, manual), context)).written == 1
    assert fake.calls["databases.retrieve"] == 0

    assert (await notion.sync(make_job(DATABASE, manual), context)).written == 1
    doc = await store.get("notion", DATABASE)
    assert doc is not None and doc["content"] == DATABASE_MARKDOWN

    missing = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
    result = await notion.sync(make_job(missing, manual), context)
    assert result.deleted == 0 and result.written == 0


async def test_demo_fake_syncs_page_and_database(store: DocumentStore, context: SyncContext) -> None:
    fake = FakeNotion.demo()
    fake.deny_read_content()  # the block walk's Markdown (tests/test_notion_markdown.py: twin)
    with BackgroundServer(fake.app()) as srv:
        notion = NotionSyncer(NotionSettings(notion_token=fake.token, notion_base_url=srv.url))
        try:
            await notion.sync(make_job(DEMO_PAGE_ID, example_payload("page.created.json")), context)
            await notion.sync(
                make_job(DEMO_DATABASE_ID, example_payload("database.schema_updated.json")), context
            )
        finally:
            await notion.aclose()
    page = await store.get("notion", DEMO_PAGE_ID)
    db = await store.get("notion", DEMO_DATABASE_ID)
    assert page is not None and page["title"] == "Launch plan"
    assert "# Goals" in page["content"] and "| Notion | 300 s | 3600 s |" in page["content"]
    assert db is not None and db["title"] == "Launch tasks"
    assert "| Status | status | Not started, In progress, Done |" in db["content"]


# --------------------------------------------------------------------------------------------
# Rich text details
# --------------------------------------------------------------------------------------------


def test_rich_text_rendering_edge_cases() -> None:
    assert render_rich_text([text("a"), text("b"), text("c", bold=True), text("d", bold=True)]) == (
        "ab**cd**"
    )
    assert render_rich_text([text(" padded ", bold=True)]) == " **padded** "
    assert render_rich_text([text("tick`s", code=True)]) == "``tick`s``"
    assert render_rich_text([text("doc", bold=True, link="https://x.test")]) == ("[**doc**](https://x.test)")
    assert (
        render_rich_text(
            [{"type": "equation", "equation": {"expression": "x^2"}, "plain_text": "x^2", "href": None}]
        )
        == "$x^2$"
    )
    mention = {
        "type": "mention",
        "mention": {"type": "page", "page": {"id": PAGE}},
        "plain_text": "Launch plan",
        "href": "https://www.notion.so/" + PAGE,
    }
    assert render_rich_text([mention]) == f"[Launch plan](https://www.notion.so/{PAGE})"
    assert render_rich_text([text("under", underline=True)]) == "under"
    assert render_rich_text(None) == ""
    assert render_rich_text([{"garbage": True}, "nope"]) == ""


async def test_service_overload_529_is_a_rate_limit_with_its_reason(
    fake: FakeNotion, notion: NotionSyncer, context: SyncContext
) -> None:
    """Notion's 529 ``service_overload`` means back off too (request-limits reference): it is
    handed to the queue like a 429, with the reason the operator sees."""
    fake.add_page(PAGE)
    fake.fail("pages.retrieve", 529, code="service_overload", retry_after=90)
    with pytest.raises(RateLimited) as info:
        await notion.sync(make_job(PAGE), context)
    assert info.value.retry_after == 90 and info.value.reason == "service_overload"
    fake.fail("pages.retrieve", 429, retry_after=90)
    with pytest.raises(RateLimited) as limited:
        await notion.sync(make_job(PAGE), context)
    assert limited.value.reason == "rate_limited"
