"""The stand-ins' API budgets and request counts, through the real SDKs on loopback.

``notion_client.Client`` (retries off) against :class:`standins.notion_api.FakeNotion` and
``slack_sdk.WebClient`` against :class:`standins.slack_api.FakeSlack`, both served by
:class:`standins.server.BackgroundServer`: a workspace's (team's) token bucket answers its
burst, then 429 with the documented body and ``Retry-After`` in whole seconds
(https://developers.notion.com/reference/request-limits,
https://docs.slack.dev/apis/web-api/rate-limits) and costs nothing when it refuses; it refills
as the injected clock moves (no sleeping); workspaces and teams have buckets of their own;
usage counts what each sent, so ``max_in_window`` can prove a client stayed within
``burst + rate * W``. No database, no service code except the Notion client's reading of
``rate_limit_reason``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from notion_client import Client
from notion_client.errors import APIResponseError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from integrations.notion.client import _rate_limit_reason
from standins.budgets import (
    BudgetBook,
    ManualClock,
    TokenBucket,
    max_in_window,
    retry_after_seconds,
)
from standins.notion_api import FakeNotion, paragraph
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

N_TOKEN_A = "secret_budget_a"
N_TOKEN_B = "secret_budget_b"
WORKSPACE_B = "5b0e9c1d-2a3f-4b6c-8d7e-9f0a1b2c3d4e"
S_TOKEN_A = "xoxb-budget-a"
S_TOKEN_B = "xoxb-budget-b"
TEAM_B = "T0BUDGET02"
RATE_LIMITED_MESSAGE = "You have been rate limited. Please try again in a few minutes."


# --------------------------------------------------------------------------------------------
# The bucket and the window count, without HTTP
# --------------------------------------------------------------------------------------------


def test_retry_after_is_whole_seconds_rounded_up_at_least_one() -> None:
    assert [retry_after_seconds(w) for w in (0.001, 0.5, 1.0, 1.2, 6.5, 10.0, 61.0)] == [
        1,
        1,
        1,
        2,
        7,
        10,
        61,
    ]


def test_max_in_window_counts_a_closed_window() -> None:
    times = [0.0, 0.0, 0.0, 1.0, 1.5, 2.0, 2.0, 10.0]
    assert max_in_window([], 5) == 0
    assert max_in_window(times, 0) == 3
    assert max_in_window(times, 1) == 4  # [0, 1] holds both ends
    assert max_in_window(times, 0.5) == 3  # [1.5, 2.0] holds 3, [0, 0.5] too
    assert max_in_window(times, 2) == 7
    assert max_in_window(reversed(times), 100) == 8
    with pytest.raises(ValueError):
        max_in_window(times, -1)


def test_bucket_refuses_bad_budgets() -> None:
    for per_second, burst in ((0, 1), (-1, 5), (1, 0.5), (float("inf"), 1), (1, float("inf"))):
        with pytest.raises(ValueError):
            TokenBucket(per_second, burst, now=0.0)


def test_budget_book_is_thread_safe() -> None:
    """Many threads at one frozen instant: exactly ``burst`` requests pass, every other one
    is counted as a 429, none lost."""
    clock = ManualClock()
    book = BudgetBook(clock)
    book.set("w", per_second=1, burst=25)
    with ThreadPoolExecutor(max_workers=16) as pool:
        waits = list(pool.map(lambda _: book.admit("w", "x"), range(400)))
    assert sum(1 for w in waits if w == 0) == 25
    usage = book.usage("w")
    assert (usage.requests, usage.rate_limited) == (25, 375)
    assert usage.by_endpoint == {"x": 25}


# --------------------------------------------------------------------------------------------
# Notion
# --------------------------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=500.0)


@pytest.fixture
def notion(clock: ManualClock) -> Iterator[tuple[FakeNotion, str]]:
    fake = FakeNotion(token=N_TOKEN_A, clock=clock)
    fake.add_workspace(WORKSPACE_B, "Beta Corp", N_TOKEN_B)
    with BackgroundServer(fake.app()) as server:
        yield fake, server.url


NotionFor = Callable[[str | None], Client]


@pytest.fixture
def notion_for(notion: tuple[FakeNotion, str]) -> Iterator[NotionFor]:
    """``notion_client.Client`` (retries off) of a token against the served fake."""
    opened: list[httpx.Client] = []

    def connect(token: str | None) -> Client:
        # A plain-HTTP httpx client of its own (notion_client sets the token on it): the one
        # notion_client would build loads the CA bundle, ~50 ms each.
        opened.append(httpx.Client(verify=False))
        return Client(
            auth=token,
            base_url=notion[1],
            retry=False,
            log_level=logging.CRITICAL,
            client=opened[-1],
        )

    yield connect
    for http in opened:
        http.close()


def _answer(value: Any) -> dict[str, Any]:
    """A sync ``notion_client`` answer (typed ``Any | Awaitable[Any]`` by the SDK)."""
    assert isinstance(value, dict)
    return value


def _notion_429(call: Callable[[], Any]) -> APIResponseError:
    with pytest.raises(APIResponseError) as caught:
        call()
    assert caught.value.status == 429
    return caught.value


def test_notion_burst_then_429_with_notions_body_and_retry_after(
    notion: tuple[FakeNotion, str], notion_for: NotionFor, clock: ManualClock
) -> None:
    """Three requests pass (any endpoint draws on the one workspace bucket), the fourth
    answers 429 ``rate_limited`` with ``Retry-After`` rounded up to whole seconds and
    ``additional_data.rate_limit_reason``; a refusal costs nothing."""
    fake, _ = notion
    page = fake.add_page(title="Budget", blocks=[paragraph("one")])
    fake.set_budget(per_second=2, burst=3)
    a = notion_for(N_TOKEN_A)
    a.pages.retrieve(page_id=page)
    a.blocks.children.list(block_id=page)
    a.users.me()

    error = _notion_429(lambda: a.pages.retrieve(page_id=page))
    assert error.code == "rate_limited"
    assert error.headers["retry-after"] == "1"  # a token is back in 0.5 s
    body = json.loads(error.body)
    assert {k: v for k, v in body.items() if k != "request_id"} == {
        "object": "error",
        "status": 429,
        "code": "rate_limited",
        "message": RATE_LIMITED_MESSAGE,
        "additional_data": {"rate_limit_reason": "workspace_rate_limit"},
    }
    assert error.additional_data == {"rate_limit_reason": "workspace_rate_limit"}
    assert _rate_limit_reason(error) == "workspace_rate_limit"  # what the service reads

    _notion_429(a.users.me)  # still empty: the 429 took nothing, time did not move
    clock.advance(0.5)
    assert _answer(a.users.me())["object"] == "user"  # exactly one token came back
    _notion_429(a.users.me)

    usage = fake.usage()
    assert usage.requests == 4 and usage.rate_limited == 3
    assert usage.by_endpoint == {"pages.retrieve": 1, "blocks.children.list": 1, "users.me": 2}
    assert usage.rate_limited_at == [500.0, 500.0, 500.5]
    assert usage.accepted_at == [500.0, 500.0, 500.0, 500.5]
    # The older counter still sees every request received, 429s included.
    assert fake.calls["users.me"] == 4 and fake.calls["pages.retrieve"] == 2


def test_notion_retry_after_is_the_time_until_one_token(
    notion: tuple[FakeNotion, str], notion_for: NotionFor, clock: ManualClock
) -> None:
    """At 0.1 request/s an empty bucket needs 10 s; 3.5 s later, 6.5 s (sent as 7); a
    client that waits ``Retry-After`` is served. ``reason`` sets the body's reason."""
    fake, _ = notion
    fake.set_budget(per_second=0.1, burst=1, reason="integration_rate_limit")
    a = notion_for(N_TOKEN_A)
    a.users.me()
    error = _notion_429(a.users.me)
    assert error.headers["retry-after"] == "10"
    assert _rate_limit_reason(error) == "integration_rate_limit"
    clock.advance(3.5)
    error = _notion_429(a.users.me)
    assert error.headers["retry-after"] == "7"
    clock.advance(int(error.headers["retry-after"]))
    assert _answer(a.users.me())["type"] == "bot"


def test_notion_bucket_refills_up_to_its_burst_and_can_be_cleared(
    notion: tuple[FakeNotion, str], notion_for: NotionFor, clock: ManualClock
) -> None:
    fake, _ = notion
    fake.set_budget(per_second=1, burst=2)
    a = notion_for(N_TOKEN_A)
    for _ in range(2):
        a.users.me()
    _notion_429(a.users.me)
    clock.advance(60)  # a long idle time refills to the burst, not beyond
    for _ in range(2):
        a.users.me()
    _notion_429(a.users.me)
    fake.clear_budget()
    for _ in range(5):
        a.users.me()
    assert fake.usage().requests == 9 and fake.usage().rate_limited == 2


def test_notion_workspaces_have_their_own_buckets_and_share_them_across_tokens(
    notion: tuple[FakeNotion, str], notion_for: NotionFor
) -> None:
    """Workspace A's empty bucket does not touch B, nor B's A; a second token of B (from an
    OAuth exchange, itself never charged) draws on B's bucket; an unknown token is charged
    to no one."""
    fake, _ = notion
    fake.set_budget(per_second=1, burst=2)
    fake.set_budget(WORKSPACE_B, per_second=1, burst=1)
    a, b = notion_for(N_TOKEN_A), notion_for(N_TOKEN_B)
    a.users.me()
    a.users.me()
    _notion_429(a.users.me)
    assert _answer(b.users.me())["bot"]["workspace_id"] == WORKSPACE_B
    _notion_429(b.users.me)

    fake.oauth_client("client", "client-secret")
    fake.authorization_code("code-b", WORKSPACE_B)
    token = _answer(
        notion_for(None).oauth.token(  # B's bucket is empty: the exchange still works
            client_id="client",
            client_secret="client-secret",
            grant_type="authorization_code",
            code="code-b",
        )
    )["access_token"]
    _notion_429(notion_for(token).users.me)  # same workspace, same (empty) bucket

    with pytest.raises(APIResponseError) as caught:
        notion_for("secret_nobody").users.me()
    assert caught.value.status == 401

    fake.clear_budget(WORKSPACE_B)
    assert _answer(notion_for(token).users.me())["bot"]["workspace_id"] == WORKSPACE_B
    _notion_429(a.users.me)  # A's budget is still there
    assert (fake.usage().requests, fake.usage().rate_limited) == (2, 2)
    assert (fake.usage(WORKSPACE_B).requests, fake.usage(WORKSPACE_B).rate_limited) == (2, 2)
    with pytest.raises(KeyError):
        fake.set_budget("00000000-0000-4000-8000-000000000000", per_second=1, burst=1)


def test_notion_a_greedy_client_never_gets_more_than_burst_plus_rate_times_w(
    notion: tuple[FakeNotion, str], notion_for: NotionFor, clock: ManualClock
) -> None:
    """A client that sends every 0.1 s and waits ``Retry-After`` on a 429, for 30 simulated
    seconds: in every window of W seconds at most ``burst + rate * W`` requests passed."""
    fake, _ = notion
    per_second, burst = 2.0, 4.0
    fake.set_budget(per_second=per_second, burst=burst)
    a = notion_for(N_TOKEN_A)
    end = clock() + 30
    waited = False
    while clock() < end:
        try:
            a.users.me()
            clock.advance(0.1)
            waited = False
        except APIResponseError as error:
            assert error.status == 429 and not waited  # waiting Retry-After always suffices
            clock.advance(float(error.headers["retry-after"]))
            waited = True
    usage = fake.usage()
    assert usage.requests >= per_second * 30 * 0.5 and usage.rate_limited > 0
    assert usage.requests + usage.rate_limited == fake.calls["users.me"]
    for window in (0, 0.1, 0.5, 1, 2.5, 5, 10, 30):
        assert usage.max_in_window(window) <= burst + per_second * window, window
    assert usage.max_in_window(0.35) == burst  # the first burst, at full speed

    fake.reset_usage()
    assert fake.usage().requests == fake.usage().rate_limited == 0
    assert fake.usage().accepted_at == [] and fake.calls["users.me"] > 0


def test_notion_concurrent_requests_get_exactly_the_burst(
    notion: tuple[FakeNotion, str], notion_for: NotionFor
) -> None:
    """Requests from several threads at one instant of the clock: ``burst`` pass, the rest
    answer 429, and the counts add up (the server thread and the test threads share the
    bucket safely)."""
    fake, _ = notion
    fake.set_budget(per_second=1, burst=10)
    client = notion_for(N_TOKEN_A)  # httpx's connection pool is shared across threads

    def one(_: int) -> int:
        try:
            client.users.me()
            return 200
        except APIResponseError as error:
            return error.status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(one, range(32)))
    assert statuses.count(200) == 10 and statuses.count(429) == 22
    assert (fake.usage().requests, fake.usage().rate_limited) == (10, 22)


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


@pytest.fixture
def slack(clock: ManualClock) -> Iterator[tuple[FakeSlack, str]]:
    fake = FakeSlack(token=S_TOKEN_A, clock=clock)
    fake.add_team(TEAM_B, "Beta Corp", S_TOKEN_B, "U0BETABOT")
    fake.post("C0ALPHA01", "alpha root")
    fake.post("C0BETA001", "beta root", team_id=TEAM_B)
    with BackgroundServer(fake.app()) as server:
        yield fake, f"{server.url}/api/"


def _slack_429(call: Callable[[], Any]) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        call()
    response = caught.value.response
    assert response.status_code == 429
    assert response.data == {"ok": False, "error": "ratelimited"}
    return caught.value


def _retry_after(error: SlackApiError) -> str:
    headers = {k.lower(): v for k, v in error.response.headers.items()}
    return str(headers["retry-after"])


def test_slack_team_budget_burst_then_429_and_refill(
    slack: tuple[FakeSlack, str], clock: ManualClock
) -> None:
    """``method=None``: one bucket for every method of the team; past it HTTP 429,
    ``Retry-After`` in seconds, ``{"ok": false, "error": "ratelimited"}``."""
    fake, url = slack
    fake.set_budget(per_minute=60, burst=3)
    a = WebClient(token=S_TOKEN_A, base_url=url)
    a.auth_test()
    a.conversations_history(channel="C0ALPHA01")
    a.auth_test()
    error = _slack_429(a.auth_test)
    assert _retry_after(error) == "1"
    _slack_429(lambda: a.conversations_history(channel="C0ALPHA01"))  # a 429 takes nothing
    clock.advance(1)
    assert a.auth_test()["team_id"] == fake.team_id
    _slack_429(a.auth_test)
    clock.advance(600)
    for _ in range(3):
        a.auth_test()
    _slack_429(a.auth_test)

    usage = fake.usage()
    assert usage.by_endpoint == {"auth.test": 6, "conversations.history": 1}
    assert usage.requests == 7 and usage.rate_limited == 4
    assert usage.rate_limited_at == [500.0, 500.0, 501.0, 1101.0]
    assert fake.calls["auth.test"] == 9  # every call received, 429s included


def test_slack_method_budget_is_per_method_and_combines_with_the_team_one(
    slack: tuple[FakeSlack, str], clock: ManualClock
) -> None:
    """``conversations.history`` at tier 3 (50/min, burst 2): a third call waits 1.2 s (sent
    as 2); other methods are not limited by it, but a team-wide bucket limits them all, and
    a call refused by its method's bucket takes nothing from the team's."""
    fake, url = slack
    fake.set_budget(per_minute=50, burst=2, method="conversations.history")
    a = WebClient(token=S_TOKEN_A, base_url=url)
    a.conversations_history(channel="C0ALPHA01")
    a.conversations_history(channel="C0ALPHA01")
    error = _slack_429(lambda: a.conversations_history(channel="C0ALPHA01"))
    assert _retry_after(error) == "2"
    ts = fake.messages("C0ALPHA01")[0]["ts"]
    for _ in range(5):
        a.conversations_replies(channel="C0ALPHA01", ts=ts)
        a.auth_test()

    fake.reset_usage()
    clock.advance(60)
    fake.set_budget(per_minute=60, burst=5)  # the team's, on top of the method's
    a.conversations_history(channel="C0ALPHA01")
    a.conversations_history(channel="C0ALPHA01")
    _slack_429(lambda: a.conversations_history(channel="C0ALPHA01"))
    for _ in range(3):
        a.auth_test()
    _slack_429(a.auth_test)
    clock.advance(1)  # the team's bucket has one again, history's not yet (1.2 s)
    _slack_429(lambda: a.conversations_history(channel="C0ALPHA01"))
    a.auth_test()
    usage = fake.usage()
    assert usage.by_endpoint == {"conversations.history": 2, "auth.test": 4}
    assert usage.rate_limited == 3

    fake.clear_budget(method="conversations.history")
    fake.clear_budget()
    for _ in range(4):
        a.conversations_history(channel="C0ALPHA01")
    with pytest.raises(ValueError):
        fake.set_budget(per_minute=1, burst=1, method="oauth.v2.access")


def test_slack_teams_have_their_own_buckets(slack: tuple[FakeSlack, str]) -> None:
    """Team A's empty bucket does not touch B; ``oauth.v2.access`` is never charged; calls
    without a valid token are charged to no team."""
    fake, url = slack
    fake.set_budget(per_minute=6, burst=1)
    fake.set_budget(TEAM_B, per_minute=6, burst=2)
    a, b = WebClient(token=S_TOKEN_A, base_url=url), WebClient(token=S_TOKEN_B, base_url=url)
    a.auth_test()
    error = _slack_429(a.auth_test)
    assert _retry_after(error) == "10"  # 6 per minute: one every 10 s
    assert b.conversations_history(channel="C0BETA001")["messages"]
    assert b.auth_test()["team_id"] == TEAM_B
    _slack_429(b.auth_test)

    fake.oauth_client("1111.2222", "client-secret")
    fake.authorization_code("code-b", TEAM_B)
    answer = WebClient(base_url=url).oauth_v2_access(
        client_id="1111.2222", client_secret="client-secret", code="code-b"
    )
    assert answer["team"]["id"] == TEAM_B  # B's bucket is empty, the exchange still works
    with pytest.raises(SlackApiError) as caught:
        WebClient(token="xoxb-nobody", base_url=url).auth_test()
    assert caught.value.response["error"] == "invalid_auth"

    assert (fake.usage().requests, fake.usage().rate_limited) == (1, 1)
    assert fake.usage(TEAM_B).by_endpoint == {"conversations.history": 1, "auth.test": 1}
    assert fake.usage(TEAM_B).rate_limited == 1
    with pytest.raises(KeyError):
        fake.usage("T0NOWHERE")


def test_slack_budget_comes_before_injected_faults(slack: tuple[FakeSlack, str], clock: ManualClock) -> None:
    """A call a queued fault answers went through the budget (charged and counted); a budget
    429 neither fires a fault nor counts towards its ``after``."""
    fake, url = slack
    fake.set_budget(per_minute=60, burst=2)
    fake.server_error("auth.test", 503, after=1)
    a = WebClient(token=S_TOKEN_A, base_url=url)
    a.auth_test()  # the normal call the fault waits for
    with pytest.raises(SlackApiError) as caught:
        a.auth_test()
    assert caught.value.response.status_code == 503
    _slack_429(a.auth_test)
    fake.rate_limit("auth.test", retry_after=30)
    _slack_429(a.auth_test)  # the budget's 429, not the fault's
    clock.advance(1)
    error = _slack_429(a.auth_test)  # now the fault's
    assert _retry_after(error) == "30"
    assert fake.usage().requests == 3 and fake.usage().rate_limited == 2


def test_slack_a_greedy_client_never_gets_more_than_burst_plus_rate_times_w(
    slack: tuple[FakeSlack, str], clock: ManualClock
) -> None:
    """Tier 3 for ``conversations.replies`` (50 per minute, burst 5), a client that calls
    every 0.2 s and waits ``Retry-After`` on a 429, for a simulated minute."""
    fake, url = slack
    per_minute, burst = 50.0, 5.0
    fake.set_budget(per_minute=per_minute, burst=burst, method="conversations.replies")
    a = WebClient(token=S_TOKEN_A, base_url=url)
    ts = fake.messages("C0ALPHA01")[0]["ts"]
    end = clock() + 60
    waited = False
    while clock() < end:
        try:
            a.conversations_replies(channel="C0ALPHA01", ts=ts)
            clock.advance(0.2)
            waited = False
        except SlackApiError as error:
            assert error.response.status_code == 429 and not waited  # Retry-After suffices
            clock.advance(float(_retry_after(error)))
            waited = True
    usage = fake.usage()
    assert usage.requests >= 40 and usage.rate_limited > 0
    for window in (0, 1, 6, 30, 60):
        assert usage.max_in_window(window) <= burst + per_minute / 60 * window, window
    assert usage.max_in_window(0.9) == burst
