"""The Slack source as the service sees it (:class:`~integrations.base.Source`): settings,
window, signing, the demo stand-in, and the factory of its integration."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from slack_sdk.signature import SignatureVerifier

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
from integrations.slack.render import SOURCE_TYPE
from integrations.slack.sync import create

if TYPE_CHECKING:
    from debounce.config import Settings

from integrations.slack.install import installer

__all__ = ["DEMO_SECRET", "SOURCE", "identify", "sign"]

#: The signing secret of ``serve --demo``.
DEMO_SECRET = "demo-slack-signing-secret"
DEMO_TOKEN = "xoxb-debounce-demo"

SETTINGS = (
    SourceSetting("slack_client_id", "SLACK_CLIENT_ID", None, "str",
                  "the app's client id (\"Add to Slack\" install flow)"),
    SourceSetting("slack_client_secret", "SLACK_CLIENT_SECRET", None, "secret",
                  "the app's client secret"),
    SourceSetting("slack_scopes", "SLACK_SCOPES", None, "str",
                  "bot scopes asked at install, comma-separated (default: what the sync needs)"),
    SourceSetting("slack_authorize_url", "SLACK_AUTHORIZE_URL",
                  "https://slack.com/oauth/v2/authorize", "str", "Slack's authorize page"),
    SourceSetting("slack_bot_token", "SLACK_BOT_TOKEN", None, "secret", "Slack bot token"),
    SourceSetting("slack_api_url", "SLACK_API_URL", "https://slack.com/api/", "str",
                  "Slack Web API base URL"),
    SourceSetting("slack_signing_secret", "SLACK_SIGNING_SECRET", None, "secret",
                  "Slack app signing secret"),
    SourceSetting("slack_bot_user_id", "SLACK_BOT_USER_ID", None, "str",
                  "our own bot's user id (U…) or bot id (B…): its messages are not synced"),
    SourceSetting("slack_lookback_seconds", "SLACK_LOOKBACK_SECONDS", 3600.0, "seconds",
                  "history re-read before the watermark (edits, deletions)"),
)


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` as Slack does (``X-Slack-Request-Timestamp`` and
    ``X-Slack-Signature: v0=…``, computed by slack_sdk's ``SignatureVerifier``;
    https://docs.slack.dev/authentication/verifying-requests-from-slack). ``timestamp``: Unix
    seconds, default now."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None  # None only when timestamp or body is None
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature}


def demo() -> DemoSetup:
    """Start the local Slack Web API stand-in with demo content (``standins.slack_api``)."""
    from standins.server import BackgroundServer
    from standins.slack_api import (
        DEMO_SECOND_CHANNEL,
        DEMO_SECOND_TEAM_ID,
        DEMO_SECOND_TEAM_NAME,
        FakeSlack,
    )
    from standins.slack_api import DEMO_SECOND_TOKEN as SECOND_TOKEN

    fake = FakeSlack.demo(token=DEMO_TOKEN)
    server = BackgroundServer(fake.app())
    server.start()
    second = DemoWorkspace(
        external_id=DEMO_SECOND_TEAM_ID, name=DEMO_SECOND_TEAM_NAME, token=SECOND_TOKEN,
        event={"token": "demo", "team_id": DEMO_SECOND_TEAM_ID, "api_app_id": "A0DEBOUNCE1",
               "type": "event_callback", "event_id": "EvDemoSecondTeam1", "event_time": 1763690000,
               "event": {"type": "message", "channel": DEMO_SECOND_CHANNEL, "user": "U07LABS01",
                         "text": "demo", "ts": "1763690000.000100", "channel_type": "channel"}})
    return DemoSetup(settings={"slack_api_url": server.url + "/api/", "slack_bot_token": fake.token},
                     window=SourceWindow(2.0, 20.0),
                     examples=("message.json", "thread_reply.json", "message_changed.json"),
                     url=server.url + "/api/", stop=server.stop, workspaces=(second,))


async def identify(settings: Settings, token: str) -> Identity:
    """Who ``token`` is: ``auth.test`` (https://docs.slack.dev/reference/methods/auth.test) —
    the team's id and name, our bot's user id, the Grid org.

    Raises:
        AuthRevoked: ``invalid_auth``, ``token_revoked`` and the like.
        slack_sdk.errors.SlackApiError: another error answer.
    """
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from integrations.slack.client import AUTH_ERRORS

    client = AsyncWebClient(token=token, base_url=settings.slack_api_url)
    try:
        data: Any = (await client.auth_test()).data
    except SlackApiError as exc:
        code = exc.response.get("error") if exc.response is not None else None
        if code in AUTH_ERRORS:
            raise AuthRevoked(f"Slack refused the token: {code}") from exc
        raise
    finally:
        session = getattr(client, "session", None)
        if session is not None and not session.closed:
            await session.close()
    return Identity(external_id=str(data.get("team_id") or ""), name=str(data.get("team") or ""),
                    bot_user_id=data.get("user_id"), enterprise_id=data.get("enterprise_id") or None)


#: Each team's default API budget. Slack limits each Web API method per workspace per app;
#: ``conversations.history`` and ``conversations.replies`` are Tier 3, about 50 per minute, for
#: internal and Marketplace apps (https://docs.slack.dev/apis/web-api/rate-limits). One bucket
#: covers every method a sync sends: 45 per minute with a burst of 5 keeps any 60 s at 50. A
#: commercially distributed app outside the Marketplace gets 1 per minute for those methods:
#: set ``SLACK_BUDGET_PER_MINUTE=1`` (and ``SLACK_BUDGET_BURST=1``).
BUDGET = ApiBudget(per_minute=45.0, burst=5.0)

SOURCE = Source(
    source_type=SOURCE_TYPE,
    create=create,
    settings=SETTINGS,
    env_prefix="SLACK",
    window=SourceWindow(30.0, 300.0),
    secret_setting="slack_signing_secret",
    demo_secret=DEMO_SECRET,
    sign=sign,
    demo=demo,
    token_setting="slack_bot_token",
    identify=identify,
    installer=installer,
    budget=BUDGET,
    # Off: a channel listing does not say what changed, so a sweep would cost a
    # conversations.history call per channel (Tier 3, or 1/min outside the Marketplace).
    reconcile_by_default=False,
)
