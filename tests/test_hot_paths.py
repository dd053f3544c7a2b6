"""Issue 24's shortcuts say the same as the long ways: a payload serialised once and checked
from its text (``queue.payload_text``), the web's brief enqueue, and the claim that brings each
job's workspace row (and the worker's decrypted-token cache)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet

from debounce import queue, workspaces
from debounce.config import Settings
from debounce.infra.secrets import Keyring
from debounce.types import EnqueueOutcome, JobEvent
from debounce.worker.decrypter import Decrypter
from debounce.worker.key_check import CredentialMarks
from debounce.worker.loop import Worker
from standins.noop import NoopSyncer

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
Conn = psycopg.AsyncConnection[Any]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


def test_payload_text_is_the_payloads_json() -> None:
    payload = {
        "type": "page.content_updated",
        "entity": {"id": "p-1"},
        "text": "é ✓",
        "list": [1, 2.5, None, True],
        "brackets": "[[[{{{",
    }
    text = queue.payload_text(payload)
    assert json.loads(text) == payload
    assert "é ✓" in text  # UTF-8, not \u escapes


@pytest.mark.parametrize(
    "payload",
    [
        {"a": {"b": "nul\x00here"}},
        {"key\x00": 1},
        {"a": ["lone \ud800 surrogate"]},
        nested(65),
    ],
)
def test_payload_text_refuses_what_check_payload_refuses_with_its_message(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as walked:
        queue.check_payload(payload)
    with pytest.raises(ValueError) as fast:
        queue.payload_text(payload)
    assert str(fast.value) == str(walked.value)


def test_payload_text_accepts_what_only_looks_suspicious_in_text() -> None:
    # 64 levels deep (the limit), text that spells an escaped NUL, 200 brackets inside strings:
    # the text alone cannot clear them, the walk does.
    for payload in (nested(64), {"s": "\\u0000 is how JSON writes NUL"}, {"s": "[" * 100 + "{" * 100}):
        queue.check_payload(payload)
        assert json.loads(queue.payload_text(payload)) == payload


async def test_enqueue_brief_answers_outcome_job_and_due_time_of_the_stored_job(conn: Conn) -> None:
    def event(page: str, event_id: str) -> JobEvent:
        return JobEvent(
            source_type="notion",
            source_page_id=page,
            payload={"id": event_id},
            event_id=event_id,
            debounce_seconds=30,
            max_wait_seconds=300,
        )

    first = await queue.enqueue(conn, [event("p1", "e1"), event("p2", "e2")], now=at(0))
    assert [b.outcome for b in first] == [EnqueueOutcome.CREATED, EnqueueOutcome.CREATED]
    assert [b.scheduled_at for b in first] == [at(30), at(30)]
    again = await queue.enqueue(conn, [event("p1", "e3"), event("p1", "e1")], now=at(10))
    assert [b.outcome for b in again] == [EnqueueOutcome.DEBOUNCED, EnqueueOutcome.DUPLICATE]
    assert [b.job_id for b in again] == [first[0].job_id, first[0].job_id]
    assert again[0].scheduled_at == at(40)
    (brief,) = await queue.enqueue(conn, [event("p2", "e4")], now=at(20))
    assert first[1].job_id is not None
    full = await queue.get(conn, first[1].job_id)
    assert full is not None and brief.job_id == full.id and brief.scheduled_at == full.scheduled_at
    assert full.payload == {"id": "e4"}  # the text sent was stored as jsonb
    assert full.event_count == 2


async def test_the_claim_brings_each_jobs_workspace_and_a_token_is_decrypted_once(
    conn: Conn, pool: Any
) -> None:
    secret = Fernet.generate_key().decode()
    token = Keyring(secret).encrypt({"access_token": "xoxb-1"})
    cur = await conn.execute(
        "insert into workspaces (source_type, external_id, name, origin, credentials) "
        "values ('notion', 'W1', 'one', 'cli', %s) returning id",
        (token,),
    )
    row = await cur.fetchone()
    assert row is not None
    workspace_id = int(row[0])
    events = [
        JobEvent(
            source_type="notion",
            source_page_id=f"p{i}",
            payload={"i": i},
            event_id=f"e{i}",
            debounce_seconds=0,
            max_wait_seconds=300,
            workspace_id=workspace_id if i < 2 else None,
        )
        for i in range(3)
    ]
    await queue.enqueue(conn, events, now=at(0))
    claimed = await queue.claim(conn, "w1", limit=8, lease_seconds=60, source_slots={"notion": 8}, now=at(1))
    by_page = {c.job.source_page_id: c for c in claimed}
    assert set(by_page) == {"p0", "p1", "p2"}
    assert by_page["p2"].workspace is None
    ws = by_page["p0"].workspace
    assert ws is not None
    assert (ws.id, ws.status, ws.origin, ws.external_id) == (workspace_id, "active", "cli", "W1")
    assert ws.credentials == token

    decrypter = Decrypter(Keyring(secret), CredentialMarks(pool), pool)
    first = await decrypter.credentials(by_page["p0"].workspace)
    assert first is not None and first["access_token"] == "xoxb-1"
    assert len(decrypter._decrypted) == 1
    second = await decrypter.credentials(by_page["p1"].workspace)
    assert second == first and second is not first
    assert len(decrypter._decrypted) == 1
    # a stored token this worker cannot decrypt still marks the workspace
    other = Decrypter(Keyring(Fernet.generate_key().decode()), CredentialMarks(pool), pool)
    with pytest.raises(workspaces.CredentialsUnreadable):
        await other.credentials(by_page["p0"].workspace)
    cur = await conn.execute("select credentials_error from workspaces where id = %s", (workspace_id,))
    marked = await cur.fetchone()
    assert marked is not None and marked[0]


async def test_a_source_found_empty_is_set_aside_until_its_due_time_or_a_wake(
    pool: Any, database_url: str
) -> None:
    """An empty claim round sets every source it asked for aside (no claim and no due-time
    query for them) until the due-time query's answer, bounded by the poll interval; the loop
    sleeps no longer than that; a notification (``wake``) asks them again."""
    settings = Settings(database_url="unused", poll_interval_seconds=1.0, worker_concurrency=4)
    worker = Worker(settings, pool, {"noop": NoopSyncer(), "other": NoopSyncer()}, conninfo=database_url)
    assert {s for s, _ in worker._eligible()} == {"noop", "other"}
    delay = await worker._claim_round()  # nothing pending: an empty claim, one due-time query
    assert 0.9 <= delay <= 1.0
    assert worker._eligible() == []  # both set aside
    assert set(worker._nothing_until) == {"noop", "other"}
    # A job due in 0.3 s (no notification: not due within the web's window): the next empty
    # round learns it and sets the sources aside only that long.
    worker.wake()
    await queue.enqueue(pool, [JobEvent("noop", "p1", {}, "e1", 0.3, 300)])
    delay = await worker._claim_round()
    assert delay <= 0.35
    assert worker._eligible() == []
    # Woken early (a sync ended), with the sources still set aside: sleep only until the
    # first of them may have a job, not a whole poll interval.
    delay = await worker._claim_round()
    assert delay <= 0.35
    worker.wake()
    assert {s for s, _ in worker._eligible()} == {"noop", "other"}
