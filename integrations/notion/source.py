"""The Notion source as the service sees it (:class:`~debounce.contract.Source`): settings,
window, signing, id spelling, and the factories of its webhook parser and its syncer. Its
local stand-in for ``serve --demo`` lives with the stand-ins (``standins/demos.py``), not
here."""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

from debounce.contract import ApiBudget, AuthRevoked, Identity, Source, SourceWindow
from integrations.notion.install import installer
from integrations.notion.settings import NotionSettings
from integrations.notion.sync import SOURCE_TYPE, create
from integrations.notion.webhook import SIGNATURE_HEADER, NotionWebhooks, normalize_id

__all__ = ["DEMO_SECRET", "SOURCE", "identify", "sign"]

#: The signing secret of ``serve --demo``: the token in ``examples/notion/verification.json``
#: (Notion signs every event with the subscription's verification token).
DEMO_SECRET = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` as Notion does: ``X-Notion-Signature: sha256=<hex
    HMAC-SHA256 of the body keyed by the verification token>`` (developers.notion.com,
    "Webhooks"; Notion sends no timestamp, so ``timestamp`` is ignored)."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", SIGNATURE_HEADER: f"sha256={digest}"}


async def identify(settings: NotionSettings, token: str) -> Identity:
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

    # The SDK's own warning on an error answer would repeat what the raised error says (and
    # its default logger adds a console handler per client): a logger that keeps errors only.
    client = AsyncClient(
        options=ClientOptions(
            auth=token,
            base_url=settings.notion_base_url.rstrip("/"),
            notion_version=NOTION_VERSION,
            retry=False,
            logger=logging.getLogger("integrations.notion.identify"),
            log_level=logging.ERROR,
        )
    )
    try:
        me: Any = await client.users.me()
    except APIResponseError as exc:
        if exc.status == 401:
            code = getattr(exc.code, "value", exc.code)
            raise AuthRevoked(f"Notion refused the token: {code} ({exc})") from exc
        raise
    finally:
        await client.aclose()
    bot = me.get("bot") if isinstance(me, dict) else None
    bot = bot if isinstance(bot, dict) else {}
    workspace = bot.get("workspace_id")
    return Identity(
        external_id=str(workspace) if workspace else "",
        name=str(bot.get("workspace_name") or me.get("name") or ""),
        bot_user_id=str(me.get("id")) if me.get("id") else None,
    )


#: Each workspace's default API budget. Notion limits each connection to a budget per 60-second
#: window (on average three requests per second) and each workspace, shared with its other
#: connections, on top (https://developers.notion.com/reference/request-limits): 150 per
#: minute with a burst of 20 keeps any 60 s under 180 and leaves the workspace's other apps
#: some headroom.
BUDGET = ApiBudget(per_minute=150.0, burst=20.0)

SOURCE = Source(
    source_type=SOURCE_TYPE,
    create=create,
    webhooks=NotionWebhooks,
    settings_type=NotionSettings,
    env_prefix="NOTION",
    window=SourceWindow(300.0, 3600.0),
    secret_setting="notion_webhook_secret",
    demo_secret=DEMO_SECRET,
    sign=sign,
    normalize_page_id=normalize_id,
    # A Notion id is a UUID; normalize_id spells it dashed and lower-case
    # (developers.notion.com/reference/intro, "Conventions": IDs are UUIDv4, dashes optional).
    page_id_pattern=r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    page_id_form="a UUID, with or without dashes (e.g. 59833787-2cf9-4fdf-8782-e53db20768a5)",
    handshake_command="notion-token",
    token_setting="notion_token",
    identify=identify,
    installer=installer,
    budget=BUDGET,
    # What a typical page sync costs (docs/notion.md, "What a page sync asks for"): one request
    # for a body edit, a property edit or a comment change; two for a backfilled page (its
    # content and its comments: the listing's page object travels with the job); three for a
    # new, moved or re-synced page. The claim reserves this much of the
    # workspace's budget per sync and never gives back what a sync did not spend, so a higher
    # figure would waste budget on every one-request sync; a two-request sync takes its second
    # request from the bucket.
    requests_per_page=1.0,
    # Search sorted by last edit makes a reconciliation cheap: one request per 100 pages edited since.
    reconcile_by_default=True,
    # Notion's public API has no per-page sharing list: a page's audience is its workspace,
    # narrowed by an event's accessible_by where a public integration's events carry one.
    audience_labels={"workspace": "Notion workspace"},
)
