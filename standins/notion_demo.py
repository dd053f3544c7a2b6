"""The demo content of the Notion stand-in (:meth:`standins.notion_api.FakeNotion.demo`), for
``debounce serve --demo``, ``debounce standins`` and the tests that use it.

Two workspaces: the default one (the constructor's token, :data:`DEMO_TOKEN` in the demo) with
the page of ``examples/notion/page.*.json`` and a database, and a second one,
:data:`DEMO_SECOND_WORKSPACE_ID` (token :data:`DEMO_SECOND_TOKEN`) with one page of its own, so
a multi-workspace deployment can connect both.

:class:`NotionDemoEdits` makes the edit of ``examples/notion/page.content_updated.json`` real
(the page's "Hello world" paragraph, :data:`DEMO_EDITED_BLOCK_ID`, gains `` (edit N, time)``)
for the demo's ``POST /_demo/edit`` (:mod:`standins.demo_edits`).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from datetime import UTC
from typing import TYPE_CHECKING, Any

from standins.demo_edits import DemoEdit, EditCounter, NotAnEdit
from standins.notion_blocks import (
    bookmark,
    bulleted,
    callout,
    child_database,
    code,
    date_property,
    divider,
    equation,
    heading,
    numbered,
    paragraph,
    people_property,
    quote,
    rich_text,
    status_property,
    table,
    text,
    to_do,
    toggle,
)
from standins.notion_http import DEFAULT_USER, norm_id
from standins.sample_files import spreadsheet, text_pdf

if TYPE_CHECKING:
    from standins.file_host import FileHost
    from standins.notion_api import FakeNotion

__all__ = [
    "DEMO_DATABASE_ID",
    "DEMO_DATA_SOURCE_ID",
    "DEMO_EDITED_BLOCK_ID",
    "DEMO_ROW_IDS",
    "DEMO_PAGE_ID",
    "DEMO_SECOND_PAGE_ID",
    "DEMO_SECOND_TOKEN",
    "DEMO_SECOND_WORKSPACE_ID",
    "DEMO_SECOND_WORKSPACE_NAME",
    "DEMO_TOKEN",
    "NotionDemoEdits",
    "attach_demo_files",
    "seed_demo",
]

#: The page of ``examples/notion/page.*.json`` and the database of
#: ``examples/notion/database.schema_updated.json``, in the default workspace.
DEMO_PAGE_ID = "153104cd-477e-809d-8dc4-ff2d96ae3090"
DEMO_DATABASE_ID = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"
#: Its data source (``examples/notion/data_source.content_updated.json``) and its rows; the
#: first row is the one that example's edit changes.
DEMO_DATA_SOURCE_ID = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20"
DEMO_ROW_IDS = (
    "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
    "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e60",
    "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e61",
    "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e62",
)
#: The token of the default workspace of :meth:`~standins.notion_api.FakeNotion.demo` (set
#: ``NOTION_TOKEN`` to it).
DEMO_TOKEN = "secret_debounce_demo_token"

#: The demo's second workspace: its id, name and token, and its page.
DEMO_SECOND_WORKSPACE_ID = "9b2e6d41-3c5a-4f7e-8d1b-2a6c4e8f0b37"
DEMO_SECOND_WORKSPACE_NAME = "Debounce Labs"
DEMO_SECOND_TOKEN = "secret_debounce_demo_second_token"
DEMO_SECOND_PAGE_ID = "5e7a9c1b-2d4f-4a6b-8c0e-1f3a5b7c9d2e"
#: The paragraph of :data:`DEMO_PAGE_ID` that ``examples/notion/page.content_updated.json``
#: names first in ``data.updated_blocks`` ("Hello world"): the demo's edits change its text.
DEMO_EDITED_BLOCK_ID = "153104cd-477e-80ec-b1b4-c1a9b2d5a1c2"


def seed_demo(fake: FakeNotion) -> None:
    """Fill ``fake``'s default workspace and add and fill the second one."""
    _seed_default(fake)
    _seed_second(fake)


def _seed_default(fake: FakeNotion) -> None:
    fake.add_database(
        DEMO_DATABASE_ID,
        title="Launch tasks",
        description="Everything that has to happen before the public launch.",
        schema={
            "Name": "title",
            "Status": "status",
            "Owner": "people",
            "Due": "date",
            "Area": "multi_select",
        },
        options={
            "Status": ["Not started", "In progress", "Done"],
            "Area": ["Backend", "Docs", "Ops"],
        },
        parent={"type": "page_id", "page_id": DEMO_PAGE_ID},
        data_source_id=DEMO_DATA_SOURCE_ID,
        data_source_name="Launch tasks",
    )
    fake.add_page(
        DEMO_ROW_IDS[0],
        title="Ship webhook debouncing",
        title_name="Name",
        parent={
            "type": "data_source_id",
            "data_source_id": DEMO_DATA_SOURCE_ID,
            "database_id": DEMO_DATABASE_ID,
        },
        properties={
            "Status": status_property("In progress"),
            "Owner": people_property(DEFAULT_USER),
            "Due": date_property("2026-12-01"),
        },
        blocks=[paragraph("One sync per page per burst of edits.")],
        created_time="2026-11-18T09:00:00.000Z",
        last_edited_time="2026-11-20T23:50:00.000Z",
    )
    for n, (title, state, due, area) in enumerate(
        (
            ("Write the launch post", "Not started", "2026-12-03", "Docs"),
            ("Load-test the worker", "Done", "2026-11-25", "Ops"),
            ("Publish the consumer guide", "In progress", "2026-12-02", "Docs"),
        )
    ):
        fake.add_page(
            DEMO_ROW_IDS[n + 1],
            title=title,
            title_name="Name",
            parent={
                "type": "data_source_id",
                "data_source_id": DEMO_DATA_SOURCE_ID,
                "database_id": DEMO_DATABASE_ID,
            },
            properties={
                "Status": status_property(state),
                "Owner": people_property(DEFAULT_USER),
                "Due": date_property(due),
                "Area": {
                    "id": "are",
                    "type": "multi_select",
                    "multi_select": [{"id": f"opt-{area}", "name": area}],
                },
            },
            blocks=[paragraph(f"Notes on: {title}.")],
            created_time=f"2026-11-18T1{n}:00:00.000Z",
            last_edited_time=f"2026-11-20T23:5{n + 1}:00.000Z",
        )
    fake.add_page(
        DEMO_PAGE_ID,
        title="Launch plan",
        icon="🚀",
        last_edited_time="2026-11-20T23:55:00.000Z",
        blocks=[
            callout("This page is served by debounce's local Notion stand-in.", "💡"),
            {**paragraph("Hello world"), "id": DEMO_EDITED_BLOCK_ID},
            heading(1, "Goals"),
            paragraph(
                [
                    text("Sync every edited page "),
                    text("once", bold=True),
                    text(" per burst of edits, not "),
                    text("fifty times", italic=True),
                    text(". See the "),
                    text("design notes", link="https://example.com/design"),
                    text(" and "),
                    text("debounce_seconds", code=True),
                    text("."),
                ]
            ),
            heading(2, "Checklist"),
            to_do("Verify the webhook signature", True),
            to_do("Debounce events per page", True),
            to_do("Render Markdown", False),
            heading(2, "How a sync works"),
            numbered("Retrieve the page"),
            numbered(
                "Walk its blocks",
                bulleted("follow pagination", bulleted("100 blocks per request")),
                bulleted("recurse into children"),
            ),
            numbered("Write one document"),
            code('print("hello from debounce")', "python"),
            quote("Latest payload wins."),
            toggle("Details", paragraph("Retries back off exponentially with jitter.")),
            divider(),
            heading(3, "Limits"),
            table(
                [
                    ["Source", "Debounce", "Max wait"],
                    ["Notion", "300 s", "3600 s"],
                    ["Slack", "30 s", "300 s"],
                ]
            ),
            equation("t_{sync} = \\min(t_{last} + w, t_{first} + m)"),
            bookmark("https://developers.notion.com/reference/webhooks", "Notion webhooks"),
            child_database("Launch tasks", DEMO_DATABASE_ID),
        ],
    )
    # Two open discussions and a resolved one (not listed, as Notion's API lists none).
    _, thread = fake.add_comment(
        DEMO_PAGE_ID,
        "Should the limits table say **per workspace**?",
        name="Ada Lovelace",
        created_time="2026-11-20T21:04:00.000Z",
    )
    fake.add_comment(
        DEMO_PAGE_ID,
        "Yes: each workspace has its own budget.",
        discussion_id=thread,
        name="Grace Hopper",
        created_time="2026-11-20T21:30:00.000Z",
    )
    fake.add_comment(
        DEMO_PAGE_ID, "Ship it on Monday.", name="Grace Hopper", created_time="2026-11-20T22:15:00.000Z"
    )
    _, done = fake.add_comment(
        DEMO_PAGE_ID, "Typo in the title.", name="Ada Lovelace", created_time="2026-11-19T08:00:00.000Z"
    )
    fake.resolve(done)


#: The files the demo page carries (key on the file host, name, media type).
DEMO_FILES = (
    ("demo/launch-brief.pdf", "launch-brief.pdf", "application/pdf"),
    (
        "demo/launch-budget.xlsx",
        "launch-budget.xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
)


def attach_demo_files(fake: FakeNotion, host: FileHost) -> tuple[str, ...]:
    """Make a PDF (written by pypdf) and a spreadsheet (written by openpyxl), serve them from
    ``host`` (presigned S3 URLs, as Notion-hosted files) and append a ``pdf`` and a ``file``
    block holding them to the demo page :data:`DEMO_PAGE_ID`, under an "Attachments"
    heading; returns the ids of the file documents they become (``file:<URL path>``)."""
    contents = {
        "demo/launch-brief.pdf": text_pdf(
            [
                ["Launch brief", "Public launch on 2026-12-03.", "Owner: Ada Lovelace."],
                ["Risks", "Webhook bursts from large workspaces; the debounce window absorbs them."],
            ],
            title="Launch brief",
        ),
        "demo/launch-budget.xlsx": spreadsheet(
            {"Budget": [["Item", "Cost (EUR)"], ["Hosting", 1200], ["Launch event", 3500], ["Total", 4700]]}
        ),
    }
    blocks: list[dict[str, Any]] = [heading(2, "Attachments")]
    for key, name, media_type in DEMO_FILES:
        host.add(key, contents[key], media_type)
        kind = "pdf" if media_type == "application/pdf" else "file"
        source = {
            "type": "file",
            "file": {"url": host.presign(key), "expiry_time": "2026-11-21T00:55:00.000Z"},
        }
        blocks.append({"type": kind, kind: {**source, "caption": [], "name": name}})
    page = norm_id(DEMO_PAGE_ID) or DEMO_PAGE_ID
    kept = fake.children.pop(page, [])
    fake.children[page] = kept + fake.set_blocks(page, blocks)
    return tuple(f"file:/s3/{key}" for key, _, _ in DEMO_FILES)


def _seed_second(fake: FakeNotion) -> None:
    fake.add_workspace(DEMO_SECOND_WORKSPACE_ID, DEMO_SECOND_WORKSPACE_NAME, DEMO_SECOND_TOKEN)
    fake.add_page(
        DEMO_SECOND_PAGE_ID,
        title="Research notes",
        icon="🔬",
        workspace_id=DEMO_SECOND_WORKSPACE_ID,
        last_edited_time="2026-11-20T22:10:00.000Z",
        blocks=[
            heading(1, "Open questions"),
            paragraph("This page lives in a second workspace, with a token of its own."),
            bulleted("Does one deployment keep every workspace apart?"),
            to_do("Connect this workspace too", False),
        ],
    )


class NotionDemoEdits:
    """The edits of ``POST /_demo/edit`` (:mod:`standins.demo_edits`) on the Notion stand-in:
    a ``page.content_updated`` example edits the first paragraph its ``data.updated_blocks``
    names (a paragraph of the event's page), as a person typing in Notion would: the block's
    text becomes the next edit's text (:class:`~standins.demo_edits.EditCounter`), and the
    block's and the page's ``last_edited_time`` the time of the edit. The webhook answered is
    the example with a new event ``id``, that ``timestamp`` and ``updated_blocks`` naming the
    edited block (Notion's events carry ids and types, never content)."""

    def __init__(self, fake: FakeNotion, counter: EditCounter | None = None) -> None:
        self.fake = fake
        self.counter = counter or EditCounter()

    def apply(self, event: Mapping[str, Any]) -> DemoEdit:
        """Apply the edit ``event`` describes; see the class.

        Raises:
            NotAnEdit: not a ``page.content_updated`` event.
            LookupError: the page, or a paragraph of it named in ``updated_blocks``, is not
                in the stand-in.
        """
        if event.get("type") == "data_source.content_updated":
            return self._edit_row(event)
        if event.get("type") != "page.content_updated":
            raise NotAnEdit(f"a {event.get('type')!r} event edits no content")
        entity = event.get("entity")
        page_id = norm_id(str(entity.get("id", ""))) if isinstance(entity, dict) else None
        page = self.fake.pages.get(page_id or "")
        if page_id is None or page is None:
            raise LookupError(f"no page {page_id or entity!r} in the Notion stand-in")
        data = event.get("data")
        named = data.get("updated_blocks") if isinstance(data, dict) else None
        ids = [norm_id(str(b.get("id", ""))) for b in named or [] if isinstance(b, dict)]
        block_id = next((i for i in ids if i is not None and self._paragraph_of(page_id, i)), None)
        if block_id is None:
            raise LookupError(f"page {page_id} has no paragraph named in data.updated_blocks")
        paragraph_body = self.fake.blocks[block_id]["paragraph"]
        before = "".join(str(i.get("plain_text", "")) for i in paragraph_body["rich_text"])
        after, when = self.counter.next_text(block_id, before)
        stamp = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        paragraph_body["rich_text"] = rich_text(after)
        self.fake.blocks[block_id]["last_edited_time"] = stamp
        self.fake.touch(page_id, stamp)
        webhook = copy.deepcopy(dict(event))
        webhook.update(id=str(uuid.uuid4()), timestamp=stamp, attempt_number=1)
        webhook["data"] = {
            **(data if isinstance(data, dict) else {}),
            "updated_blocks": [{"id": block_id, "type": "block"}],
        }
        title = "".join(
            str(i.get("plain_text", ""))
            for prop in page["properties"].values()
            if prop.get("type") == "title"
            for i in prop["title"]
        )
        return DemoEdit(f"edited page {title!r} ({page_id}): {before!r} → {after!r}", after, webhook)

    def _edit_row(self, event: Mapping[str, Any]) -> DemoEdit:
        """A ``data_source.content_updated`` example: the first row its ``updated_blocks``
        names (a page of the data source) gets a new title, as a person renaming a row in the
        table; the row's ``last_edited_time`` is the time of the edit.

        Raises:
            LookupError: the data source, or a row of it named in ``updated_blocks``, is not
                in the stand-in.
        """
        entity = event.get("entity")
        ds_id = norm_id(str(entity.get("id", ""))) if isinstance(entity, dict) else None
        if ds_id is None or ds_id not in self.fake.data_sources:
            raise LookupError(f"no data source {ds_id or entity!r} in the Notion stand-in")
        data = event.get("data")
        named = data.get("updated_blocks") if isinstance(data, dict) else None
        ids = [norm_id(str(b.get("id", ""))) for b in named or [] if isinstance(b, dict)]
        row_id = next(
            (
                i
                for i in ids
                if i is not None
                and (self.fake.pages.get(i, {}).get("parent") or {}).get("data_source_id") == ds_id
            ),
            None,
        )
        if row_id is None:
            raise LookupError(f"data source {ds_id} has no row named in data.updated_blocks")
        row = self.fake.pages[row_id]
        title = next(p for p in row["properties"].values() if p.get("type") == "title")
        before = "".join(str(i.get("plain_text", "")) for i in title["title"])
        after, when = self.counter.next_text(row_id, before)
        stamp = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        title["title"] = rich_text(after)
        self.fake.touch(row_id, stamp)
        webhook = copy.deepcopy(dict(event))
        webhook.update(id=str(uuid.uuid4()), timestamp=stamp, attempt_number=1)
        return DemoEdit(f"renamed row {before!r} → {after!r} of data source {ds_id}", after, webhook)

    def _paragraph_of(self, page_id: str, block_id: str) -> bool:
        found = self.fake.blocks.get(block_id)
        return (
            found is not None
            and found.get("type") == "paragraph"
            and found.get("parent") == {"type": "page_id", "page_id": page_id}
        )
