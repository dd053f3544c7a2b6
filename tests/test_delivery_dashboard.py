"""The dashboard's Subscriptions page: each subscription's lag (changes and seconds), last
answer, attempts and next retry, from a real failed delivery; disable, enable and replay."""

from __future__ import annotations

from datetime import UTC, datetime
from html import unescape
from typing import Any

import aiohttp
import pytest
from psycopg_pool import AsyncConnectionPool
from push_receiver import Answer, Receiver
from standardwebhooks import Webhook
from test_dashboard import app as app
from test_dashboard import client, csrf_of, sign_in  # noqa: F401  (the fixtures)
from test_delivery import doc, write

from debounce import delivery
from debounce.delivery import deliverer as d


@pytest.fixture
def receiver() -> Any:
    with Receiver() as r:
        yield r


async def test_the_page_shows_lag_last_answer_attempts_and_next_retry(
    client: Any,  # noqa: F811  (the fixture imported above)
    pool: AsyncConnectionPool[Any],
    receiver: Receiver,
) -> None:
    sub, _ = await delivery.create(
        pool, receiver.url, start=delivery.Start(None), source_type="notion", description="search index"
    )
    await write(pool, [doc(1), doc(2)])
    receiver.script = [Answer(503)]
    settings = d.DeliverySettings(timeout_seconds=2.0)
    async with aiohttp.ClientSession() as http:
        (held,) = await d.lease(pool, "w1", 1, settings.lease)
        deliverer = d.Deliverer(pool, http, settings, *held)
        now = datetime.now(UTC)
        await deliverer.step(now=now)
    state = await delivery.get(pool, sub.id)
    assert state.attempts == 1 and state.last_status == 503 and state.lag_changes == 2
    await sign_in(client)
    html = unescape((await client.get("/admin/subscriptions")).text)
    assert receiver.url in html and "search index" in html and "notion, every kind" in html
    assert "2 changes" in html and "HTTP 503" in html
    assert f"{state.next_attempt_at:%Y-%m-%d %H:%M:%S}" in html
    token = csrf_of(html)
    off = await client.post(f"/admin/subscriptions/{sub.id}/disable", data={"csrf_token": token})
    assert off.status_code == 303
    html = unescape((await client.get("/admin/subscriptions")).text)
    assert "disabled by an operator" in html and f"Subscription {sub.id} disabled." in html
    on = await client.post(f"/admin/subscriptions/{sub.id}/enable", data={"csrf_token": token})
    assert on.status_code == 303 and (await delivery.get(pool, sub.id)).status == "active"
    refused = await client.post(f"/admin/subscriptions/{sub.id}/disable", data={})
    assert refused.status_code == 403
    assert (
        await client.post("/admin/subscriptions/99/enable", data={"csrf_token": token})
    ).status_code == 404


async def test_the_page_registers_an_endpoint_and_shows_its_secret_once(
    client: Any,  # noqa: F811  (the fixture imported above)
    pool: AsyncConnectionPool[Any],
) -> None:
    await sign_in(client)
    token = csrf_of((await client.get("/admin/subscriptions")).text)
    made = await client.post(
        "/admin/subscriptions",
        data={
            "csrf_token": token,
            "url": "https://consumer.example/hook",
            "source": "notion",
            "kind": "delete",
            "start": "oldest",
            "full_content": "on",
            "description": "index",
        },
    )
    assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
    (sub,) = await delivery.list_subscriptions(pool)
    assert (sub.url, sub.source_type, sub.kinds, sub.full_content, sub.cursor) == (
        "https://consumer.example/hook",
        "notion",
        ["delete"],
        True,
        None,
    )
    secret = (
        unescape(made.text)
        .split("shown this once (the receiver verifies each delivery with it): <code>")[1]
        .split("</code>")[0]
    )
    assert secret.startswith("whsec_")
    Webhook(secret)  # a secret the receivers' library takes
    again = unescape((await client.get("/admin/subscriptions")).text)
    assert secret not in again  # never shown again
    bad = await client.post("/admin/subscriptions", data={"csrf_token": token, "url": "ftp://x"})
    assert bad.status_code == 303
    assert "Not added: url must be an absolute http(s) URL" in unescape(
        (await client.get("/admin/subscriptions")).text
    )
    assert len(await delivery.list_subscriptions(pool)) == 1
