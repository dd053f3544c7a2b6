"""Hostile input and a slow database at the HTTP surface (issue 16, cases 3, 5, 6, 7): every
bad request is a 4xx with a JSON body, one poison event fails nobody else, and a webhook is
answered within its deadline whatever the database does."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from test_web import ADMIN, body_of, post, rows, settings

from debounce import queue
from debounce.queue.batcher import EnqueueBatcher
from debounce.types import JobEvent
from debounce.web import create_app

AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        yield c


def slack_message(channel: str, text: str, event_id: str) -> bytes:
    envelope = json.loads(body_of("slack", "message.json"))
    envelope["event"]["channel"] = channel
    envelope["event"]["text"] = text
    envelope["event_id"] = event_id
    return json.dumps(envelope).encode()


@pytest.mark.parametrize(
    ("text", "channel", "event_id", "why"),
    [
        ("nul \u0000 inside", "C1", "EvNUL", "NUL"),
        ("lone \ud800 surrogate", "C1", "EvSUR", "surrogate"),
        ("fine", "C1", "Ev" + "x" * 3000, "longer than"),
        ("fine", "C" + "1" * 3000, "EvLONGPAGE", "longer than"),
    ],
)
async def test_unstorable_events_are_400_before_batching(
    client: httpx.AsyncClient,
    pool: AsyncConnectionPool[Any],
    text: str,
    channel: str,
    event_id: str,
    why: str,
) -> None:
    resp = await post(client, "slack", slack_message(channel, text, event_id))
    assert resp.status_code == 400, resp.text
    assert why in resp.json()["detail"]
    assert await rows(pool) == []
    assert await rows(pool, "select * from seen_events") == []


async def test_a_poison_event_among_200_concurrent_deliveries_fails_only_itself(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    poison = [post(client, "slack", slack_message("C1", f"bad {i} \u0000", f"EvBAD{i}")) for i in range(10)]
    innocent = [post(client, "slack", slack_message(f"C{i % 20}", f"ok {i}", f"EvOK{i}")) for i in range(190)]
    answers = await asyncio.gather(*poison, *innocent)
    assert [r.status_code for r in answers[:10]] == [400] * 10
    assert [r.status_code for r in answers[10:]] == [200] * 190
    (count,) = (await rows(pool, "select count(*) from seen_events"))[0]
    assert count == 190


async def test_a_batch_the_database_refuses_is_retried_request_by_request(
    pool: AsyncConnectionPool[Any],
) -> None:
    """Defence in depth behind validation: if the batched statement still fails for a reason
    other than the database being unavailable, only the request that caused it fails."""
    batcher = EnqueueBatcher(pool, flushers=1)
    batcher.start()

    def ev(page: str, event_id: str) -> JobEvent:
        return JobEvent(
            source_type="slack",
            source_page_id=page,
            payload={"p": page},
            event_id=event_id,
            debounce_seconds=30,
            max_wait_seconds=300,
        )

    try:
        # Not validated first (as the web would): an index entry too large for a B-tree, so
        # the batch statement fails with ProgramLimitExceeded for every request in it.
        bad = ev("C-bad", "Ev" + "".join(f"{i:x}" for i in range(3000)))
        results = await asyncio.gather(
            *[batcher.submit([ev(f"C{i}", f"Ev{i}")]) for i in range(20)],
            batcher.submit([bad]),
            *[batcher.submit([ev(f"C{i}", f"Ev{i + 100}")]) for i in range(20)],
            return_exceptions=True,
        )
    finally:
        await batcher.stop()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert isinstance(failures[0], psycopg.errors.ProgramLimitExceeded), failures
    assert len(await rows(pool)) == 20


async def test_admin_routes_answer_4xx_for_hostile_parameters(client: httpx.AsyncClient) -> None:
    cases = {
        "/jobs/\u00b2": 404,
        "/jobs/99999999999999999999": 404,
        "/jobs/%00": 400,
        "/jobs?cursor=99999999999999999999": 400,
        "/jobs?cursor=\u00b2": 400,
        "/jobs?limit=-1": 400,
        "/jobs?page_id=%00": 400,
        "/jobs?source=%00": 400,
        "/jobs?status=%00": 400,
        "/%00": 400,
    }
    for path, status in cases.items():
        resp = await client.get(path, headers=AUTH)
        assert resp.status_code == status, (path, resp.text)
        assert resp.json()["error"], path
    for path, status in {
        "/resync/slack/%00": 400,
        "/resync/%00/x": 400,
        "/jobs/%00/retry": 400,
        "/jobs/99999999999999999999/retry": 404,
    }.items():
        resp = await client.post(path, headers=AUTH)
        assert resp.status_code == status, (path, resp.text)


async def test_a_body_nested_100000_deep_is_400(client: httpx.AsyncClient) -> None:
    deep = b'{"type": "event_callback", "event": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for source in ("slack", "notion"):
        resp = await post(client, source, deep)
        assert resp.status_code == 400, (source, resp.text)
        assert resp.json()["error"] == "malformed_body"


async def test_unhandled_errors_log_one_traceback_per_route_and_type(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    from starlette.routing import Route

    async def broken(request: Any) -> Any:
        raise RuntimeError("bug")

    app: Any = client._transport.app  # type: ignore[attr-defined]
    app.router.routes.append(Route("/broken", broken))
    for _ in range(5):
        resp = await client.get("/broken")
        assert resp.status_code == 500 and resp.json()["error"] == "internal_error"
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1
    assert sum("unhandled error" in r.getMessage() for r in caplog.records) == 5


async def test_a_webhook_is_answered_within_its_deadline_when_the_database_is_frozen(
    database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    """Case 7: a lock freezes every write; the webhook is answered 503 within its deadline
    (not after the freeze), and the statement is cancelled server-side: nothing is written,
    even once the freeze ends."""
    app = create_app(settings(database_url=database_url, webhook_deadline_seconds=0.5))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        assert (await c.get("/readyz")).status_code == 200
        async with await psycopg.AsyncConnection.connect(database_url) as freezer:
            await freezer.execute("lock table seen_events in access exclusive mode")
            started = time.monotonic()
            resp = await post(c, "notion", body_of("notion", "page.created.json"))
            elapsed = time.monotonic() - started
            assert resp.status_code == 503, resp.text
            assert resp.headers["retry-after"]
            assert elapsed < 1.5, elapsed
            await asyncio.sleep(1.0)  # past the server-side statement_timeout too
        await asyncio.sleep(0.3)
    assert await rows(pool, "select * from seen_events") == []
    assert await rows(pool) == []


async def test_control_characters_from_requests_cannot_forge_log_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from debounce.infra.logs import TextFormatter

    record = logging.LogRecord(
        "debounce.web",
        logging.WARNING,
        __file__,
        1,
        "token received: %r %s",
        ("a", "x\nWARNING forged"),
        None,
    )
    line = TextFormatter().format(record)
    assert "\n" not in line and "\\nWARNING forged" in line


def test_queue_refuses_unstorable_ids_with_value_error() -> None:
    for bad in ("a\x00b", "\udc80", "x" * 600):
        with pytest.raises(ValueError):
            queue.validate_event(
                JobEvent(
                    source_type="slack",
                    source_page_id=bad,
                    payload={},
                    event_id=None,
                    debounce_seconds=1,
                    max_wait_seconds=1,
                )
            )
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(100):
        cursor["a"] = {}
        cursor = cursor["a"]
    with pytest.raises(ValueError, match="nested deeper"):
        queue.check_payload(deep)


async def test_unsigned_handshakes_store_a_bounded_number_of_tokens(
    pool: AsyncConnectionPool[Any],
) -> None:
    """Case 5, before a secret exists: anyone may send a verification request; 200 of them
    leave at most 5 tokens, and the newest is the one shown."""
    app = create_app(settings(notion_webhook_secret=None), pool=pool)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        for i in range(200):
            body = json.dumps({"verification_token": f"secret_{i:020d}"}).encode()
            assert (await c.post("/webhooks/notion", content=body)).status_code == 200
        newest = await c.get("/admin/verification-token/notion", headers=AUTH)
        assert newest.json()["token"] == f"secret_{199:020d}"
    assert (await rows(pool, "select count(*) from verification_tokens"))[0][0] == 5


async def test_unsigned_handshake_after_setup_is_401_and_stores_nothing(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    body = json.dumps({"verification_token": "secret_attacker0000000000000000"}).encode()
    resp = await client.post("/webhooks/notion", content=body)
    assert resp.status_code == 401 and resp.json()["error"] == "invalid_signature"
    assert await rows(pool, "select * from verification_tokens") == []
    assert (await client.get("/admin/verification-token/notion", headers=AUTH)).status_code == 404


async def test_non_ascii_slack_signature_is_401(client: httpx.AsyncClient) -> None:
    body = body_of("slack", "message.json")
    for signature in ("v0=\u00e9\u00e9", "v0=abc\u2603"):
        resp = await client.post(
            "/webhooks/slack",
            content=body,
            headers={
                b"X-Slack-Request-Timestamp": str(int(time.time())).encode("ascii"),
                b"X-Slack-Signature": signature.encode("utf-8"),
            },
        )
        assert resp.status_code == 401, resp.text
        assert resp.json()["error"] == "invalid_signature"


async def test_a_read_only_database_is_503_with_retry_after_for_webhooks(
    database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    """Case 4 at the web: during a failover every write raises ``ReadOnlySqlTransaction``;
    a delivery is answered 503 with ``Retry-After`` (so the sender redelivers), not 500."""

    async def read_only(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("select set_config('default_transaction_read_only', 'on', false)")

    ro: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=2,
        open=False,
        kwargs={"autocommit": True},
        configure=read_only,
        timeout=5,
    )
    await ro.open(wait=True)
    try:
        app = create_app(settings(), pool=ro)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
        ):
            resp = await post(c, "notion", body_of("notion", "page.created.json"))
            assert resp.status_code == 503 and resp.headers["retry-after"], resp.text
            assert resp.json()["error"] == "database_unavailable"
            admin = await c.post("/resync/notion/59833787-2cf9-4fdf-8782-e53db20768a5", headers=AUTH)
            assert admin.status_code == 503
    finally:
        await ro.close()
    assert await rows(pool) == []
