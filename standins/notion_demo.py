"""The demo content of the Notion stand-in (:meth:`standins.notion_api.FakeNotion.demo`), for
``debounce serve --demo``, ``debounce standins`` and the tests that use it.

Two workspaces: the default one (the constructor's token, :data:`DEMO_TOKEN` in the demo) with
the page of ``examples/notion/page.*.json`` and a database, and a second one,
:data:`DEMO_SECOND_WORKSPACE_ID` (token :data:`DEMO_SECOND_TOKEN`) with one page of its own, so
a multi-workspace deployment can connect both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    status_property,
    table,
    text,
    to_do,
    toggle,
)
from standins.notion_http import DEFAULT_USER

if TYPE_CHECKING:
    from standins.notion_api import FakeNotion

__all__ = [
    "DEMO_DATABASE_ID",
    "DEMO_PAGE_ID",
    "DEMO_SECOND_PAGE_ID",
    "DEMO_SECOND_TOKEN",
    "DEMO_SECOND_WORKSPACE_ID",
    "DEMO_SECOND_WORKSPACE_NAME",
    "DEMO_TOKEN",
    "seed_demo",
]

#: The page of ``examples/notion/page.*.json`` and the database of
#: ``examples/notion/database.schema_updated.json``, in the default workspace.
DEMO_PAGE_ID = "153104cd-477e-809d-8dc4-ff2d96ae3090"
DEMO_DATABASE_ID = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"
#: The token of the default workspace of :meth:`~standins.notion_api.FakeNotion.demo` (set
#: ``NOTION_TOKEN`` to it).
DEMO_TOKEN = "secret_debounce_demo_token"

#: The demo's second workspace: its id, name and token, and its page.
DEMO_SECOND_WORKSPACE_ID = "9b2e6d41-3c5a-4f7e-8d1b-2a6c4e8f0b37"
DEMO_SECOND_WORKSPACE_NAME = "Debounce Labs"
DEMO_SECOND_TOKEN = "secret_debounce_demo_second_token"
DEMO_SECOND_PAGE_ID = "5e7a9c1b-2d4f-4a6b-8c0e-1f3a5b7c9d2e"


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
        data_source_id="2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20",
        data_source_name="Launch tasks",
    )
    fake.add_page(
        "7d3e1f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
        title="Ship webhook debouncing",
        title_name="Name",
        parent={
            "type": "data_source_id",
            "data_source_id": "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20",
            "database_id": DEMO_DATABASE_ID,
        },
        properties={
            "Status": status_property("In progress"),
            "Owner": people_property(DEFAULT_USER),
            "Due": date_property("2026-12-01"),
        },
        blocks=[paragraph("One sync per page per burst of edits.")],
    )
    fake.add_page(
        DEMO_PAGE_ID,
        title="Launch plan",
        icon="🚀",
        last_edited_time="2026-11-20T23:55:00.000Z",
        blocks=[
            callout("This page is served by debounce's local Notion stand-in.", "💡"),
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
