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
        client: Any, pool: AsyncConnectionPool[Any], receiver: Receiver) -> None:  # noqa: F811
    sub, _ = await delivery.create(pool, receiver.url, start=delivery.Start(None),
                                   source_type="notion", description="search index")
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
    assert (await client.post("/admin/subscriptions/99/enable",
                              data={"csrf_token": token})).status_code == 404
