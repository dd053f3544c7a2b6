"""Slack's "Add to Slack" install flow, with ``slack_sdk.oauth``: ``AuthorizeUrlGenerator``
for the authorize URL, ``oauth.v2.access`` for the token, an ``AsyncInstallationStore`` on our
Postgres (:class:`WorkspaceInstallationStore`), ``RedirectUriPageRenderer`` for the pages.
https://docs.slack.dev/authentication/installing-with-oauth
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.oauth import AuthorizeUrlGenerator, RedirectUriPageRenderer
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.web.async_client import AsyncWebClient

from debounce.contract import Installed, InstallError
from integrations.slack.settings import SlackSettings

__all__ = ["DEFAULT_SCOPES", "SlackInstaller", "WorkspaceInstallationStore", "installer"]

#: Bot scopes the sync needs (history of public and private channels, DMs, group DMs, the
#: channel lists, the files messages share: ``url_private`` and ``files.info``, and canvases:
#: ``canvases.getContent``): https://docs.slack.dev/reference/scopes
DEFAULT_SCOPES = (
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "channels:read",
    "groups:read",
    "im:read",
    "mpim:read",
    "files:read",
    "canvases:read",
)


class WorkspaceInstallationStore(AsyncInstallationStore):
    """``slack_sdk``'s installation store, kept in debounce's ``workspaces`` table (credentials
    encrypted by ``save``). Only the bot installation matters here: we sync with the bot token."""

    def __init__(self, save: Callable[..., Awaitable[Mapping[str, Any]]]) -> None:
        self._save = save
        self.saved: Mapping[str, Any] | None = None

    async def async_save(self, installation: Installation) -> None:
        """Store the team's bot token as its workspace (re-install: replaced, reactivated)."""
        if not installation.bot_token or not installation.team_id:
            raise InstallError("Slack's answer carries no bot token or team")
        self.saved = await self._save(
            source_type="slack",
            external_id=installation.team_id,
            name=installation.team_name or installation.team_id,
            credentials={
                "access_token": installation.bot_token,
                "bot_user_id": installation.bot_user_id,
                "scopes": list(installation.bot_scopes or []),
            },
            origin="oauth",
            enterprise_id=installation.enterprise_id,
            bot_user_id=installation.bot_user_id,
        )

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        """Not used: the worker reads credentials through ``debounce.workspaces``."""
        return None

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """Not used: the worker reads credentials through ``debounce.workspaces``."""
        return None


class SlackInstaller:
    """The install flow of one deployment's Slack app (``SLACK_CLIENT_ID``,
    ``SLACK_CLIENT_SECRET``, ``SLACK_SCOPES``)."""

    def __init__(self, settings: SlackSettings) -> None:
        if not settings.slack_client_id or not settings.slack_client_secret:
            raise InstallError(
                "the Slack install flow is not configured: set SLACK_CLIENT_ID "
                "and SLACK_CLIENT_SECRET (the app's Basic Information page)"
            )
        self.settings = settings
        self.client_id: str = settings.slack_client_id
        self.client_secret: str = settings.slack_client_secret
        scopes = [s.strip() for s in (settings.slack_scopes or "").split(",") if s.strip()]
        self.scopes = scopes or list(DEFAULT_SCOPES)
        self.pages = RedirectUriPageRenderer(
            install_path="/slack/install", redirect_uri_path="/slack/oauth_redirect"
        )

    def authorize_url(self, state: str, redirect_uri: str) -> str:
        """Slack's authorize URL for ``state`` (``settings.slack_authorize_url`` points it at
        a stand-in in tests)."""
        return AuthorizeUrlGenerator(
            client_id=self.client_id,
            redirect_uri=redirect_uri,
            scopes=self.scopes,
            authorization_url=self.settings.slack_authorize_url,
        ).generate(state)

    async def complete(
        self, code: str, redirect_uri: str, save: Callable[..., Awaitable[Mapping[str, Any]]]
    ) -> Installed:
        """Exchange ``code`` (``oauth.v2.access``) and store the installation.

        Raises:
            InstallError: Slack refused the code or the client credentials.
        """
        client = AsyncWebClient(base_url=self.settings.slack_api_url)
        try:
            resp: Any = (
                await client.oauth_v2_access(
                    client_id=self.client_id,
                    client_secret=self.client_secret,
                    code=code,
                    redirect_uri=redirect_uri,
                )
            ).data
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise InstallError(f"Slack refused the installation ({error or 'error'})") from None
        team = resp.get("team") or {}
        enterprise = resp.get("enterprise") or {}
        installation = Installation(
            app_id=resp.get("app_id"),
            enterprise_id=enterprise.get("id"),
            enterprise_name=enterprise.get("name"),
            team_id=team.get("id"),
            team_name=team.get("name"),
            bot_token=resp.get("access_token"),
            bot_id=resp.get("bot_id"),
            bot_user_id=resp.get("bot_user_id"),
            bot_scopes=resp.get("scope") or "",
            user_id=(resp.get("authed_user") or {}).get("id") or "",
            is_enterprise_install=bool(resp.get("is_enterprise_install")),
            token_type=resp.get("token_type"),
        )
        store = WorkspaceInstallationStore(save)
        await store.async_save(installation)
        assert store.saved is not None
        return Installed(
            store.saved,
            {
                "app_id": resp.get("app_id") or "",
                "team_id": team.get("id"),
                "is_enterprise_install": installation.is_enterprise_install,
            },
        )

    def success_page(self, installed: Installed) -> str:
        """``RedirectUriPageRenderer``'s success page."""
        details = installed.details
        return self.pages.render_success_page(
            app_id=str(details.get("app_id") or ""),
            team_id=details.get("team_id"),
            is_enterprise_install=bool(details.get("is_enterprise_install")),
        )

    def failure_page(self, reason: str) -> str:
        """``RedirectUriPageRenderer``'s failure page."""
        return self.pages.render_failure_page(reason)


def installer(settings: SlackSettings) -> SlackInstaller:
    """The Slack install flow (see :class:`SlackInstaller`)."""
    return SlackInstaller(settings)
