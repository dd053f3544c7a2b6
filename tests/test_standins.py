"""The stand-ins' workspaces, tokens and OAuth, through the real SDKs on loopback.

``notion_client.AsyncClient`` against :class:`standins.notion_api.FakeNotion` and
``slack_sdk``'s ``AsyncWebClient`` against :class:`standins.slack_api.FakeSlack`: each workspace
or team sees only its own pages and conversations, a Slack Connect channel is seen by both of
its teams, ``users/me`` and ``auth.test`` answer the documented shapes, OAuth codes exchange once
for a working token, and revoked tokens stop working. No database, no service code.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from notion_client import AsyncClient
from notion_client.errors import APIResponseError, UnknownHTTPResponseError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from standins.notion_api import (
    DEMO_PAGE_ID,
    DEMO_SECOND_PAGE_ID,
    DEMO_SECOND_TOKEN,
    DEMO_SECOND_WORKSPACE_ID,
    DEMO_TOKEN,
    FakeNotion,
    paragraph,
)
from standins.server import BackgroundServer
from standins.slack_api import (
    DEMO_SECOND_CHANNEL,
    DEMO_SECOND_TEAM_ID,
    FakeSlack,
)
from standins.slack_api import DEMO_SECOND_TOKEN as SLACK_SECOND_TOKEN
from standins.slack_teams import DEFAULT_TEAM_ID

N_TOKEN_A = "secret_workspace_a"
N_TOKEN_B = "secret_workspace_b"
WORKSPACE_B = "0a3c5e7f-1b2d-4f6a-8c9e-2d4f6a8c0e1b"
CLIENT_ID = "2a1b3c4d-notion-client"
CLIENT_SECRET = "secret_client_secret"
REDIRECT = "https://debounce.example/oauth/notion/callback"

S_TOKEN_A = "xoxb-team-a"
S_TOKEN_B = "xoxb-team-b"
TEAM_B = "T0BETA0001"
SLACK_REDIRECT = "https://debounce.example/oauth/slack/callback"


# --------------------------------------------------------------------------------------------
# Notion
# --------------------------------------------------------------------------------------------


@pytest.fixture
def notion_fake() -> FakeNotion:
    fake = FakeNotion(token=N_TOKEN_A)
    fake.add_workspace(WORKSPACE_B, "Beta Corp", N_TOKEN_B, icon="https://example.com/beta.png")
    return fake


@pytest.fixture
def notion_url(notion_fake: FakeNotion) -> Iterator[str]:
    with BackgroundServer(notion_fake.app()) as server:
        yield server.url


@pytest.fixture
async def notion_clients(notion_url: str) -> AsyncIterator[dict[str, AsyncClient]]:
    clients = {
        name: AsyncClient(auth=token, base_url=notion_url)
        for name, token in (("a", N_TOKEN_A), ("b", N_TOKEN_B), ("none", None))
    }
    yield clients
    for client in clients.values():
        await client.aclose()


async def _notion_error(call: Any) -> APIResponseError:
    with pytest.raises(APIResponseError) as caught:
        await call
    return caught.value


async def test_notion_workspaces_see_only_their_own_objects(
    notion_fake: FakeNotion, notion_clients: dict[str, AsyncClient]
) -> None:
    """Another workspace's page, block, database or data source answers exactly what Notion
    answers for a page not shared with the integration: 404 ``object_not_found``
    (https://developers.notion.com/reference/status-codes)."""
    a_page = notion_fake.add_page(title="Alpha plan", blocks=[paragraph("alpha")])
    b_page = notion_fake.add_page(title="Beta plan", blocks=[paragraph("beta")], workspace_id=WORKSPACE_B)
    b_child = notion_fake.add_page(title="Beta child", parent={"type": "page_id", "page_id": b_page})
    b_db = notion_fake.add_database(title="Beta tasks", workspace_id=WORKSPACE_B)
    b_ds = notion_fake.databases[b_db]["data_sources"][0]["id"]
    b_block = notion_fake.children[b_page][0]
    assert notion_fake.workspace_of(a_page) == notion_fake.workspace_id
    assert notion_fake.workspace_of(b_child) == WORKSPACE_B  # inherited from its parent
    assert notion_fake.workspace_of(b_block) == WORKSPACE_B
    a, b = notion_clients["a"], notion_clients["b"]

    assert (await a.pages.retrieve(page_id=a_page))["id"] == a_page
    assert (await b.pages.retrieve(page_id=b_page))["id"] == b_page
    assert (await b.blocks.children.list(block_id=b_page))["results"][0]["id"] == b_block
    assert (await b.databases.retrieve(database_id=b_db))["id"] == b_db
    assert (await b.data_sources.retrieve(data_source_id=b_ds))["id"] == b_ds

    unknown = await _notion_error(a.pages.retrieve(page_id="00000000-0000-4000-8000-000000000000"))
    for call in (
        a.pages.retrieve(page_id=b_page),
        a.pages.retrieve(page_id=b_child),
        a.pages.retrieve(page_id=b_db),  # not "is a database": it is not there at all
        a.blocks.retrieve(block_id=b_block),
        a.blocks.children.list(block_id=b_page),
        a.databases.retrieve(database_id=b_db),
        a.data_sources.retrieve(data_source_id=b_ds),
        b.pages.retrieve(page_id=a_page),
    ):
        error = await _notion_error(call)
        assert (error.status, error.code) == (unknown.status, unknown.code) == (404, "object_not_found")
        body = json.loads(error.body)
        assert body["object"] == "error" and "shared with your integration" in body["message"]


async def test_notion_unknown_or_missing_token_is_unauthorized(
    notion_fake: FakeNotion, notion_url: str, notion_clients: dict[str, AsyncClient]
) -> None:
    """No token or an unknown one: 401 ``unauthorized`` ("The bearer token is not valid",
    https://developers.notion.com/reference/status-codes)."""
    page = notion_fake.add_page(title="Alpha plan")
    async with AsyncClient(auth="secret_nobody", base_url=notion_url) as stranger:
        for call in (
            stranger.pages.retrieve(page_id=page),
            stranger.users.me(),
            notion_clients["none"].pages.retrieve(page_id=page),
        ):
            error = await _notion_error(call)
            assert (error.status, error.code) == (401, "unauthorized")


async def test_notion_users_me_is_the_tokens_bot(
    notion_fake: FakeNotion, notion_clients: dict[str, AsyncClient]
) -> None:
    """``GET /v1/users/me`` answers the token's bot user
    (https://developers.notion.com/reference/get-self) in the user object's bot shape
    (https://developers.notion.com/reference/user, "Bots")."""
    me_a = await notion_clients["a"].users.me()
    me_b = await notion_clients["b"].users.me()
    assert me_a["object"] == "user" and me_a["type"] == "bot"
    assert set(me_a) >= {"object", "id", "name", "avatar_url", "type", "bot"}
    assert me_a["bot"] == {
        "owner": {"type": "workspace", "workspace": True},
        "workspace_name": "Debounce Demo",
        "workspace_id": notion_fake.workspace_id,
        "workspace_limits": {"max_file_upload_size_in_bytes": 5 * 1024 * 1024},
    }
    assert me_b["bot"]["workspace_id"] == WORKSPACE_B
    assert me_b["bot"]["workspace_name"] == "Beta Corp"
    assert me_a["id"] == notion_fake.workspaces[notion_fake.workspace_id].bot_id
    assert me_b["id"] == notion_fake.workspaces[WORKSPACE_B].bot_id != me_a["id"]
    assert notion_fake.calls["users.me"] == 2


async def test_notion_oauth_code_exchanges_once_for_a_token_of_its_workspace(
    notion_fake: FakeNotion, notion_url: str
) -> None:
    """``POST /v1/oauth/token`` (https://developers.notion.com/reference/create-a-token) as
    ``oauth.token`` sends it (HTTP Basic client credentials, JSON body): the answered token
    reads its workspace's pages and no others; the code then is spent (400 ``invalid_grant``,
    OAuth 2.0's error shape, RFC 6749 §5.2)."""
    a_page = notion_fake.add_page(title="Alpha plan")
    b_page = notion_fake.add_page(title="Beta plan", workspace_id=WORKSPACE_B)
    notion_fake.oauth_client(CLIENT_ID, CLIENT_SECRET)
    notion_fake.authorization_code("code-beta", WORKSPACE_B, redirect_uri=REDIRECT)
    async with AsyncClient(base_url=notion_url) as anonymous:

        async def exchange(**overrides: str) -> dict[str, Any]:
            args = {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "grant_type": "authorization_code",
                "code": "code-beta",
                "redirect_uri": REDIRECT,
                **overrides,
            }
            answer: dict[str, Any] = await anonymous.oauth.token(**args)
            return answer

        async def oauth_error(**overrides: str) -> tuple[int, dict[str, Any]]:
            with pytest.raises(UnknownHTTPResponseError) as caught:
                await exchange(**overrides)
            return caught.value.status, json.loads(caught.value.body)

        status, body = await oauth_error(client_secret="wrong")
        assert (status, body["error"]) == (401, "invalid_client")
        assert set(body) == {"error", "error_description", "request_id"}
        status, body = await oauth_error(client_id="someone-else")
        assert (status, body["error"]) == (401, "invalid_client")
        status, body = await oauth_error(redirect_uri="https://evil.example/cb")
        assert (status, body["error"]) == (400, "invalid_grant")
        status, body = await oauth_error(code="never-issued")
        assert (status, body["error"]) == (400, "invalid_grant")

        token = await exchange()  # the failed attempts did not spend the code
        assert set(token) == {
            "access_token",
            "token_type",
            "bot_id",
            "workspace_id",
            "workspace_name",
            "workspace_icon",
            "owner",
            "duplicated_template_id",
            "request_id",
        }
        assert token["token_type"] == "bearer"
        assert token["workspace_id"] == WORKSPACE_B
        assert token["workspace_name"] == "Beta Corp"
        assert token["workspace_icon"] == "https://example.com/beta.png"
        assert token["owner"] == {"type": "workspace", "workspace": True}
        assert token["duplicated_template_id"] is None

        status, body = await oauth_error()  # single use
        assert (status, body["error"]) == (400, "invalid_grant")

    async with AsyncClient(auth=token["access_token"], base_url=notion_url) as installed:
        assert (await installed.pages.retrieve(page_id=b_page))["id"] == b_page
        assert (await _notion_error(installed.pages.retrieve(page_id=a_page))).status == 404
        me = await installed.users.me()
        assert me["id"] == token["bot_id"]
        assert me["bot"]["workspace_id"] == WORKSPACE_B
    assert notion_fake.calls["oauth.token"] == 6


async def test_notion_revoked_token_is_unauthorized(
    notion_fake: FakeNotion, notion_clients: dict[str, AsyncClient]
) -> None:
    """A revoked token answers 401 ``unauthorized`` from then on; other tokens still work."""
    b_page = notion_fake.add_page(title="Beta plan", workspace_id=WORKSPACE_B)
    a, b = notion_clients["a"], notion_clients["b"]
    assert (await b.pages.retrieve(page_id=b_page))["id"] == b_page
    notion_fake.revoke(N_TOKEN_B)
    for call in (b.pages.retrieve(page_id=b_page), b.users.me()):
        error = await _notion_error(call)
        assert (error.status, error.code) == (401, "unauthorized")
    assert (await a.users.me())["bot"]["workspace_id"] == notion_fake.workspace_id


async def test_notion_demo_has_two_workspaces() -> None:
    """``FakeNotion.demo()``: the default workspace's content plus a second workspace with a
    token and a page of its own."""
    fake = FakeNotion.demo()
    assert set(fake.workspaces) == {fake.workspace_id, DEMO_SECOND_WORKSPACE_ID}
    with BackgroundServer(fake.app()) as server:
        async with (
            AsyncClient(auth=DEMO_TOKEN, base_url=server.url) as first,
            AsyncClient(auth=DEMO_SECOND_TOKEN, base_url=server.url) as second,
        ):
            assert (await first.pages.retrieve(page_id=DEMO_PAGE_ID))["id"] == DEMO_PAGE_ID
            assert (await second.pages.retrieve(page_id=DEMO_SECOND_PAGE_ID))["id"] == (DEMO_SECOND_PAGE_ID)
            assert (await second.blocks.children.list(block_id=DEMO_SECOND_PAGE_ID))["results"]
            assert (await _notion_error(first.pages.retrieve(page_id=DEMO_SECOND_PAGE_ID))).status == 404
            assert (await _notion_error(second.pages.retrieve(page_id=DEMO_PAGE_ID))).status == 404
            assert (await second.users.me())["bot"]["workspace_name"] == "Debounce Labs"


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


@pytest.fixture
def slack_fake() -> FakeSlack:
    fake = FakeSlack(token=S_TOKEN_A)
    fake.add_team(TEAM_B, "Beta Corp", S_TOKEN_B, "U0BETABOT", enterprise_id="E0GRID0001")
    return fake


@pytest.fixture
def slack_url(slack_fake: FakeSlack) -> Iterator[str]:
    with BackgroundServer(slack_fake.app()) as server:
        yield f"{server.url}/api/"


def _slack(token: str | None, url: str) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=url)


async def _slack_error(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        await call
    assert caught.value.response.status_code == 200  # Slack's errors are HTTP 200
    return caught.value


async def test_slack_teams_see_only_their_own_conversations(slack_fake: FakeSlack, slack_url: str) -> None:
    """Another team's conversation answers ``channel_not_found``
    (https://docs.slack.dev/reference/methods/conversations.history and
    .../conversations.replies, "Errors"), like one that does not exist."""
    root_a = slack_fake.post("C0ALPHA01", "alpha root")
    slack_fake.reply("C0ALPHA01", root_a, "alpha reply")
    root_b = slack_fake.post("C0BETA001", "beta root", team_id=TEAM_B)
    assert slack_fake.channel_teams("C0BETA001") == {TEAM_B}
    a, b = _slack(S_TOKEN_A, slack_url), _slack(S_TOKEN_B, slack_url)

    history = await a.conversations_history(channel="C0ALPHA01")
    assert [m["text"] for m in history["messages"]] == ["alpha root"]
    replies = await a.conversations_replies(channel="C0ALPHA01", ts=root_a)
    assert [m["text"] for m in replies["messages"]] == ["alpha root", "alpha reply"]
    history = await b.conversations_history(channel="C0BETA001")
    assert [m["text"] for m in history["messages"]] == ["beta root"]

    for call in (
        a.conversations_history(channel="C0BETA001"),
        a.conversations_replies(channel="C0BETA001", ts=root_b),
        b.conversations_history(channel="C0ALPHA01"),
        b.conversations_replies(channel="C0ALPHA01", ts=root_a),
        a.conversations_history(channel="C0NOWHERE"),
    ):
        assert (await _slack_error(call)).response["error"] == "channel_not_found"
    with pytest.raises(ValueError, match="share"):
        slack_fake.post("C0ALPHA01", "from beta?", team_id=TEAM_B)


async def test_slack_shared_channel_is_seen_by_both_teams(slack_fake: FakeSlack, slack_url: str) -> None:
    """A Slack Connect channel (https://docs.slack.dev/apis/slack-connect/) belongs to both
    teams: either team's token reads it."""
    root = slack_fake.post("C0SHARED1", "shared root", team_id=TEAM_B)
    slack_fake.share("C0SHARED1", DEFAULT_TEAM_ID)
    slack_fake.reply("C0SHARED1", root, "a reply from the other side")
    slack_fake.post("C0SHARED1", "posted as team A", team_id=DEFAULT_TEAM_ID)
    assert slack_fake.channel_teams("C0SHARED1") == {DEFAULT_TEAM_ID, TEAM_B}
    for token in (S_TOKEN_A, S_TOKEN_B):
        client = _slack(token, slack_url)
        history = await client.conversations_history(channel="C0SHARED1")
        assert [m["text"] for m in history["messages"]] == ["posted as team A", "shared root"]
        replies = await client.conversations_replies(channel="C0SHARED1", ts=root)
        assert len(replies["messages"]) == 2


async def test_slack_auth_test_answers_each_tokens_team(slack_fake: FakeSlack, slack_url: str) -> None:
    """``auth.test`` (https://docs.slack.dev/reference/methods/auth.test) names the token's
    team, bot user and bot; ``enterprise_id`` only for a team of an Enterprise Grid."""
    a = await _slack(S_TOKEN_A, slack_url).auth_test()
    assert a.data == {
        "ok": True,
        "url": "https://debounce-demo.slack.com/",
        "team": "Debounce Demo",
        "user": "debounce",
        "team_id": DEFAULT_TEAM_ID,
        "user_id": "U0BOTUSER",
        "bot_id": "B0DEBOUNCE",
        "is_enterprise_install": False,
    }
    b = await _slack(S_TOKEN_B, slack_url).auth_test()
    assert b.data == {
        "ok": True,
        "url": "https://beta-corp.slack.com/",
        "team": "Beta Corp",
        "user": "debounce",
        "team_id": TEAM_B,
        "user_id": "U0BETABOT",
        "bot_id": "B0BETA0001",
        "enterprise_id": "E0GRID0001",
        "is_enterprise_install": False,
    }


async def test_slack_oauth_v2_access_exchanges_a_code_once(slack_fake: FakeSlack, slack_url: str) -> None:
    """``oauth.v2.access`` (https://docs.slack.dev/reference/methods/oauth.v2.access) as
    ``oauth_v2_access`` sends it (HTTP Basic client credentials) and with form-field
    credentials; its errors ``invalid_client_id``, ``bad_client_secret``, ``bad_redirect_uri``,
    ``invalid_code`` (a used code too)."""
    slack_fake.post("C0BETA001", "beta root", team_id=TEAM_B)
    slack_fake.oauth_client("1111.2222", "client-secret")
    slack_fake.authorization_code("code-b", TEAM_B, redirect_uri=SLACK_REDIRECT, user_id="U0ADMIN")
    anonymous = _slack(None, slack_url)

    async def exchange(**overrides: str) -> Any:
        args = {
            "client_id": "1111.2222",
            "client_secret": "client-secret",
            "code": "code-b",
            "redirect_uri": SLACK_REDIRECT,
            **overrides,
        }
        return await anonymous.oauth_v2_access(**args)

    for overrides, error in (
        ({"client_id": "9999.0000"}, "invalid_client_id"),
        ({"client_secret": "wrong"}, "bad_client_secret"),
        ({"redirect_uri": "https://evil.example/cb"}, "bad_redirect_uri"),
        ({"code": "never-issued"}, "invalid_code"),
    ):
        assert (await _slack_error(exchange(**overrides))).response["error"] == error

    answer = (await exchange()).data
    assert answer == {
        "ok": True,
        "app_id": slack_fake.app_id,
        "authed_user": {"id": "U0ADMIN"},
        "scope": "channels:history,groups:history,im:history,mpim:history",
        "token_type": "bot",
        "access_token": S_TOKEN_B,  # the team's bot token: one installation, one bot token
        "bot_user_id": "U0BETABOT",
        "team": {"id": TEAM_B, "name": "Beta Corp"},
        "enterprise": {"id": "E0GRID0001", "name": "Org E0GRID0001"},
        "is_enterprise_install": False,
    }
    assert (await _slack_error(exchange())).response["error"] == "invalid_code"  # single use

    # Credentials as form fields (the method accepts both), for a team without Grid.
    slack_fake.authorization_code("code-a", DEFAULT_TEAM_ID)
    form = await anonymous.api_call(
        "oauth.v2.access",
        data={"client_id": "1111.2222", "client_secret": "client-secret", "code": "code-a"},
    )
    assert form["team"] == {"id": DEFAULT_TEAM_ID, "name": "Debounce Demo"}
    assert form["enterprise"] is None and form["access_token"] == S_TOKEN_A
    installed = _slack(answer["access_token"], slack_url)
    assert (await installed.auth_test())["team_id"] == TEAM_B
    assert (await installed.conversations_history(channel="C0BETA001"))["messages"]


async def test_slack_revoked_and_unknown_tokens(slack_fake: FakeSlack, slack_url: str) -> None:
    """A revoked token answers ``token_revoked``, an unknown one ``invalid_auth``
    (https://docs.slack.dev/reference/methods/auth.test, "Errors"); reinstalling the app
    after a revocation gives the team a new bot token."""
    slack_fake.post("C0BETA001", "beta root", team_id=TEAM_B)
    assert (await _slack_error(_slack("xoxb-nobody", slack_url).auth_test())).response[
        "error"
    ] == "invalid_auth"
    slack_fake.revoke(S_TOKEN_B)
    b = _slack(S_TOKEN_B, slack_url)
    for call in (b.auth_test(), b.conversations_history(channel="C0BETA001")):
        assert (await _slack_error(call)).response["error"] == "token_revoked"
    assert (await _slack(S_TOKEN_A, slack_url).auth_test())["team_id"] == DEFAULT_TEAM_ID

    slack_fake.oauth_client("1111.2222", "client-secret")
    slack_fake.authorization_code("reinstall", TEAM_B)
    answer = await _slack(None, slack_url).oauth_v2_access(
        client_id="1111.2222", client_secret="client-secret", code="reinstall"
    )
    assert answer["access_token"] not in (S_TOKEN_B, S_TOKEN_A)
    assert answer["access_token"].startswith("xoxb-")
    assert slack_fake.teams[TEAM_B].token == answer["access_token"]
    fresh = _slack(answer["access_token"], slack_url)
    assert (await fresh.conversations_history(channel="C0BETA001"))["messages"]


async def test_slack_any_token_default_team_still_keeps_teams_apart() -> None:
    """``FakeSlack(token=None)`` accepts any bot token as the default team's, but another
    team's token is that team's, and a revoked one is revoked."""
    fake = FakeSlack(token=None)
    fake.add_team(TEAM_B, "Beta Corp", S_TOKEN_B, "U0BETABOT")
    fake.post("C0ALPHA01", "alpha root")
    with BackgroundServer(fake.app()) as server:
        url = f"{server.url}/api/"
        assert (await _slack("xoxb-anything", url).auth_test())["team_id"] == DEFAULT_TEAM_ID
        assert (await _slack("xoxb-anything", url).conversations_history(channel="C0ALPHA01"))["messages"]
        error = await _slack_error(_slack(S_TOKEN_B, url).conversations_history(channel="C0ALPHA01"))
        assert error.response["error"] == "channel_not_found"
        fake.revoke("xoxb-anything")
        error = await _slack_error(_slack("xoxb-anything", url).auth_test())
        assert error.response["error"] == "token_revoked"


async def test_slack_demo_has_two_teams() -> None:
    """``FakeSlack.demo()``: the default team's conversations plus a second team with a bot
    token and a channel of its own."""
    fake = FakeSlack.demo(token="xoxb-demo")
    assert set(fake.teams) == {DEFAULT_TEAM_ID, DEMO_SECOND_TEAM_ID}
    with BackgroundServer(fake.app()) as server:
        url = f"{server.url}/api/"
        first, second = _slack("xoxb-demo", url), _slack(SLACK_SECOND_TOKEN, url)
        assert (await second.auth_test())["team_id"] == DEMO_SECOND_TEAM_ID
        history = await second.conversations_history(channel=DEMO_SECOND_CHANNEL)
        assert len(history["messages"]) == 1 and history["messages"][0]["reply_count"] == 1
        assert (await first.conversations_history(channel="C2147483705"))["messages"]
        for call in (
            first.conversations_history(channel=DEMO_SECOND_CHANNEL),
            second.conversations_history(channel="C2147483705"),
        ):
            assert (await _slack_error(call)).response["error"] == "channel_not_found"
