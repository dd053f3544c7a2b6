"""The Notion source as the service sees it (:class:`~integrations.base.Source`): settings,
window, signing, id spelling, the demo stand-in, and the factory of its integration."""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Any

from debounce.types import ApiBudget
from integrations.base import (
    AuthRevoked,
    DemoSetup,
    DemoWorkspace,
    Identity,
    Source,
    SourceSetting,
    SourceWindow,
)
from integrations.notion.sync import SOURCE_TYPE, create
from integrations.notion.webhook import SIGNATURE_HEADER, normalize_id

if TYPE_CHECKING:
    from debounce.config import Settings

from integrations.notion.install import installer

__all__ = ["DEMO_SECRET", "SOURCE", "identify", "sign"]

#: The signing secret of ``serve --demo``: the token in ``examples/notion/verification.json``
#: (Notion signs every event with the subscription's verification token).
DEMO_SECRET = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"

SETTINGS = (
    SourceSetting("notion_client_id", "NOTION_CLIENT_ID", None, "str",
                  "public integration's OAuth client id (install flow)"),
    SourceSetting("notion_client_secret", "NOTION_CLIENT_SECRET", None, "secret",
                  "public integration's OAuth client secret"),
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
    from standins.notion_api import (
        DEMO_SECOND_PAGE_ID,
        DEMO_SECOND_TOKEN,
        DEMO_SECOND_WORKSPACE_ID,
        DEMO_SECOND_WORKSPACE_NAME,
        FakeNotion,
    )
    from standins.server import BackgroundServer

    fake = FakeNotion.demo()
    server = BackgroundServer(fake.app())
    server.start()
    second = DemoWorkspace(
        external_id=DEMO_SECOND_WORKSPACE_ID, name=DEMO_SECOND_WORKSPACE_NAME,
        token=DEMO_SECOND_TOKEN,
        event={"id": "demo-second-workspace-1", "timestamp": "2026-11-20T10:00:00.000Z",
               "workspace_id": DEMO_SECOND_WORKSPACE_ID,
               "workspace_name": DEMO_SECOND_WORKSPACE_NAME, "subscription_id": "demo",
               "integration_id": "demo", "type": "page.content_updated",
               "authors": [{"id": "demo-user", "type": "person"}], "attempt_number": 1,
               "entity": {"id": DEMO_SECOND_PAGE_ID, "type": "page"},
               "data": {"parent": {"id": DEMO_SECOND_WORKSPACE_ID, "type": "space"}}})
    return DemoSetup(settings={"notion_base_url": server.url, "notion_token": fake.token},
                     window=SourceWindow(3.0, 20.0), examples=("page.*.json",),
                     url=server.url, stop=server.stop, workspaces=(second,))


async def identify(settings: Settings, token: str) -> Identity:
    """Who ``token`` is: its bot user (``GET /v1/users/me``,
    https://developers.notion.com/reference/get-self) — the workspace's id (``bot.workspace_id``
    when the API gives it) and name.

    Raises:
        AuthRevoked: Notion answered 401 (the token does not work).
        notion_client.APIResponseError: another error answer.
    """
    from notion_client import AsyncClient
    from notion_client.client import ClientOptions
    from notion_client.errors import APIResponseError

    from integrations.notion.client import NOTION_VERSION

    client = AsyncClient(options=ClientOptions(auth=token, base_url=settings.notion_base_url.rstrip("/"),
                                               notion_version=NOTION_VERSION, retry=False))
    try:
        me: Any = await client.users.me()
    except APIResponseError as exc:
        if exc.status == 401:
            raise AuthRevoked(f"Notion refused the token: {exc.code}") from exc
        raise
    finally:
        await client.aclose()
    bot = me.get("bot") if isinstance(me, dict) else None
    bot = bot if isinstance(bot, dict) else {}
    workspace = bot.get("workspace_id")
    return Identity(external_id=str(workspace) if workspace else "",
                    name=str(bot.get("workspace_name") or me.get("name") or ""),
                    bot_user_id=str(me.get("id")) if me.get("id") else None)


#: Each workspace's default API budget. Notion limits each connection to a budget per 60-second
#: window (on average three requests per second) and each workspace, shared with its other
#: connections, on top (https://developers.notion.com/reference/request-limits): 150 per
#: minute with a burst of 20 keeps any 60 s under 180 and leaves the workspace's other apps
#: some room.
BUDGET = ApiBudget(per_minute=150.0, burst=20.0)

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
    token_setting="notion_token",
    identify=identify,
    installer=installer,
    budget=BUDGET,
    # pages.retrieve + pages.retrieve_markdown (docs/notion.md).
    requests_per_page=2.0,
    # Search sorted by last edit makes a sweep cheap: one request per 100 pages edited since.
    reconcile_by_default=True,
)
