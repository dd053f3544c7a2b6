"""The stand-ins' listings through the real SDKs on loopback: Notion ``POST /v1/search``
(``notion_client.AsyncClient.search``) and Slack ``users.conversations`` /
``conversations.list`` (``AsyncWebClient``), their documented shapes, validation and paging,
and the bulk fixtures that feed the discovery tests and benchmarks. No database, no service
code."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from notion_client import AsyncClient
from notion_client.client import ClientOptions
from notion_client.errors import APIResponseError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from standins.notion_api import FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

N_TOKEN = "secret_listing_a"
N_TOKEN_B = "secret_listing_b"
WORKSPACE_B = "5b1f7c1e-3a6d-4e2b-9c8f-0d1e2f3a4b5c"
S_TOKEN = "xoxb-listing-a"
S_TOKEN_B = "xoxb-listing-b"
TEAM_B = "T0LISTB001"


# --------------------------------------------------------------------------------------------
# Notion
# --------------------------------------------------------------------------------------------


@pytest.fixture
def notion() -> FakeNotion:
    fake = FakeNotion(token=N_TOKEN)
    fake.add_workspace(WORKSPACE_B, "Beta", N_TOKEN_B)
    return fake


@pytest.fixture
def notion_url(notion: FakeNotion) -> Iterator[str]:
    with BackgroundServer(notion.app()) as server:
        yield server.url


@pytest.fixture
async def api(notion_url: str) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(options=ClientOptions(auth=N_TOKEN, base_url=notion_url, retry=False))
    yield client
    await client.aclose()


async def search_all(api: AsyncClient, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor: str | None = params.pop("start_cursor", None)
    while True:
        answer: Any = await api.search(**params, start_cursor=cursor)
        found += answer["results"]
        if not answer["has_more"]:
            assert answer["next_cursor"] is None
            return found
        cursor = answer["next_cursor"]


def test_add_pages_builds_two_thousand_pages_with_distinct_ordered_edit_times() -> None:
    # No timed assertion (it failed under load on 2 cores): the cost is the benchmarks' to measure.
    fake = FakeNotion()
    ids = fake.add_pages(2000, blocks=3)
    assert len(set(ids)) == 2000 and len(fake.children[ids[0]]) == 3
    times = [fake.pages[i]["last_edited_time"] for i in ids]
    assert len(set(times)) == 2000 and times == sorted(times)


async def test_search_answers_the_documented_list_of_pages_and_data_sources(
    notion: FakeNotion, api: AsyncClient
) -> None:
    pages = notion.add_pages(3, title="Note")
    db = notion.add_database(title="Tasks", last_edited_time="2027-01-01T00:00:00.000Z")
    ds = notion.databases[db]["data_sources"][0]["id"]
    answer: Any = await api.search()
    assert set(answer) >= {"object", "results", "next_cursor", "has_more", "type", "page_or_data_source"}
    assert (answer["object"], answer["type"], answer["page_or_data_source"]) == (
        "list",
        "page_or_data_source",
        {},
    )
    assert answer["has_more"] is False and answer["next_cursor"] is None
    by_id = {r["id"]: r for r in answer["results"]}
    assert set(by_id) == {*pages, ds}  # data sources, not databases
    assert by_id[pages[0]] == notion.pages[pages[0]]  # as GET /v1/pages/{id} answers
    assert by_id[ds]["object"] == "data_source"
    assert notion.calls["search"] == 1
    only_ds: Any = await api.search(filter={"property": "object", "value": "data_source"})
    assert [r["id"] for r in only_ds["results"]] == [ds]
    titled: Any = await api.search(query="note 1")
    assert [r["id"] for r in titled["results"]] == [pages[1]]


async def test_search_sorts_by_last_edit_and_pages_with_cursors(notion: FakeNotion, api: AsyncClient) -> None:
    ids = notion.add_pages(7)
    newest = [
        r["id"]
        for r in await search_all(
            api, page_size=3, sort={"direction": "descending", "timestamp": "last_edited_time"}
        )
    ]
    assert newest == ids[::-1]
    oldest = [
        r["id"]
        for r in await search_all(
            api, page_size=3, sort={"direction": "ascending", "timestamp": "last_edited_time"}
        )
    ]
    assert oldest == ids
    unsorted = [r["id"] for r in await search_all(api, page_size=2)]
    assert sorted(unsorted) == sorted(ids) and len(unsorted) == 7
    # A page edited silently is the newest now, and an ascending listing already past it
    # lists it again at its end instead of skipping anything.
    first: Any = await api.search(
        page_size=3, sort={"direction": "ascending", "timestamp": "last_edited_time"}
    )
    stamp = notion.edit_page(ids[1], text="changed")
    assert notion.pages[ids[1]]["last_edited_time"] == stamp
    rest = await search_all(
        api,
        page_size=3,
        start_cursor=first["next_cursor"],
        sort={"direction": "ascending", "timestamp": "last_edited_time"},
    )
    assert [r["id"] for r in rest] == [*ids[3:], ids[1]]


async def test_search_leaves_out_trashed_unshared_and_other_workspaces_pages(
    notion: FakeNotion, api: AsyncClient, notion_url: str
) -> None:
    ids = notion.add_pages(4)
    theirs = notion.add_pages(2, WORKSPACE_B)
    notion.set_trashed(ids[0])
    notion.unshare(ids[1])
    assert {r["id"] for r in await search_all(api)} == {ids[2], ids[3]}
    with pytest.raises(APIResponseError) as caught:  # unshared: 404 like another's page
        await api.pages.retrieve(page_id=ids[1])
    assert caught.value.status == 404
    notion.unshare(ids[1], shared=True)
    assert {r["id"] for r in await search_all(api)} == {ids[1], ids[2], ids[3]}
    other = AsyncClient(auth=N_TOKEN_B, base_url=notion_url)
    try:
        assert {r["id"] for r in await search_all(other)} == set(theirs)
    finally:
        await other.aclose()


@pytest.mark.parametrize(
    "params",
    [
        {"filter": {"property": "object", "value": "database"}},  # 2025-09-03: data_source
        {"filter": {"property": "title", "value": "page"}},
        {"sort": {"direction": "sideways", "timestamp": "last_edited_time"}},
        {"sort": {"direction": "ascending", "timestamp": "created_time"}},
        {"page_size": 0},
        {"page_size": 101},
        {"start_cursor": "not-a-cursor"},
    ],
)
async def test_search_refuses_a_malformed_body_with_validation_error(
    api: AsyncClient, params: dict[str, Any]
) -> None:
    with pytest.raises(APIResponseError) as caught:
        await api.search(**params)
    assert (caught.value.status, caught.value.code) == (400, "validation_error")


async def test_search_takes_faults_like_every_endpoint(notion: FakeNotion, api: AsyncClient) -> None:
    notion.fail("search", 429, retry_after=7)
    with pytest.raises(APIResponseError) as caught:
        await api.search()
    assert caught.value.status == 429 and caught.value.headers["retry-after"] == "7"
    assert notion.usage().by_endpoint == {"search": 1}


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


@pytest.fixture
def slack() -> FakeSlack:
    fake = FakeSlack(token=S_TOKEN)
    fake.add_team(TEAM_B, "Beta", S_TOKEN_B, "U0BOTB")
    return fake


@pytest.fixture
async def web(slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    with BackgroundServer(slack.app()) as server:
        yield AsyncWebClient(token=S_TOKEN, base_url=f"{server.url}/api/")


def test_add_channels_fills_history() -> None:
    fake = FakeSlack()
    ids = fake.add_channels(1000, messages=5)
    assert len(set(ids)) == 1000 and all(c.startswith("C") for c in ids)
    assert [m["text"] for m in fake.messages(ids[3])] == [f"bulk-3 message {j}" for j in range(1, 6)]


async def list_all(web: AsyncWebClient, method: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        resp = await web.api_call(method, http_verb="GET", params={**params, "cursor": cursor})
        found += resp["channels"]
        cursor = resp["response_metadata"]["next_cursor"]
        if not cursor:
            return found


async def test_users_conversations_lists_what_the_bot_is_in(slack: FakeSlack, web: AsyncWebClient) -> None:
    mine = slack.add_channels(5, messages=1)
    outside = slack.add_channels(2, member=False, name="outside")
    private = slack.add_channels(1, kind="private_channel", name="secret")
    dm = slack.add_channels(1, kind="im")
    slack.describe_channel("C0ARCHIVED", name="old", archived=True)
    slack.add_channels(3, team_id=TEAM_B, name="beta")
    everything = "public_channel,private_channel,mpim,im"
    resp = await web.users_conversations(types=everything, limit=4)
    assert resp["ok"] and len(resp["channels"]) == 4 and resp["response_metadata"]["next_cursor"]
    listed = await list_all(web, "users.conversations", types=everything, limit=4)
    assert {c["id"] for c in listed} == {*mine, *private, *dm, "C0ARCHIVED"}
    assert all("is_member" not in c and "num_members" not in c for c in listed)
    live = await list_all(web, "users.conversations", types=everything, exclude_archived=True)
    assert "C0ARCHIVED" not in {c["id"] for c in live}
    public = await list_all(web, "users.conversations")  # default: public only
    assert {c["id"] for c in public} == {*mine, "C0ARCHIVED"}
    channel = next(c for c in listed if c["id"] == mine[0])
    assert {
        "id",
        "name",
        "is_channel",
        "is_private",
        "is_archived",
        "created",
        "updated",
        "is_im",
        "is_mpim",
        "is_group",
        "topic",
        "purpose",
    } <= set(channel)
    assert (channel["name"], channel["is_channel"], channel["is_private"]) == ("bulk-0", True, False)
    im = next(c for c in listed if c["id"] == dm[0])
    assert im["is_im"] is True and "name" not in im and im["user"]
    assert not set(outside) & {c["id"] for c in listed}


async def test_conversations_list_shows_public_channels_the_bot_is_not_in(
    slack: FakeSlack, web: AsyncWebClient
) -> None:
    mine = slack.add_channels(2)
    outside = slack.add_channels(2, member=False, name="outside")
    hidden = slack.add_channels(1, kind="private_channel", member=False)
    listed = await list_all(web, "conversations.list", types="public_channel,private_channel")
    assert {c["id"]: c["is_member"] for c in listed} == {
        **dict.fromkeys(mine, True),
        **dict.fromkeys(outside, False),
    }
    assert hidden[0] not in {c["id"] for c in listed}
    # The bot cannot read a channel it is not in.
    with pytest.raises(SlackApiError) as caught:
        await web.conversations_history(channel=outside[0])
    assert caught.value.response["error"] == "not_in_channel"
    slack.set_member(outside[0])
    assert (await web.conversations_history(channel=outside[0]))["ok"]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"types": "public_channel,channels"}, "invalid_types"),
        ({"limit": "many"}, "invalid_limit"),
        ({"limit": "0"}, "invalid_limit"),
        ({"cursor": "bm9wZQ=="}, "invalid_cursor"),
    ],
)
async def test_listings_refuse_bad_parameters(
    web: AsyncWebClient, params: dict[str, str], error: str
) -> None:
    for method in ("users.conversations", "conversations.list"):
        with pytest.raises(SlackApiError) as caught:
            await web.api_call(method, http_verb="GET", params=params)
        assert caught.value.response["error"] == error


async def test_listings_are_charged_to_the_team_budget(slack: FakeSlack, web: AsyncWebClient) -> None:
    slack.add_channels(3)
    slack.rate_limit("users.conversations", retry_after=9)
    with pytest.raises(SlackApiError) as caught:
        await web.users_conversations()
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "9"
    await web.users_conversations()
    assert slack.usage().by_endpoint == {"users.conversations": 2}
