"""The Slack source as the service sees it (:class:`~debounce.contract.Source`): settings,
window, signing, and the factories of its webhook parser and its syncer. Its local stand-in
for ``serve --demo`` lives with the stand-ins (``standins/demos.py``), not here."""

from __future__ import annotations

import time
from typing import Any

from slack_sdk.signature import SignatureVerifier

from debounce.contract import ApiBudget, AuthRevoked, Identity, Source, SourceWindow
from integrations.slack.install import installer
from integrations.slack.render import SOURCE_TYPE
from integrations.slack.settings import SlackSettings
from integrations.slack.sync import create
from integrations.slack.webhook import SlackWebhooks

__all__ = ["DEMO_SECRET", "SOURCE", "identify", "sign"]

#: The signing secret of ``serve --demo``.
DEMO_SECRET = "demo-slack-signing-secret"


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` as Slack does (``X-Slack-Request-Timestamp`` and
    ``X-Slack-Signature: v0=…``, computed by slack_sdk's ``SignatureVerifier``;
    https://docs.slack.dev/authentication/verifying-requests-from-slack). ``timestamp``: Unix
    seconds, default now."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None  # None only when timestamp or body is None
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


async def identify(settings: SlackSettings, token: str) -> Identity:
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
    return Identity(
        external_id=str(data.get("team_id") or ""),
        name=str(data.get("team") or ""),
        bot_user_id=data.get("user_id"),
        enterprise_id=data.get("enterprise_id") or None,
    )


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
    webhooks=SlackWebhooks,
    settings_type=SlackSettings,
    env_prefix="SLACK",
    window=SourceWindow(30.0, 300.0),
    secret_setting="slack_signing_secret",
    demo_secret=DEMO_SECRET,
    sign=sign,
    # A job's page is a conversation: its id starts with C (channel), G (private channel or
    # group DM) or D (DM), then upper-case letters and digits (api.slack.com/docs/conversations-api).
    page_id_pattern=r"[CGD][A-Z0-9]+|canvas:F[A-Z0-9]+",
    page_id_form="a conversation id: C, G or D then upper-case letters and digits (e.g. C0123ABCD), "
    "or a canvas: canvas:<file id> (e.g. canvas:F0123ABCD)",
    token_setting="slack_bot_token",
    identify=identify,
    installer=installer,
    budget=BUDGET,
    # Off: a channel listing does not say what changed, so a reconciliation would cost a
    # conversations.history call per channel (Tier 3, or 1/min outside the Marketplace).
    reconcile_by_default=False,
    audiences=True,  # each document's conversation kind and members (docs/slack.md, "Audience")
    audience_labels={
        "public_channel": "Slack public channel",
        "private_channel": "Slack private channel",
        "mpim": "Slack group DM",
        "im": "Slack DM",
    },
)
