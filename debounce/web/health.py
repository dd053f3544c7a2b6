"""Liveness, readiness and Prometheus metrics of the web process."""

from __future__ import annotations

import asyncio
import logging

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import PoolTimeout
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce import queue
from debounce.delivery import subscriptions
from debounce.documents import feed
from debounce.migrate import schema_status
from debounce.types import JobStatus
from debounce.web.errors import ApiError
from debounce.web.state import web_state
from debounce.workspaces import sync_costs

__all__ = ["READY_TIMEOUT_SECONDS", "healthz", "metrics", "readyz"]

log = logging.getLogger("debounce.web")

#: Seconds /readyz and /metrics wait for the database before giving up.
READY_TIMEOUT_SECONDS = 2.0
_UNREACHABLE = (TimeoutError, OSError, psycopg.Error, PoolTimeout)


async def healthz(request: Request) -> Response:
    """``GET /healthz``: the process answers (no database involved)."""
    return JSONResponse({"ok": True})


async def readyz(request: Request) -> Response:
    """``GET /readyz``: 200 when the database answers within :data:`READY_TIMEOUT_SECONDS`
    and its schema has every migration of this release; else 503 saying which."""
    state = web_state(request)
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            async with state.db.connection(timeout=READY_TIMEOUT_SECONDS) as conn:
                status = await schema_status(conn)
    except _UNREACHABLE as exc:
        raise ApiError(
            503, "database_unavailable", f"database not reachable ({exc.__class__.__name__})"
        ) from None
    if not status.ok:
        raise ApiError(503, "schema_not_migrated", status.problem())
    return JSONResponse({"ok": True, "database": "reachable", "schema_version": status.current})


async def metrics(request: Request) -> Response:
    """``GET /metrics``: Prometheus text format; the queue-depth gauges, the feed's lag, the
    workspaces' sync costs and the push subscriptions' state are read from the database at
    scrape time (left as they were if it is unreachable)."""
    state = web_state(request)
    state.metrics.feed_waiting.set(state.signal.waiting if state.signal is not None else 0)
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            current = await queue.stats(state.db)
        state.metrics.jobs.clear()
        for source, counts in current["by_source"].items():
            for status in JobStatus:
                state.metrics.jobs.labels(source, status.value).set(counts[status.value])
        state.metrics.oldest_due_age.set(current["oldest_due_age_seconds"])
        state.metrics.workers_alive.set(current["workers"]["alive"])
        age = current["workers"]["last_claim_age_seconds"]
        state.metrics.last_claim_age.set(float("nan") if age is None else age)
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            state.metrics.feed_lag.set(await feed.lag(state.read_db))
            state.metrics.replica_lag.set(await feed.replica_lag(state.read_db))
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            costs = await sync_costs.read(state.db)
        m = state.metrics
        for gauge in (m.sync_requests, m.synced_pages, m.requests_per_page):
            gauge.clear()
        for c in costs:
            labels = (c.source_type, str(c.workspace_id), c.lane)
            m.sync_requests.labels(*labels).set(c.requests)
            m.synced_pages.labels(*labels).set(c.pages)
            if c.per_page is not None:
                m.requests_per_page.labels(*labels).set(round(c.per_page, 4))
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            subs = await subscriptions.list_subscriptions(state.db)
        gauges = (
            m.subscription_lag_changes,
            m.subscription_lag_seconds,
            m.subscription_failed_attempts,
            m.subscription_disabled,
            m.subscription_delivered,
        )
        for gauge in gauges:
            gauge.clear()
        for sub in subs:
            label = str(sub.id)
            m.subscription_lag_changes.labels(label).set(sub.lag_changes)
            m.subscription_lag_seconds.labels(label).set(round(sub.lag_seconds, 3))
            m.subscription_failed_attempts.labels(label).set(sub.attempts)
            m.subscription_disabled.labels(label).set(int(sub.status == "disabled"))
            m.subscription_delivered.labels(label).set(sub.delivered_changes)
    except _UNREACHABLE as exc:
        log.warning("metrics: queue depth or feed lag unavailable (%s)", exc.__class__.__name__)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
