"""The Notion source as the service sees it (:class:`~integrations.base.Source`): settings,
window, signing, id spelling, the demo stand-in, and the factory of its integration."""

from __future__ import annotations

import hashlib
import hmac

from integrations.base import DemoSetup, Source, SourceSetting, SourceWindow
from integrations.notion.sync import SOURCE_TYPE, create
from integrations.notion.webhook import SIGNATURE_HEADER, normalize_id

__all__ = ["DEMO_SECRET", "SOURCE", "sign"]

#: The signing secret of ``serve --demo``: the token in ``examples/notion/verification.json``
#: (Notion signs every event with the subscription's verification token).
DEMO_SECRET = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"

SETTINGS = (
    SourceSetting("notion_token", "NOTION_TOKEN", None, "secret", "Notion integration token"),
    SourceSetting("notion_base_url", "NOTION_BASE_URL", "https://api.notion.com", "str",
                  "Notion API base URL"),
    SourceSetting("notion_webhook_secret", "NOTION_WEBHOOK_SECRET", None, "secret",
                  "the verification token Notion sent (signs every event)"),
)


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` as Notion does: ``X-Notion-Signature: sha256=<hex
    HMAC-SHA256 of the body keyed by the verification token>`` (developers.notion.com,
    "Webhooks"; Notion sends no timestamp, so ``timestamp`` is ignored)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", SIGNATURE_HEADER: f"sha256={digest}"}


def demo() -> DemoSetup:
    """Start the local Notion API stand-in with demo content (``standins.notion_api``)."""
    from standins.notion_api import FakeNotion
    from standins.server import BackgroundServer

    fake = FakeNotion.demo()
    server = BackgroundServer(fake.app())
    server.start()
    return DemoSetup(settings={"notion_base_url": server.url, "notion_token": fake.token},
                     window=SourceWindow(3.0, 20.0), examples=("page.*.json",),
                     url=server.url, stop=server.stop)


SOURCE = Source(
    source_type=SOURCE_TYPE,
    create=create,
    settings=SETTINGS,
    env_prefix="NOTION",
    window=SourceWindow(300.0, 3600.0),
    secret_setting="notion_webhook_secret",
    demo_secret=DEMO_SECRET,
    sign=sign,
    normalize_page_id=normalize_id,
    handshake_command="notion-token",
    demo=demo,
)
