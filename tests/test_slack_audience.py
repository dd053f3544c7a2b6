"""Slack documents' audience: the real slack_sdk against the Slack stand-in on loopback,
documents and the conversation cache in a real Postgres (``conversations.info`` for the kind,
``conversations.members`` for the members, cached, refreshed by member events and the
reconciliation's listing)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import one_job
import psycopg
import pytest
from test_slack_sync import make_job

from debounce.contract import Audience, BudgetExhausted, Checkpoint, SyncContext
from debounce.documents.audiences import AudienceStore, audience_json
from debounce.documents.store import DocumentStore
from integrations.slack import SlackSettings, SlackSyncer
from integrations.slack.audience import members_key
from integrations.slack.webhook import SlackWebhooks
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

TOKEN = "xoxb-test-token"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "slack"
Conn = psycopg.AsyncConnection[Any]


class CountingMeter:
    """A budget of ``left`` requests (``None``: unlimited) that counts what it was charged."""

    def __init__(self, left: int | None = None) -> None:
        self.taken = 0
        self.left = left

    async def take(self) -> None:
        if self.left is not None:
            if self.left <= 0:
                raise BudgetExhausted(1.0)
            self.left -= 1
        self.taken += 1


@pytest.fixture
def fake() -> FakeSlack:
    fake = FakeSlack(token=TOKEN)
    fake.describe_channel("C0PUBLIC1", kind="public_channel", name="general")
    fake.post("C0PUBLIC1", "Hello everyone", user="U1")
    fake.describe_channel("G0SECRET1", kind="private_channel", name="leads")
    fake.post("G0SECRET1", "Budget talk", user="U1")
    fake.post("G0SECRET1", "Hiring plan", user="U2")
    fake.set_members("G0SECRET1", ["U0BOTUSER", "U2", "U1", "U3"])
    fake.describe_channel("D0DIRECT1", kind="im", user="U4")
    fake.post("D0DIRECT1", "Got a minute?", user="U4")
    return fake


@pytest.fixture
def api_url(fake: FakeSlack) -> Iterator[str]:
    with BackgroundServer(fake.app()) as server:
        yield f"{server.url}/api/"


@pytest.fixture
async def slack(api_url: str) -> AsyncIterator[SlackSyncer]:
    syncer = SlackSyncer(
        SlackSettings(slack_bot_token=TOKEN, slack_api_url=api_url, slack_signing_secret="secret")
    )
    yield syncer
    await syncer.aclose()


@pytest.fixture
def store(conn: Conn) -> DocumentStore:
    return DocumentStore(conn)


@pytest.fixture
def cache(conn: Conn) -> AudienceStore:
    return AudienceStore(conn, "slack", None)


def context(
    store: DocumentStore, cache: AudienceStore | None, meter: CountingMeter | None = None
) -> SyncContext:
    return SyncContext(store=store, audiences=cache, meter=meter)


async def audiences(store: DocumentStore, channel: str) -> dict[str, Any]:
    return {d["document_id"]: audience_json(d) for d in await one_job.page_documents(store, "slack", channel)}


async def test_a_private_channel_carries_its_members_charged_and_cached(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    meter = CountingMeter()
    await slack.sync(make_job("G0SECRET1"), context(store, cache, meter))
    expected = {
        "kind": "private_channel",
        "members": ["U0BOTUSER", "U1", "U2", "U3"],
        "member_count": 4,
        "accessible_by": None,
    }
    got = await audiences(store, "G0SECRET1")
    assert len(got) == 2 and all(a == expected for a in got.values())
    assert fake.calls["conversations.info"] == 1 and fake.calls["conversations.members"] == 1
    # Every request the sync sent, the members call included, was charged to the budget.
    assert meter.taken == sum(fake.calls.values()) == 3  # info, members, history
    # A second sync of the busy channel reuses the cached audience: no info, no members.
    fake.post("G0SECRET1", "One more", user="U3")
    await slack.sync(make_job("G0SECRET1"), context(store, cache, meter))
    assert fake.calls["conversations.info"] == 1 and fake.calls["conversations.members"] == 1
    assert len(await audiences(store, "G0SECRET1")) == 3


async def test_a_public_channel_has_no_member_list(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    await slack.sync(make_job("C0PUBLIC1"), context(store, cache))
    assert list((await audiences(store, "C0PUBLIC1")).values()) == [
        {"kind": "public_channel", "members": None, "member_count": None, "accessible_by": None}
    ]
    assert fake.calls["conversations.members"] == 0


async def test_an_im_carries_exactly_its_two_members(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    await slack.sync(make_job("D0DIRECT1"), context(store, cache))
    (got,) = (await audiences(store, "D0DIRECT1")).values()
    assert got is not None and (got["kind"], got["members"]) == ("im", ["U0BOTUSER", "U4"])


async def test_members_are_read_page_by_page_and_each_page_is_charged(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    people = [f"U{i:04d}" for i in range(7)]
    fake.set_members("G0SECRET1", people)
    slack.audiences.page_limit = 3
    meter = CountingMeter()
    await slack.sync(make_job("G0SECRET1"), context(store, cache, meter))
    pages = [p for m, p in fake.requests if m == "conversations.members"]
    assert [p.get("limit") for p in pages] == ["3", "3", "3"]
    assert [bool(p.get("cursor")) for p in pages] == [False, True, True]
    assert meter.taken == 1 + 3 + 1  # info, three member pages, history
    (first, *_) = (await audiences(store, "G0SECRET1")).values()
    assert first is not None and first["members"] == people


async def test_a_dry_budget_stops_the_member_listing_and_the_sync_resumes_from_its_checkpoint(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    people = [f"U{i:04d}" for i in range(5)]
    fake.set_members("G0SECRET1", people)
    slack.audiences.page_limit = 2
    kept = Checkpoint()
    ctx = context(store, cache, CountingMeter(left=2))
    ctx.checkpoint = kept
    with pytest.raises(BudgetExhausted):
        await slack.sync(make_job("G0SECRET1"), ctx)
    assert fake.calls["conversations.info"] == 1 and fake.calls["conversations.members"] == 1
    assert await cache.get(["G0SECRET1"]) == {}
    # The job comes back with its checkpoint: what it read is served free, it goes on.
    ctx = context(store, cache, CountingMeter(left=2))
    ctx.checkpoint = kept
    with pytest.raises(BudgetExhausted):
        await slack.sync(make_job("G0SECRET1"), ctx)
    ctx = context(store, cache, CountingMeter(left=2))
    ctx.checkpoint = kept
    await slack.sync(make_job("G0SECRET1"), ctx)
    assert fake.calls["conversations.info"] == 1 and fake.calls["conversations.members"] == 3
    assert (await cache.get(["G0SECRET1"]))["G0SECRET1"].audience.members == tuple(people)


async def test_a_cached_audience_older_than_the_maximum_age_is_listed_again(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    call = slack.client.bind(context(store, cache))
    first = await slack.audiences.for_sync(call, "G0SECRET1")
    assert await slack.audiences.for_sync(call, "G0SECRET1") == first
    assert fake.calls["conversations.members"] == 1
    fake.remove_member("G0SECRET1", "U3")
    later = datetime.now(UTC) + timedelta(days=1, seconds=1)
    again = await slack.audiences.for_sync(call, "G0SECRET1", now=later)
    assert fake.calls["conversations.members"] == 2
    assert again == Audience("private_channel", ("U0BOTUSER", "U1", "U2"))


async def test_a_member_event_refreshes_the_conversation_s_documents(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    await slack.sync(make_job("G0SECRET1"), context(store, cache))
    fake.remove_member("G0SECRET1", "U2")
    body = json.loads((EXAMPLES / "member_left_channel.json").read_text())
    body["event"]["channel"] = "G0SECRET1"
    await slack.sync(make_job(members_key("G0SECRET1"), body), context(store, cache))
    got = await audiences(store, "G0SECRET1")
    assert {tuple(a["members"]) for a in got.values() if a} == {("U0BOTUSER", "U1", "U3")}
    assert fake.calls["conversations.history"] == 1  # the member job reads no history


async def test_the_sweep_s_listing_refreshes_what_changed_or_aged(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    # Cached: the DM (fresh, right), the private channel as public (wrong kind).
    await cache.put("D0DIRECT1", Audience("im", ("U0BOTUSER", "U4")))
    await cache.put("G0SECRET1", Audience("public_channel"))
    page = await slack.backfill_page(None, SyncContext(audiences=cache))
    assert {i.source_page_id for i in page.items} == {"C0PUBLIC1", "G0SECRET1", "D0DIRECT1"}
    members_asked = [p["channel"] for m, p in fake.requests if m == "conversations.members"]
    assert members_asked == ["G0SECRET1"]  # the public channel: kind only; the DM: fresh
    cached = await cache.get(["C0PUBLIC1", "G0SECRET1", "D0DIRECT1"])
    assert cached["G0SECRET1"].audience == Audience("private_channel", ("U0BOTUSER", "U1", "U2", "U3"))
    assert cached["C0PUBLIC1"].audience == Audience("public_channel")
    assert fake.calls["conversations.info"] == 0  # the listing said the kinds


async def test_a_dry_budget_ends_the_sweep_s_refresh_never_its_listing_page(
    fake: FakeSlack, slack: SlackSyncer, store: DocumentStore, cache: AudienceStore
) -> None:
    """With one request left the backfill page still gets through: were the refresh to fail the
    page, it would be retried as soon as one request was available, spend it on the listing
    again, and never get further (a backfill stuck at 0 pages)."""
    meter = CountingMeter(left=1)
    page = await slack.backfill_page(None, SyncContext(audiences=cache, meter=meter))
    assert {i.source_page_id for i in page.items} == {"C0PUBLIC1", "G0SECRET1", "D0DIRECT1"}
    assert meter.taken == 1 and fake.calls["conversations.members"] == 0
    # With the budget back, the next page's refresh learns what this one could not.
    await slack.backfill_page(None, SyncContext(audiences=cache, meter=CountingMeter()))
    assert fake.calls["conversations.members"] == 2  # the private channel and the DM


def sign(body: bytes) -> dict[str, str]:
    from integrations.slack.source import sign as slack_sign

    return slack_sign(body, "secret")


@pytest.mark.parametrize("name", ["member_joined_channel", "member_left_channel"])
def test_member_events_become_a_members_job_of_the_conversation(name: str) -> None:
    body = (EXAMPLES / f"{name}.json").read_bytes()
    parser = SlackWebhooks(SlackSettings(slack_signing_secret="secret"))
    result = parser.parse_webhook(sign(body), body)
    assert [(e.source_page_id, e.event_id, e.workspace) for e in result.events] == [
        ("members:G0PRIVATE1", json.loads(body)["event_id"], "T061EG9R6")
    ]


def test_our_bot_joining_also_syncs_the_conversation() -> None:
    envelope = json.loads((EXAMPLES / "member_joined_channel.json").read_text())
    envelope["event"]["user"] = "U0BOTUSER"  # the authorization's bot user
    body = json.dumps(envelope).encode()
    parser = SlackWebhooks(SlackSettings(slack_signing_secret="secret"))
    result = parser.parse_webhook(sign(body), body)
    assert [(e.source_page_id, e.event_id) for e in result.events] == [
        ("members:G0PRIVATE1", "Ev0PV52K31"),
        ("G0PRIVATE1", "Ev0PV52K31/history"),
    ]
