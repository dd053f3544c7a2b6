"""``POST /webhooks/{source}``: verify, parse and debounce one delivery.

The source's parser verifies the signature and maps the delivery to page events (no I/O);
the events are validated, debounced in one statement batched with concurrent deliveries
(:class:`~debounce.queue.batcher.EnqueueBatcher`), and answered only after that statement committed
(a 2xx means committed). The whole wait is bounded by ``DEBOUNCE_WEBHOOK_DEADLINE_SECONDS``:
past it the answer is 503, well inside the shortest sender
timeout (3 s). No source API is called on this path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
import psycopg
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from debounce import queue, registry, workspaces
from debounce.contract import WebhookError, WebhookResult
from debounce.types import JobEvent
from debounce.web.errors import ApiError, error_code
from debounce.web.inputs import source_param
from debounce.web.state import WebState, web_state
from debounce.workspaces import verification

__all__ = ["webhook"]

log = logging.getLogger("debounce.web")


class _Json(JSONResponse):
    """``JSONResponse`` serialised by orjson (the same compact UTF-8 JSON, a few times faster)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (without reading it all) anything over ``limit`` bytes.

    Raises:
        ApiError: 413 over the limit; 400 when the client disconnected mid-body.
    """

    def too_large() -> ApiError:
        return ApiError(413, "payload_too_large", f"body exceeds {limit} bytes (DEBOUNCE_MAX_BODY_BYTES)")

    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large()
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "client_disconnected", "the body was not received in full") from None
    return b"".join(chunks)


def _unstorable(exc: psycopg.Error) -> bool:
    """The database refused *this* request's data (invalid text, a value too large for an
    index, nesting too deep), as opposed to being unavailable or our own bug."""
    return isinstance(exc, psycopg.DataError) or (exc.sqlstate or "").startswith("54")


async def webhook(request: Request) -> Response:
    """One delivery of ``source``'s webhooks. Answers 200 with ``{"ok": true, "jobs": [...]}``
    (one entry per event: outcome, job id, due time), the source's handshake reply, or an
    error: 400 unknown source, 413 too large, 400 malformed or unstorable, 401 bad signature,
    503 source not configured or database unavailable."""
    state = web_state(request)
    source = source_param(state.parsers, request.path_params["source"])
    try:
        body = await read_body(request, state.settings.max_body_bytes)
        result = _parse(state, source, request, body)
        if result.verification_token:
            return await _handshake(state, source, result.verification_token)
        if result.revoked_workspace:
            return await _revoked(state, source, result.revoked_workspace)
        return await _enqueue(state, source, result)
    except Exception as exc:
        # Counted by the code the error boundary answers with (debounce.web.errors): a
        # transient database state becomes its 503 there, and nowhere else.
        code = error_code(exc)
        if code is not None:
            state.metrics.count_webhook(source, code)
        raise


def _parse(state: WebState, source: str, request: Request, body: bytes) -> WebhookResult:
    try:
        result = state.parsers[source].parse_webhook(request.headers, body)
    except RecursionError:
        raise ApiError(400, "malformed_body", "the JSON body is nested too deeply") from None
    except WebhookError as exc:
        log.info(
            "webhook refused: %s",
            exc.detail,
            extra={"source": source, "status": exc.status, "error": exc.error},
        )
        raise ApiError(exc.status, exc.error, exc.detail) from None
    if result.warning:
        state.metrics.warnings.labels(source).inc()
        log.warning("%s webhook: %s", source, result.warning, extra={"source": source})
    return result


async def _handshake(state: WebState, source: str, token: str) -> Response:
    problem = queue.unstorable(token)
    if problem:
        raise ApiError(400, "malformed_body", f"verification_token {problem}")
    async with asyncio.timeout(state.settings.webhook_deadline_seconds):
        await verification.save(state.db, source, token)
    spec = registry.sources().get(source)
    log.warning(
        "%s verification token received: %r — paste it into the source's webhook settings to "
        "verify the endpoint, then set it as %s (also shown by `debounce %s`)",
        source,
        token,
        (spec.secret_env() if spec else None) or "the source's signing secret",
        (spec.handshake_command if spec else None) or "documents",
        extra={"source": source},
    )
    state.metrics.count_webhook(source, "handshake")
    return JSONResponse({"ok": True, "detail": "verification token received"})


async def _revoked(state: WebState, source: str, external_id: str) -> Response:
    """The source says a workspace's token is gone: mark it revoked (its jobs wait)."""
    async with asyncio.timeout(state.settings.webhook_deadline_seconds):
        changed = await workspaces.revoke_by_external_id(
            state.db, source, external_id, "the source reported the app uninstalled or its token revoked"
        )
        if state.directory is not None:
            await state.directory.refresh(force=True)
    state.metrics.count_webhook(source, "workspace_revoked")
    return JSONResponse(
        {
            "ok": True,
            "detail": f"workspace {external_id} marked revoked"
            if changed
            else f"workspace {external_id} is not connected",
        }
    )


async def _routed(state: WebState, source: str, result: WebhookResult) -> list[tuple[Any, int | None]]:
    """The events of ``result`` with the workspace each goes to; events of a workspace that is
    not connected (or revoked) are dropped and counted."""
    directory = state.directory
    if directory is None:
        return [(e, None) for e in result.events]
    if directory.stale():  # the re-read is the only I/O: bounded by the deadline
        async with asyncio.timeout(state.settings.webhook_deadline_seconds):
            await directory.refresh()
    kept = []
    for event in result.events:
        route = directory.lookup(source, event.workspace, event.enterprise)
        if route.accept:
            kept.append((event, route.workspace_id))
        else:
            state.metrics.count_webhook(source, route.reason)
    return kept


def _events(state: WebState, source: str, routed: list[tuple[Any, int | None]]) -> list[JobEvent]:
    """The routed page events as the queue's events, each payload serialised and checked once
    (:func:`debounce.queue.payload_text`) and every other field validated.

    Raises:
        ApiError: 400 ``malformed_body`` naming what the database could not store.
    """
    settings = state.settings
    window = settings.window(source)
    events = []
    try:
        for e, workspace_id in routed:
            event = JobEvent(
                source_type=source,
                source_page_id=e.source_page_id,
                payload=e.payload,
                event_id=e.event_id,
                debounce_seconds=window.debounce_seconds,
                max_wait_seconds=window.max_wait_seconds,
                max_attempts=settings.max_attempts,
                workspace_id=workspace_id,
                kinds=tuple(e.kinds),
                payload_json=(queue.payload_text(e.payload) if isinstance(e.payload, Mapping) else None),
            )
            queue.validate_event(event)
            events.append(event)
    except ValueError as exc:
        raise ApiError(400, "malformed_body", str(exc)) from None
    return events


async def _enqueue(state: WebState, source: str, result: WebhookResult) -> Response:
    settings = state.settings
    routed = await _routed(state, source, result)
    if result.events and not routed:
        return _Json({"ok": True, "detail": "workspace not connected: nothing enqueued", "jobs": []})
    events = _events(state, source, routed)
    if not events:
        state.metrics.count_webhook(source, "handshake" if result.reply else "ignored")
        if result.note:
            log.info("%s webhook acknowledged: %s", source, result.note, extra={"source": source})
        return _Json(
            result.reply
            if result.reply is not None
            else {"ok": True, "detail": result.note or "nothing to sync"}
        )
    assert state.batcher is not None, "the app's lifespan has not started"
    started = time.perf_counter()
    try:
        # The deadline bounds the whole wait (a pool connection, the batch's statement and its
        # commit). A batch that commits after we answered 503 is harmless: the redelivery
        # carries the same event id.
        async with asyncio.timeout(settings.webhook_deadline_seconds):
            outcomes = await state.batcher.submit(events)
    except psycopg.Error as exc:
        if _unstorable(exc):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ApiError(
                400, "unstorable_event", f"the database cannot store this event: {first}"
            ) from None
        raise
    state.metrics.enqueue_seconds.observe(time.perf_counter() - started)
    debug = log.isEnabledFor(logging.DEBUG)
    jobs = []
    for event, (outcome, job_id, scheduled_at) in zip(events, outcomes, strict=True):
        state.metrics.count_webhook(source, outcome.value)
        due = scheduled_at.isoformat() if scheduled_at is not None else None
        if debug and job_id is not None:
            log.debug(
                "event %s",
                outcome.value,
                extra={"job_id": job_id, "source": source, "page": event.source_page_id, "scheduled_at": due},
            )
        jobs.append({"outcome": outcome.value, "job_id": job_id, "scheduled_at": due})
    body_out: dict[str, Any] = dict(result.reply) if result.reply else {"ok": True}
    body_out["jobs"] = jobs
    return _Json(body_out)
