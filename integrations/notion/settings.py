"""The Notion source's settings, typed (read from the environment by the service with
the parsers of :mod:`debounce.contract.settings`; see ``Source.settings_type``)."""

from __future__ import annotations

from dataclasses import dataclass

from debounce.contract import setting

__all__ = ["NotionSettings"]


@dataclass(frozen=True)
class NotionSettings:
    """What the Notion source reads from the environment (``None``: unset)."""

    notion_client_id: str | None = setting(
        "NOTION_CLIENT_ID", help="public integration's OAuth client id (install flow)"
    )
    notion_client_secret: str | None = setting(
        "NOTION_CLIENT_SECRET", kind="secret", help="public integration's OAuth client secret"
    )
    notion_token: str | None = setting("NOTION_TOKEN", kind="secret", help="Notion integration token")
    notion_base_url: str = setting("NOTION_BASE_URL", "https://api.notion.com", help="Notion API base URL")
    notion_webhook_secret: str | None = setting(
        "NOTION_WEBHOOK_SECRET", kind="secret", help="the verification token Notion sent (signs every event)"
    )
