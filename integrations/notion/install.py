"""Notion's public-integration install flow: the authorize URL and ``POST /v1/oauth/token``
(notion-client's ``oauth.token``). https://developers.notion.com/docs/authorization
"""

from __future__ import annotations

import html
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from notion_client import AsyncClient
from notion_client.client import ClientOptions
from notion_client.errors import HTTPResponseError

from debounce.contract import Installed, InstallError
from integrations.notion.client import NOTION_VERSION
from integrations.notion.settings import NotionSettings

__all__ = ["NotionInstaller", "installer"]

_PAGE = (
    "<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body><h1>{title}</h1><p>{body}</p></body></html>"
)


class NotionInstaller:
    """The install flow of one deployment's public Notion integration (``NOTION_CLIENT_ID``,
    ``NOTION_CLIENT_SECRET``)."""

    def __init__(self, settings: NotionSettings) -> None:
        if not settings.notion_client_id or not settings.notion_client_secret:
            raise InstallError(
                "the Notion install flow is not configured: set NOTION_CLIENT_ID "
                "and NOTION_CLIENT_SECRET (the public integration's OAuth "
                "client)"
            )
        self.settings = settings
        self.client_id: str = settings.notion_client_id
        self.client_secret: str = settings.notion_client_secret

    def authorize_url(self, state: str, redirect_uri: str) -> str:
        """``<NOTION_BASE_URL>/v1/oauth/authorize?client_id=…&response_type=code&owner=user
        &redirect_uri=…&state=…``."""
        query = urlencode(
            {
                "client_id": self.client_id,
                "response_type": "code",
                "owner": "user",
                "redirect_uri": redirect_uri,
                "state": state,
            }
        )
        return f"{self.settings.notion_base_url.rstrip('/')}/v1/oauth/authorize?{query}"

    async def complete(
        self, code: str, redirect_uri: str, save: Callable[..., Awaitable[Mapping[str, Any]]]
    ) -> Installed:
        """Exchange ``code`` for the workspace's token and store it.

        Raises:
            InstallError: Notion refused the code or the client credentials.
        """
        client = AsyncClient(
            options=ClientOptions(
                base_url=self.settings.notion_base_url.rstrip("/"), notion_version=NOTION_VERSION, retry=False
            )
        )
        try:
            resp: Any = await client.oauth.token(
                client_id=self.client_id,
                client_secret=self.client_secret,
                grant_type="authorization_code",
                code=code,
                redirect_uri=redirect_uri,
            )
        except HTTPResponseError as exc:
            # OAuth errors come back as {"error": …} (not Notion's API error shape), which
            # notion-client raises as UnknownHTTPResponseError.
            try:
                error = json.loads(exc.body).get("error")
            except (ValueError, AttributeError):
                error = None
            raise InstallError(f"Notion refused the installation ({error or exc.status})") from None
        finally:
            await client.aclose()
        if not isinstance(resp, dict) or not resp.get("access_token") or not resp.get("workspace_id"):
            raise InstallError("Notion's answer carries no token or workspace")
        saved = await save(
            source_type="notion",
            external_id=str(resp["workspace_id"]),
            name=str(resp.get("workspace_name") or resp["workspace_id"]),
            credentials={"access_token": resp["access_token"], "bot_id": resp.get("bot_id")},
            origin="oauth",
            bot_user_id=resp.get("bot_id"),
        )
        return Installed(saved, {"workspace_name": resp.get("workspace_name") or ""})

    def success_page(self, installed: Installed) -> str:
        """A small HTML page: connected, and which workspace."""
        name = html.escape(str(installed.workspace.get("name") or ""))
        return _PAGE.format(
            title="Notion workspace connected",
            body=f"debounce now keeps a copy of the pages shared with it in {name}.",
        )

    def failure_page(self, reason: str) -> str:
        """A small HTML page saying why nothing was connected."""
        return _PAGE.format(
            title="Notion workspace not connected", body=html.escape(reason) + " Nothing was stored."
        )


def installer(settings: NotionSettings) -> NotionInstaller:
    """The Notion install flow (see :class:`NotionInstaller`)."""
    return NotionInstaller(settings)
