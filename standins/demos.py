"""The stand-ins of ``debounce serve --demo`` and ``debounce standins``, by source type: the one
place that starts them for the service (the sources themselves know nothing of their fakes).

:data:`DEMOS` maps a ``source_type`` to a function that starts that source's local API
stand-in with demo content and says how to use it (:class:`DemoSetup`); each stand-in also
answers ``POST /_demo/edit`` (:mod:`standins.demo_edits`), which makes an example's edit real.
Only the demo (``debounce.cli.demo``) imports this module; the import contract in
``pyproject.toml`` keeps every other production module away from ``standins``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from debounce.contract import SourceWindow
from standins.demo_edits import EDIT_PATH, with_edits
from standins.file_host import FileHost
from standins.notion_api import (
    DEMO_SECOND_PAGE_ID,
    DEMO_SECOND_TOKEN,
    DEMO_SECOND_WORKSPACE_ID,
    DEMO_SECOND_WORKSPACE_NAME,
    FakeNotion,
)
from standins.notion_demo import NotionDemoEdits, attach_demo_files
from standins.server import BackgroundServer
from standins.slack_api import (
    DEMO_SECOND_CHANNEL,
    DEMO_SECOND_TEAM_ID,
    DEMO_SECOND_TEAM_NAME,
    FakeSlack,
)
from standins.slack_api import DEMO_SECOND_TOKEN as SECOND_TOKEN
from standins.slack_demo import SlackDemoEdits

__all__ = ["DEMOS", "DemoSetup", "DemoWorkspace", "notion_demo", "slack_demo"]

#: The bot token of the Slack stand-in's default team in the demo.
DEMO_TOKEN = "xoxb-debounce-demo"


@dataclass(frozen=True)
class DemoWorkspace:
    """A further workspace of a source's stand-in that ``serve --demo`` connects (besides the
    one its settings' token defines), and one webhook body of that workspace the tour posts."""

    external_id: str
    name: str
    token: str
    event: Mapping[str, Any]


@dataclass(frozen=True)
class DemoSetup:
    """What a source's stand-in for ``debounce serve --demo`` gives the service: settings to
    apply (fields of the source's settings: its API base URL and token), the demo window, the
    example webhook files (names in ``examples/<source_type>/``, glob patterns allowed) the
    tour posts, where the stand-in listens (``url``, for the log), and ``stop`` to call at
    exit. ``edits`` names the examples that describe an edit of content: the tour posts them
    after the others, each once ``POST edit_url`` (:mod:`standins.demo_edits`) has made its
    edit real in the stand-in. ``file_documents``: the ids of the file documents the demo's
    files become (the tour shows their text)."""

    settings: dict[str, Any]
    window: SourceWindow
    examples: tuple[str, ...]
    url: str
    stop: Callable[[], None]
    workspaces: tuple[DemoWorkspace, ...] = ()
    edits: tuple[str, ...] = ()
    edit_url: str | None = None
    file_documents: tuple[str, ...] = ()


def notion_demo() -> DemoSetup:
    """Start the local Notion API stand-in with demo content (``standins.notion_api``); the
    ``notion`` source's settings point at it."""
    fake = FakeNotion.demo()
    host = FileHost()
    file_server = BackgroundServer(host.app())
    file_server.start()
    host.base_url = file_server.url
    file_documents = attach_demo_files(fake, host)  # a PDF and a spreadsheet on the demo page
    server = BackgroundServer(with_edits(fake.app(), NotionDemoEdits(fake).apply))
    server.start()

    def stop() -> None:
        server.stop()
        file_server.stop()

    second = DemoWorkspace(
        external_id=DEMO_SECOND_WORKSPACE_ID,
        name=DEMO_SECOND_WORKSPACE_NAME,
        token=DEMO_SECOND_TOKEN,
        event={
            "id": "demo-second-workspace-1",
            "timestamp": "2026-11-20T10:00:00.000Z",
            "workspace_id": DEMO_SECOND_WORKSPACE_ID,
            "workspace_name": DEMO_SECOND_WORKSPACE_NAME,
            "subscription_id": "demo",
            "integration_id": "demo",
            "type": "page.content_updated",
            "authors": [{"id": "demo-user", "type": "person"}],
            "attempt_number": 1,
            "entity": {"id": DEMO_SECOND_PAGE_ID, "type": "page"},
            "data": {"parent": {"id": DEMO_SECOND_WORKSPACE_ID, "type": "space"}},
        },
    )
    return DemoSetup(
        settings={"notion_base_url": server.url, "notion_token": fake.token},
        window=SourceWindow(3.0, 20.0),
        # comment.created: the demo page's discussions; data_source.content_updated
        # (an edit: a row renamed): the Launch tasks table, updated.
        examples=("page.*.json", "comment.*.json", "data_source.*.json"),
        url=server.url,
        stop=stop,
        workspaces=(second,),
        edits=("page.content_updated.json", "data_source.content_updated.json"),
        edit_url=server.url + EDIT_PATH,
        file_documents=file_documents,
    )


def slack_demo() -> DemoSetup:
    """Start the local Slack Web API stand-in with demo content (``standins.slack_api``); the
    ``slack`` source's settings point at it."""
    fake = FakeSlack.demo(token=DEMO_TOKEN)
    server = BackgroundServer(with_edits(fake.app(), SlackDemoEdits(fake).apply))
    server.start()
    second = DemoWorkspace(
        external_id=DEMO_SECOND_TEAM_ID,
        name=DEMO_SECOND_TEAM_NAME,
        token=SECOND_TOKEN,
        event={
            "token": "demo",
            "team_id": DEMO_SECOND_TEAM_ID,
            "api_app_id": "A0DEBOUNCE1",
            "type": "event_callback",
            "event_id": "EvDemoSecondTeam1",
            "event_time": 1763690000,
            "event": {
                "type": "message",
                "channel": DEMO_SECOND_CHANNEL,
                "user": "U07LABS01",
                "text": "demo",
                "ts": "1763690000.000100",
                "channel_type": "channel",
            },
        },
    )
    return DemoSetup(
        settings={"slack_api_url": server.url + "/api/", "slack_bot_token": fake.token},
        window=SourceWindow(2.0, 20.0),
        examples=("message.json", "thread_reply.json", "message_changed.json", "file_change.json"),
        url=server.url + "/api/",
        stop=server.stop,
        workspaces=(second,),
        edits=("message_changed.json",),
        edit_url=server.url + EDIT_PATH,
    )


#: The demo of each source that has one, by source type.
DEMOS: dict[str, Callable[[], DemoSetup]] = {"notion": notion_demo, "slack": slack_demo}
