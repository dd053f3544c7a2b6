"""Sync half of the Slack integration: the real slack_sdk AsyncWebClient against the local
fake Slack Web API (standins.slack_api) on loopback, documents in a real Postgres."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import one_job
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce.contract import PermanentError, RateLimited, SyncContext, SyncError
from debounce.documents.store import DocumentStore, WriteOutcome
from debounce.types import JobStatus, SyncJob
from integrations.slack import (
    SlackApiFailure,
    SlackSettings,
    SlackSyncer,
    render_thread,
)
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack
from standins.slack_messages import message

TOKEN = "xoxb-test-token"
C = "C2147483705"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "slack"

Make = Callable[..., SlackSyncer]


def make_job(channel: str = C, payload: dict[str, Any] | None = None) -> SyncJob:
    """A claimed job for ``channel`` whose latest event is ``payload`` (an envelope)."""
    now = datetime.now(UTC)
    payload = payload or {}
    return SyncJob(
        id=1,
        source_type="slack",
        source_page_id=channel,
        status=JobStatus.PROCESSING,
        payload=payload,
        event_id=payload.get("event_id"),
        event_count=1,
        priority=0,
        attempts=1,
        max_attempts=5,
        scheduled_at=now,
        first_event_at=now,
        max_wait_until=now,
        retry_at=None,
        lease_expires_at=None,
        locked_by="test",
        lease_token="lease",
        revision=1,
        claimed_revision=1,
        last_error=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


def envelope(event: dict[str, Any], event_id: str = "Ev0TEST0001") -> dict[str, Any]:
    return {"type": "event_callback", "event_id": event_id, "team_id": "T061EG9R6", "event": event}


@pytest.fixture
def fake() -> FakeSlack:
    return FakeSlack(token=TOKEN)


@pytest.fixture
def api_url(fake: FakeSlack) -> Iterator[str]:
    with BackgroundServer(fake.app()) as server:
        yield f"{server.url}/api/"


@pytest.fixture
def store(pool: AsyncConnectionPool[Any]) -> DocumentStore:
    return DocumentStore(pool)


@pytest.fixture
async def make(api_url: str) -> AsyncIterator[Make]:
    made: list[SlackSyncer] = []

    def factory(**kwargs: Any) -> SlackSyncer:
        settings = SlackSettings(
            slack_bot_token=kwargs.pop("token", TOKEN),
            slack_api_url=kwargs.pop("api_url", api_url),
            slack_signing_secret="secret",
            slack_bot_user_id=kwargs.pop("bot_user_id", None),
        )
        syncer = SlackSyncer(settings, **kwargs)
        made.append(syncer)
        return syncer

    yield factory
    for syncer in made:
        await syncer.aclose()


@pytest.fixture
def context(store: DocumentStore) -> SyncContext:
    """What the worker hands a sync (here unfenced, no workspace, no meter)."""
    return SyncContext(store=store)


async def docs(store: DocumentStore, channel: str = C) -> dict[str, dict[str, Any]]:
    return {d["document_id"]: d for d in await one_job.page_documents(store, "slack", channel)}


def live(rows: dict[str, dict[str, Any]]) -> set[str]:
    return {k for k, d in rows.items() if d["deleted_at"] is None}


# --------------------------------------------------------------------------- completeness


async def test_a_thousand_messages_in_five_pages_sync_completely(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    posted = [fake.post(C, f"message number {i}", user=f"U{i % 7:07d}") for i in range(1000)]
    slack = make(lookback_seconds=60)
    result = await slack.sync(make_job(), context)
    assert fake.calls["conversations.history"] == 5
    assert fake.calls["conversations.replies"] == 0
    assert (result.written, result.unchanged, result.deleted) == (1000, 0, 0)
    rows = await docs(store)
    assert live(rows) == {f"{C}/{ts}" for ts in posted}
    assert rows[f"{C}/{posted[17]}"]["content"].endswith("message number 17\n")
    # every page asked for 200 messages and followed the cursor
    pages = [p for m, p in fake.requests if m == "conversations.history"]
    assert all(p["limit"] == "200" for p in pages)
    assert [bool(p.get("cursor")) for p in pages] == [False, True, True, True, True]
    # the state keeps the watermark and only the threads of the look-back window
    state = await store.get_state("slack", C)
    assert state["watermark"] == posted[-1]
    assert state["scan"] is None
    assert len(state["threads"]) == 60


async def test_a_rate_limit_mid_scan_resumes_where_it_stopped(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    for i in range(1000):
        fake.post(C, f"m{i}")
    fake.rate_limit("conversations.history", retry_after=7, after=2)
    slack = make(lookback_seconds=60)
    with pytest.raises(RateLimited) as info:
        await slack.sync(make_job(), context)
    assert info.value.retry_after == 7
    assert len(live(await docs(store))) == 400  # two pages written before the 429
    result = await slack.sync(make_job(), context)
    assert len(live(await docs(store))) == 1000
    # 3 calls for the remaining pages (resumed with latest=<oldest ts written>) + 1 fresh
    assert fake.calls["conversations.history"] == 3 + 3 + 1
    assert result.written == 600


# --------------------------------------------------------------------------- threads


async def test_one_document_per_thread_with_an_exact_transcript(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    fake.post(C, "Hello world", user="U2147483697", ts="1763682934.000200")
    fake.reply(C, "1763682934.000200", "Replying in the thread", ts="1763683000.000300")
    fake.reply(
        C,
        "1763682934.000200",
        "See <https://example.com/runbook|the runbook> &amp; ping <@U2147483697>",
        user="U2147483699",
        ts="1763683100.000400",
    )
    fake.post(C, "A message alone", user="U2147483699", ts="1763683200.000500")
    result = await make().sync(make_job(), context)
    assert (result.written, result.deleted) == (2, 0)
    assert fake.calls["conversations.replies"] == 1  # only the thread with replies
    rows = await docs(store)
    assert set(rows) == {f"{C}/1763682934.000200", f"{C}/1763683200.000500"}
    thread = rows[f"{C}/1763682934.000200"]
    assert thread["content"] == (
        "**U2147483697** · 2025-11-20 23:55:34 UTC\n"
        "\n"
        "Hello world\n"
        "\n"
        "**U2147483698** · 2025-11-20 23:56:40 UTC\n"
        "\n"
        "Replying in the thread\n"
        "\n"
        "**U2147483699** · 2025-11-20 23:58:20 UTC\n"
        "\n"
        "See [the runbook](https://example.com/runbook) & ping @U2147483697\n"
    )
    assert thread["title"] == "Hello world"
    assert thread["url"] == f"https://slack.com/archives/{C}/p1763682934000200"
    assert thread["metadata"] == {
        "channel": C,
        "thread_ts": "1763682934.000200",
        "authors": ["U2147483697", "U2147483698", "U2147483699"],
        "reply_count": 2,
    }
    assert thread["source_updated_at"] == datetime(2025, 11, 20, 23, 58, 20, 400, tzinfo=UTC)
    single = rows[f"{C}/1763683200.000500"]
    assert single["metadata"]["reply_count"] == 0
    assert single["content"] == "**U2147483699** · 2025-11-21 00:00:00 UTC\n\nA message alone\n"


async def test_a_new_reply_refetches_only_that_thread(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    a = fake.post(C, "thread a")
    fake.reply(C, a, "a1")
    b = fake.post(C, "thread b")
    fake.reply(C, b, "b1")
    slack = make()
    await slack.sync(make_job(), context)
    assert fake.calls["conversations.replies"] == 2
    fake.reply(C, a, "a2")
    result = await slack.sync(make_job(), context)
    assert fake.calls["conversations.replies"] == 3
    assert (result.written, result.unchanged) == (1, 1)
    assert (await docs(store))[f"{C}/{a}"]["content"].endswith("a2\n")


async def test_a_reply_to_a_thread_older_than_the_window_comes_from_the_event(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "an old question")
    slack = make(lookback_seconds=60)
    await slack.sync(make_job(), context)
    fake.advance(7200)
    fake.post(C, "much later")  # moves the watermark two hours on
    await slack.sync(make_job(), context)
    reply = fake.reply(C, root, "a late answer")
    event = {
        "type": "message",
        "channel": C,
        "user": "U1",
        "text": "a late answer",
        "ts": reply,
        "thread_ts": root,
    }
    before = dict(fake.calls)
    result = await slack.sync(make_job(payload=envelope(event)), context)
    assert result.written == 1
    assert fake.calls["conversations.replies"] - before.get("conversations.replies", 0) == 1
    assert (await docs(store))[f"{C}/{root}"]["content"].endswith("a late answer\n")
    # the same event again (a re-sync of the same job payload) costs no replies call
    await slack.sync(make_job(payload=envelope(event)), context)
    assert fake.calls["conversations.replies"] - before.get("conversations.replies", 0) == 1


async def test_a_broadcast_reply_does_not_become_its_own_document(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    fake.advance(7200)
    reply = fake.reply(C, root, "also in channel", broadcast=True)
    await make(lookback_seconds=60).sync(make_job(), context)
    rows = await docs(store)
    assert set(rows) == {f"{C}/{root}"}
    assert rows[f"{C}/{root}"]["content"].endswith("also in channel\n")
    assert f"{C}/{reply}" not in rows


# --------------------------------------------------------------------------- edits


async def test_an_edit_updates_the_document_on_the_next_sync(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    ts = fake.post(C, "Hello world", user="U2147483697", ts="1763682934.000200")
    slack = make()
    await slack.sync(make_job(), context)
    fake.edit(C, ts, "Hello world (edited)", edited_ts="1763683100.000000")
    result = await slack.sync(make_job(), context)
    assert (result.written, result.unchanged) == (1, 0)
    doc = (await docs(store))[f"{C}/{ts}"]
    assert doc["content"] == (
        "**U2147483697** · 2025-11-20 23:55:34 UTC · edited 2025-11-20 23:58:20 UTC\n\nHello world (edited)\n"
    )
    assert doc["title"] == "Hello world (edited)"
    assert doc["source_updated_at"] == datetime(2025, 11, 20, 23, 58, 20, tzinfo=UTC)


async def test_an_edited_reply_is_seen_through_the_message_changed_event(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    reply = fake.reply(C, root, "typo teh")
    slack = make()
    await slack.sync(make_job(), context)
    fake.edit(C, reply, "typo the")
    event = {
        "type": "message",
        "subtype": "message_changed",
        "channel": C,
        "ts": "1763690000.000100",
        "message": {
            "type": "message",
            "user": "U2147483698",
            "text": "typo the",
            "ts": reply,
            "thread_ts": root,
            "edited": {"user": "U2147483698", "ts": "1763690000.0"},
        },
    }
    result = await slack.sync(make_job(payload=envelope(event)), context)
    assert result.written == 1
    assert (await docs(store))[f"{C}/{root}"]["content"].endswith("typo the\n")


# --------------------------------------------------------------------------- deletions


async def test_a_deleted_root_is_marked_deleted(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    keep = fake.post(C, "keep me")
    gone = fake.post(C, "delete me")
    slack = make()
    await slack.sync(make_job(), context)
    fake.delete(C, gone)
    result = await slack.sync(make_job(), context)
    assert result.deleted == 1
    rows = await docs(store)
    assert rows[f"{C}/{gone}"]["deleted_at"] is not None
    assert live(rows) == {f"{C}/{keep}"}
    assert gone not in (await store.get_state("slack", C))["threads"]


async def test_a_deleted_parent_keeps_its_live_replies_under_a_placeholder(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root", user="U2147483697", ts="1763682934.000200")
    fake.reply(C, root, "a reply that survives in Slack", ts="1763683000.000300")
    slack = make()
    await slack.sync(make_job(), context)
    fake.delete(C, root)  # Slack leaves a tombstone: its replies remain
    result = await slack.sync(make_job(), context)
    assert (result.written, result.deleted) == (1, 0)
    doc = (await docs(store))[f"{C}/{root}"]
    assert doc["deleted_at"] is None
    assert doc["content"] == (
        "**U2147483697** · 2025-11-20 23:55:34 UTC\n\n_(message deleted)_\n\n"
        "**U2147483698** · 2025-11-20 23:56:40 UTC\n\na reply that survives in Slack\n"
    )
    assert doc["title"] == "a reply that survives in Slack"
    calls = dict(fake.calls)
    assert (await slack.sync(make_job(), context)).written == 0  # the tombstone is fingerprinted too
    assert fake.calls["conversations.replies"] == calls["conversations.replies"]
    # once its last reply goes, Slack drops the tombstone and the document goes
    fake.delete(C, "1763683000.000300")
    fake.delete(C, root)
    assert (await slack.sync(make_job(), context)).deleted == 1
    assert (await docs(store))[f"{C}/{root}"]["deleted_at"] is not None


async def test_a_first_sync_of_a_tombstone_thread_writes_its_replies(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    fake.reply(C, root, "still here")
    fake.delete(C, root)
    result = await make().sync(make_job(), context)
    assert (result.written, result.deleted) == (1, 0)
    assert (await docs(store))[f"{C}/{root}"]["content"].endswith("still here\n")


async def test_a_parent_gone_from_history_while_replies_remain_keeps_them(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    fake.reply(C, root, "orphan reply")
    slack = make()
    await slack.sync(make_job(), context)
    fake.delete(C, root, tombstone=False)
    result = await slack.sync(make_job(), context)
    assert (result.written, result.deleted) == (1, 0)
    content = (await docs(store))[f"{C}/{root}"]["content"]
    assert "_(message deleted)_" in content and content.endswith("orphan reply\n")


async def test_a_deleted_parent_outside_the_window_keeps_its_replies_by_the_event_hint(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    old = fake.post(C, "old question", ts="1763682934.000200")
    fake.reply(C, old, "old answer")
    slack = make(lookback_seconds=60)
    await slack.sync(make_job(), context)
    fake.advance(100_000)
    fake.post(C, "new")
    await slack.sync(make_job(), context)
    fake.delete(C, old, tombstone=False)
    payload = json.loads((EXAMPLES / "message_deleted.json").read_text())
    payload["event"]["previous_message"].update(thread_ts=old, reply_count=1)
    result = await slack.sync(make_job(payload=payload), context)
    assert (result.written, result.deleted) == (1, 0)
    assert (await docs(store))[f"{C}/{old}"]["content"].endswith("old answer\n")


async def test_a_root_deleted_outside_the_window_is_deleted_by_the_event_hint(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    old = fake.post(C, "old message", ts="1763682934.000200")
    slack = make(lookback_seconds=60)
    await slack.sync(make_job(), context)
    fake.advance(100_000)
    fake.post(C, "new")
    await slack.sync(make_job(), context)
    fake.delete(C, old)
    payload = json.loads((EXAMPLES / "message_deleted.json").read_text())
    result = await slack.sync(make_job(payload=payload), context)
    assert result.deleted == 1
    assert (await docs(store))[f"{C}/{old}"]["deleted_at"] is not None


async def test_a_deleted_reply_updates_its_thread(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    keep = fake.reply(C, root, "first reply")
    drop = fake.reply(C, root, "second reply")
    slack = make()
    await slack.sync(make_job(), context)
    fake.delete(C, drop)
    result = await slack.sync(make_job(), context)
    assert (result.written, result.deleted) == (1, 0)
    content = (await docs(store))[f"{C}/{root}"]["content"]
    assert "first reply" in content and "second reply" not in content
    assert keep


# --------------------------------------------------------------------------- unchanged


async def test_an_unchanged_resync_writes_nothing_and_makes_one_call(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    for i in range(5):
        root = fake.post(C, f"thread {i}")
        fake.reply(C, root, f"reply {i}")
    for i in range(20):
        fake.post(C, f"single {i}")
    slack = make()
    first = await slack.sync(make_job(), context)
    assert first.written == 25
    before_rows = await docs(store)
    calls = dict(fake.calls)
    again = await slack.sync(make_job(), context)
    assert (again.written, again.unchanged, again.deleted) == (0, 25, 0)
    assert fake.calls["conversations.history"] == calls["conversations.history"] + 1
    assert fake.calls["conversations.replies"] == calls["conversations.replies"]
    after_rows = await docs(store)
    assert {k: d["updated_at"] for k, d in after_rows.items()} == {
        k: d["updated_at"] for k, d in before_rows.items()
    }


async def test_without_saved_state_an_unchanged_resync_upserts_as_unchanged(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    fake.reply(C, root, "reply")
    fake.post(C, "single")
    await make().sync(make_job(), context)
    await store.set_state("slack", C, {})  # e.g. state lost: everything is re-rendered
    result = await make().sync(make_job(), context)
    assert (result.written, result.unchanged) == (0, 2)
    rows = await docs(store)
    doc = rows[f"{C}/{root}"]
    # rendering the same thread again is an UNCHANGED write
    outcome = await store.upsert(render_thread(C, _thread_as_api(fake, root)))
    assert outcome is WriteOutcome.UNCHANGED
    assert doc["deleted_at"] is None


def _thread_as_api(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    response = fake.handle("conversations.replies", {"channel": C, "ts": root, "token": TOKEN}, None)
    body = json.loads(bytes(response.body))
    messages: list[dict[str, Any]] = body["messages"]
    return messages


# --------------------------------------------------------------------------- errors


async def test_429_raises_rate_limited_with_retry_after_promptly(
    fake: FakeSlack, make: Make, context: SyncContext
) -> None:
    fake.post(C, "hi")
    fake.rate_limit("conversations.history", retry_after=20)
    start = time.monotonic()
    with pytest.raises(RateLimited) as info:
        await make().sync(make_job(), context)
    assert info.value.retry_after == 20
    assert time.monotonic() - start < 2  # no sleeping inside the call
    assert fake.calls["conversations.history"] == 1


async def test_429_on_replies_keeps_what_was_written(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    a = fake.post(C, "a")
    fake.reply(C, a, "a1")
    b = fake.post(C, "b")
    fake.reply(C, b, "b1")
    fake.rate_limit("conversations.replies", retry_after=3, after=1)
    slack = make()
    with pytest.raises(RateLimited):
        await slack.sync(make_job(), context)
    assert len(live(await docs(store))) == 1
    await slack.sync(make_job(), context)
    assert len(live(await docs(store))) == 2
    assert fake.calls["conversations.replies"] == 3  # the written thread is not fetched again


@pytest.mark.parametrize("error", ["invalid_auth", "token_revoked", "account_inactive", "not_in_channel"])
async def test_permanent_errors(
    fake: FakeSlack, make: Make, store: DocumentStore, error: str, context: SyncContext
) -> None:
    fake.post(C, "hi")
    slack = make()
    await slack.sync(make_job(), context)
    fake.fail("conversations.history", error)
    with pytest.raises(PermanentError, match=error):
        await slack.sync(make_job(), context)
    assert live(await docs(store))  # documents are kept: the channel may still exist


async def test_a_wrong_token_is_invalid_auth(fake: FakeSlack, make: Make, context: SyncContext) -> None:
    fake.post(C, "hi")
    with pytest.raises(PermanentError, match="invalid_auth"):
        await make(token="xoxb-wrong").sync(make_job(), context)


async def test_no_token_is_permanent_and_names_the_variable(make: Make, context: SyncContext) -> None:
    with pytest.raises(PermanentError, match="SLACK_BOT_TOKEN"):
        await make(token=None).sync(make_job(), context)


async def test_channel_not_found_marks_documents_deleted(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    root = fake.post(C, "root")
    fake.reply(C, root, "reply")
    fake.post(C, "single")
    slack = make()
    await slack.sync(make_job(), context)
    assert len(live(await docs(store))) == 2
    fake.remove_channel(C)
    with pytest.raises(PermanentError, match="channel_not_found"):
        await slack.sync(make_job(), context)
    rows = await docs(store)
    assert len(rows) == 2 and live(rows) == set()
    assert await store.get_state("slack", C) == {}


async def test_a_500_is_a_plain_exception_to_retry(fake: FakeSlack, make: Make, context: SyncContext) -> None:
    fake.post(C, "hi")
    fake.server_error("conversations.history", 500)
    with pytest.raises(SlackApiFailure) as info:
        await make().sync(make_job(), context)
    assert not isinstance(info.value, SyncError)
    assert "500" in str(info.value)


async def test_a_network_error_is_a_plain_exception(make: Make, context: SyncContext) -> None:
    with pytest.raises(Exception) as info:
        await make(api_url="http://127.0.0.1:9/api/").sync(make_job(), context)
    assert not isinstance(info.value, SyncError)


# --------------------------------------------------------------------------- other shapes


async def test_own_bot_and_join_messages_are_not_documents(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    human = fake.post(C, "a human")
    fake.post(C, "posted by us", user="U0OURBOT")
    fake.post(C, "<@U9> has joined the channel", user="U9", subtype="channel_join")
    await make(bot_user_id="U0OURBOT").sync(make_job(), context)
    assert set(await docs(store)) == {f"{C}/{human}"}


async def test_block_kit_attachments_and_files_reach_the_document(
    fake: FakeSlack, make: Make, store: DocumentStore, context: SyncContext
) -> None:
    poll = message("poll", "1763683200.000100")
    fake.post(C, poll.pop("text"), user=None, ts=poll.pop("ts"), **poll)
    alert = message("attachment", "1763683300.000100")
    fake.post(C, alert.pop("text"), user=None, ts=alert.pop("ts"), **alert)
    fake.post(C, "", ts="1763683400.000100", files=[{"id": "F1", "name": "plan.pdf"}])
    fake.post(C, "", ts="1763683500.000100")  # nothing at all: no document
    fake.post(C, "", ts="1763683600.000100", files=[{"id": "F2", "mode": "tombstone"}])
    result = await make().sync(make_job(), context)
    assert result.written == 3
    rows = await docs(store)
    assert set(rows) == {f"{C}/1763683200.000100", f"{C}/1763683300.000100", f"{C}/1763683400.000100"}
    assert rows[f"{C}/1763683200.000100"]["content"].endswith(
        "[Add option] · [Results](https://polly.example/r/1) · [Close after ▾] · [2025-11-21 ▾]\n"
    )
    assert "> - **Severity**: critical\n" in rows[f"{C}/1763683300.000100"]["content"]
    assert rows[f"{C}/1763683300.000100"]["title"] == "Alert from Grafana"
    assert rows[f"{C}/1763683400.000100"]["content"].endswith("_(file: plan.pdf · document `file:F1`)_\n")
    # The shared file is reported (its document named above), the deleted one is not.
    assert result.files is not None
    assert [(f.file_id, f.name, f.parent_document_id) for f in result.files] == [
        ("F1", "plan.pdf", f"{C}/1763683400.000100")
    ]


async def test_private_channels_and_the_demo_workspace(
    store: DocumentStore, make: Make, context: SyncContext
) -> None:
    demo = FakeSlack.demo(token=TOKEN)
    with BackgroundServer(demo.app()) as server:
        slack = make(api_url=f"{server.url}/api/")
        payload = json.loads((EXAMPLES / "thread_reply.json").read_text())
        result = await slack.sync(make_job(C, payload), context)
        assert result.written == 4
        rows = await docs(store)
        thread = rows[f"{C}/1763682934.000200"]
        assert "Replying in the thread" in thread["content"]
        assert thread["metadata"]["reply_count"] == 2
        bot = rows[f"{C}/1763683300.000600"]
        assert bot["content"].startswith("**B0BOTID01** (deploybot) · ")
        await slack.sync(make_job("G0PRIVATE1"), context)
        assert len(live(await docs(store, "G0PRIVATE1"))) == 2
    await slack.aclose()
