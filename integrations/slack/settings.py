"""The Slack source's settings, typed (read from the environment by the service with
the parsers of :mod:`debounce.contract.settings`; see ``Source.settings_type``)."""

from __future__ import annotations

from dataclasses import dataclass

from debounce.contract import setting

__all__ = ["SlackSettings"]


@dataclass(frozen=True)
class SlackSettings:
    """What the Slack source reads from the environment (``None``: unset)."""

    slack_client_id: str | None = setting(
        "SLACK_CLIENT_ID", help='the app\'s client id ("Add to Slack" install flow)'
    )
    slack_client_secret: str | None = setting(
        "SLACK_CLIENT_SECRET", kind="secret", help="the app's client secret"
    )
    slack_scopes: str | None = setting(
        "SLACK_SCOPES", help="bot scopes asked at install, comma-separated (default: what the sync needs)"
    )
    slack_authorize_url: str = setting(
        "SLACK_AUTHORIZE_URL", "https://slack.com/oauth/v2/authorize", help="Slack's authorize page"
    )
    slack_bot_token: str | None = setting("SLACK_BOT_TOKEN", kind="secret", help="Slack bot token")
    slack_api_url: str = setting("SLACK_API_URL", "https://slack.com/api/", help="Slack Web API base URL")
    slack_signing_secret: str | None = setting(
        "SLACK_SIGNING_SECRET", kind="secret", help="Slack app signing secret"
    )
    slack_bot_user_id: str | None = setting(
        "SLACK_BOT_USER_ID", help="our own bot's user id (U…) or bot id (B…): its messages are not synced"
    )
    slack_lookback_seconds: float = setting(
        "SLACK_LOOKBACK_SECONDS",
        3600.0,
        kind="seconds",
        help="history re-read before the watermark (edits, deletions)",
    )
    slack_audience_max_age_seconds: float = setting(
        "SLACK_AUDIENCE_MAX_AGE_SECONDS",
        86400.0,
        kind="seconds",
        help="a conversation's cached kind and members older than this are listed again by "
        "the next sync (member events refresh them sooner)",
    )
