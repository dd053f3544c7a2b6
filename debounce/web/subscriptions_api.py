"""The admin API of push delivery (docs/consumers.md, "Push delivery"; every route requires the
admin token, :func:`~debounce.web.admin_api.require_admin`):

- ``GET /subscriptions``: every subscription with its state and lag;
- ``POST /subscriptions`` ``{"url", "source"?, "workspace_id"?, "kinds"? (of change: the
  feed's ``op``), "document_kinds"? (of document: ``debounce.documents.kinds``), "full_content"?,
  "description"?, "from"?}``: register an endpoint (201 with the subscription and its
  ``secret``, shown this once);
- ``GET /subscriptions/{id}``, ``DELETE /subscriptions/{id}``;
- ``POST /subscriptions/{id}/rotate`` ``{"overlap_seconds"?}`` (default a day): a new secret
  (200 with it), the current one signing too during the overlap;
- ``POST /subscriptions/{id}/disable``, ``…/enable`` (from where it stopped);
- ``POST /subscriptions/{id}/replay`` ``{"from"}``: ``head``, ``oldest`` or a feed cursor.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce import delivery
from debounce.web.admin_api import DIGITS, require_admin
from debounce.web.errors import ApiError
from debounce.web.inputs import source_param

__all__ = ["DEFAULT_OVERLAP_SECONDS", "act", "create", "list_all", "one"]

log = logging.getLogger("debounce.web")

#: How long a rotated secret keeps signing, unless the request says (a day).
DEFAULT_OVERLAP_SECONDS = 86400.0


def _id(request: Request) -> int:
    raw = request.path_params["subscription_id"]
    if not DIGITS.fullmatch(raw) or not 0 < int(raw) < 2**63:
        raise ApiError(404, "not_found", f"no subscription {raw!r}")
    return int(raw)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "bad_request", "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    return body


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = body.get(name, default)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
        raise ApiError(400, "bad_request", f"{name} has the wrong type")
    return value


async def list_all(request: Request) -> Response:
    """``GET /subscriptions``."""
    state = require_admin(request)
    subs = await delivery.list_subscriptions(state.db)
    return JSONResponse({"subscriptions": [s.to_json() for s in subs]})


async def create(request: Request) -> Response:
    """``POST /subscriptions``: 201 ``{"subscription", "secret"}``; 400 on a bad field."""
    state = require_admin(request)
    body = await _body(request)
    url = _field(body, "url", str)
    if not url:
        raise ApiError(400, "bad_request", "url is required")
    source = _field(body, "source", str)
    kinds = _field(body, "kinds", list, [])
    if not all(isinstance(k, str) for k in kinds):
        raise ApiError(400, "bad_request", "kinds must be a list of texts")
    document_kinds = _field(body, "document_kinds", list, [])
    if not all(isinstance(k, str) for k in document_kinds):
        raise ApiError(400, "bad_request", "document_kinds must be a list of texts")
    workspace_id = _field(body, "workspace_id", int)
    try:
        start = await delivery.parse_start(state.db, _field(body, "from", str))
        sub, secret = await delivery.create(
            state.db,
            url,
            start=start,
            source_type=source_param(state.parsers, source) if source else None,
            workspace_id=workspace_id,
            kinds=kinds,
            document_kinds=document_kinds,
            full_content=bool(_field(body, "full_content", bool, False)),
            description=_field(body, "description", str, "") or "",
        )
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    log.info("subscription %d created for %s", sub.id, sub.url)
    return JSONResponse({"subscription": sub.to_json(), "secret": secret}, status_code=201)


async def one(request: Request) -> Response:
    """``GET /subscriptions/{id}`` and ``DELETE`` (204); 404 when there is none."""
    state = require_admin(request)
    sub_id = _id(request)
    try:
        if request.method == "DELETE":
            await delivery.remove(state.db, sub_id)
            log.info("subscription %d removed", sub_id)
            return Response(status_code=204)
        return JSONResponse({"subscription": (await delivery.get(state.db, sub_id)).to_json()})
    except delivery.SubscriptionNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None


async def act(request: Request) -> Response:
    """``POST /subscriptions/{id}/{rotate|disable|enable|replay}``; 404 unknown id or action,
    400 a bad field."""
    state = require_admin(request)
    sub_id = _id(request)
    action = request.path_params["action"]
    body = await _body(request)
    out: dict[str, Any] = {}
    try:
        if action == "rotate":
            overlap = _field(body, "overlap_seconds", (int, float), DEFAULT_OVERLAP_SECONDS)
            sub, out["secret"] = await delivery.rotate(state.db, sub_id, float(overlap))
        elif action == "disable":
            sub = await delivery.disable(state.db, sub_id)
        elif action == "enable":
            sub = await delivery.enable(state.db, sub_id)
        elif action == "replay":
            start_text = _field(body, "from", str)
            if start_text is None:
                raise ApiError(400, "bad_request", "from is required: head, oldest or a cursor")
            sub = await delivery.replay(state.db, sub_id, await delivery.parse_start(state.db, start_text))
        else:
            raise ApiError(404, "not_found", f"no action {action!r} (rotate, disable, enable or replay)")
    except delivery.SubscriptionNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except ValueError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    log.info("subscription %d: %s", sub_id, action)
    return JSONResponse({"subscription": sub.to_json(), **out})
