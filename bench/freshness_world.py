"""The stand-in world of the freshness benchmark (``bench.freshness``): one
:class:`~standins.notion_api.FakeNotion` and one :class:`~standins.slack_api.FakeSlack`
serving several workspaces on loopback (each in a :class:`~standins.server.BackgroundServer`
thread of the benchmark process, so every worker process talks to the same buckets and the
benchmark reads their counts on its own clock), the pages and channels of those workspaces,
their edits and the webhooks that announce them.

Every page's content carries a revision marker ``bench-rev-<n>`` (a Notion page's first
paragraph; a Slack channel's newest message), bumped by each edit, so a document written by
the service says which edit it reflects (``bench.freshness`` logs it with a trigger).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from standins.budgets import Usage
from standins.notion_api import FakeNotion, bulleted, heading, paragraph
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

__all__ = ["MARKER", "NOTION_SECRET", "SIZES", "SLACK_SECRET", "Space", "StandinBudget", "World"]

#: The revision marker in every page's content: ``bench-rev-<n>``.
MARKER = "bench-rev-"
NOTION_SECRET = "bench-freshness-notion-secret"
SLACK_SECRET = "bench-freshness-slack-signing-secret"
#: Blocks per Notion page, cycled over a workspace's pages: 40 % of 10 blocks, 30 % of 30,
#: 15 % of 100, 10 % of 250, 5 % of 500 (mean 78; every page fits one markdown answer).
SIZES = (10, 30, 10, 100, 30, 10, 250, 30, 10, 100, 10, 30, 500, 10, 30, 100, 10, 250, 30, 10)
_NS = uuid.UUID("5b0e7c3a-1f2d-4e6b-9a8c-7d6e5f4a3b2c")
_AUTHOR = "U2147483697"


@dataclass(frozen=True)
class StandinBudget:
    """A stand-in's token bucket per workspace: ``per_second`` and ``burst`` requests."""

    per_second: float
    burst: float


@dataclass
class Space:
    """One workspace (Notion) or team (Slack) of the world.

    ``key``: the benchmark's short name; ``external_id``: the source's id of it (what its
    webhooks name); ``pages``: Notion page ids or Slack channel ids; ``sizes``: blocks per
    Notion page; ``db_id``: its ``workspaces`` row once connected.
    """

    key: str
    source: str
    external_id: str
    token: str
    name: str
    pages: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    db_id: int | None = None

    def page_size(self, page: str) -> int:
        return self.sizes.get(page, 1)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class World:
    """The fakes, their servers and the workspaces (module docstring)."""

    def __init__(self) -> None:
        self.notion = FakeNotion(token="secret_bench_default")
        self.slack = FakeSlack(token="xoxb-bench-default")
        self.spaces: dict[str, Space] = {}
        self.space_of: dict[str, Space] = {}
        self.revs: dict[str, int] = {}
        self._first_block: dict[str, str] = {}
        self._last_ts: dict[str, str] = {}
        self._servers: list[BackgroundServer] = []
        self.notion_url = self.slack_url = ""

    # -- building ----------------------------------------------------------------------------

    def add_notion(self, key: str, pages: int, sizes: Sequence[int] = SIZES) -> Space:
        """A Notion workspace with ``pages`` pages of ``sizes`` blocks (cycled)."""
        wid = str(uuid.uuid5(_NS, f"notion/{key}"))
        space = Space(key, "notion", wid, f"secret_bench_{key}", f"Bench {key}")
        self.notion.add_workspace(wid, space.name, space.token)
        for i in range(pages):
            n = sizes[i % len(sizes)]
            blocks = [paragraph(f"{MARKER}0 of page {i}")]
            for j in range(1, n):
                line = f"Line {j} of page {i} in {key}: lorem ipsum dolor sit amet, consectetur."
                blocks.append(
                    heading(2, line) if j % 25 == 0 else bulleted(line) if j % 4 == 1 else paragraph(line)
                )
            pid = self.notion.add_page(title=f"{key} page {i}", blocks=blocks, workspace_id=wid)
            self._first_block[pid] = self.notion.children[pid][0]
            self._add_page(space, pid, n)
        self.spaces[key] = space
        return space

    def add_slack(self, key: str, channels: int) -> Space:
        """A Slack team with ``channels`` channels (each starts with one message)."""
        tid = "T" + key.upper().rjust(8, "0")
        space = Space(key, "slack", tid, f"xoxb-bench-{key}", f"Bench {key}")
        self.slack.add_team(tid, space.name, space.token, f"UB{key.upper()}")
        for i in range(channels):
            channel = f"C{key.upper()}{i:06d}"
            self.slack.add_channel(channel, team_id=tid)
            self._last_ts[channel] = self.slack.post(channel, f"{MARKER}0 in {channel}", user=_AUTHOR)
            self._add_page(space, channel, 1)
        self.spaces[key] = space
        return space

    def _add_page(self, space: Space, page: str, size: int) -> None:
        space.pages.append(page)
        space.sizes[page] = size
        self.space_of[page] = space
        self.revs[page] = 0

    def start(self) -> None:
        """Serve both fakes on loopback."""
        for fake in (self.notion, self.slack):
            server = BackgroundServer(fake.app())
            server.start()
            self._servers.append(server)
        self.notion_url, self.slack_url = self._servers[0].url, self._servers[1].url + "/api/"

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
        self._servers.clear()

    # -- per run -----------------------------------------------------------------------------

    def set_budgets(self, notion: StandinBudget, slack: StandinBudget) -> None:
        """Give every workspace a full bucket of its source's budget; forget the counts."""
        for space in self.spaces.values():
            if space.source == "notion":
                self.notion.set_budget(space.external_id, per_second=notion.per_second, burst=notion.burst)
            else:
                self.slack.set_budget(space.external_id, per_minute=slack.per_second * 60, burst=slack.burst)
        self.notion.reset_usage()
        self.slack.reset_usage()

    def deny_markdown(self, denied: bool) -> None:
        """Notion's markdown endpoint answers 403 (no read-content capability) to every
        workspace, or serves again: the integration then syncs by the block walk."""
        for space in self.spaces.values():
            if space.source == "notion":
                self.notion.deny_read_content(workspace_id=space.external_id, denied=denied)

    def usage(self, space: Space) -> Usage:
        fake: Any = self.notion if space.source == "notion" else self.slack
        usage: Usage = fake.usage(space.external_id)
        return usage

    # -- edits -------------------------------------------------------------------------------

    def edit(self, page: str) -> int:
        """Edit ``page`` (a new revision in its content); returns the revision."""
        rev = self.revs[page] = self.revs[page] + 1
        now = time.time()
        if self.space_of[page].source == "notion":
            bid = self._first_block[page]
            old = self.notion.blocks[bid]
            # Whole values replaced, never mutated in place: the server thread may be
            # serialising the old ones.
            self.notion.blocks[bid] = {
                **old,
                "paragraph": paragraph(f"{MARKER}{rev} edited")["paragraph"],
                "last_edited_time": _iso(now),
            }
            self.notion.pages[page] = {**self.notion.pages[page], "last_edited_time": _iso(now)}
        else:
            self._last_ts[page] = self.slack.post(page, f"{MARKER}{rev} posted in {page}", user=_AUTHOR)
        return rev

    def webhook(self, page: str) -> tuple[str, bytes]:
        """The source and body of the webhook announcing ``page``'s latest edit."""
        space = self.space_of[page]
        if space.source == "notion":
            body: dict[str, Any] = {
                "id": str(uuid.uuid4()),
                "timestamp": _iso(time.time()),
                "workspace_id": space.external_id,
                "workspace_name": space.name,
                "subscription_id": "bench",
                "integration_id": "bench",
                "authors": [{"id": _AUTHOR, "type": "person"}],
                "attempt_number": 1,
                "type": "page.content_updated",
                "entity": {"id": page, "type": "page"},
                "data": {"parent": {"id": space.external_id, "type": "space"}},
            }
            return "notion", json.dumps(body).encode()
        ts = self._last_ts[page]
        body = {
            "token": "bench",
            "team_id": space.external_id,
            "api_app_id": "ABENCH",
            "type": "event_callback",
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": space.external_id,
                    "user_id": f"UB{space.key.upper()}",
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "event": {
                "type": "message",
                "channel": page,
                "user": _AUTHOR,
                "text": f"{MARKER}{self.revs[page]}",
                "ts": ts,
                "event_ts": ts,
                "channel_type": "channel",
                "client_msg_id": str(uuid.uuid4()),
                "team": space.external_id,
            },
            "event_id": "Ev" + uuid.uuid4().hex[:16].upper(),
            "event_time": int(time.time()),
        }
        return "slack", json.dumps(body).encode()
