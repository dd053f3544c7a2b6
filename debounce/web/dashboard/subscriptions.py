"""The dashboard's Subscriptions page (push delivery, docs/dashboard.md): each subscription's
endpoint, filters, status (disabled: why), lag (changes and seconds), last answer, failed
attempts of the batch in flight and when it is tried next; a form that registers one (its
secret shown on the page that answers, once); and its actions (POST, CSRF-checked): disable,
enable (from where it stopped), replay from the oldest change."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from debounce import delivery
from debounce.web.admin_api import DIGITS
from debounce.web.dashboard.auth import checked_form, signed_in
from debounce.web.dashboard.render import base_path, flash, page
from debounce.web.errors import ApiError

__all__ = ["ACTIONS", "act", "add", "subscriptions"]

log = logging.getLogger("debounce.web")

#: The actions of the page, with what each says when done.
ACTIONS = {
    "disable": "disabled",
    "enable": "enabled: delivery goes on from where it stopped",
    "replay": "replaying every change retained",
}


async def subscriptions(request: Request) -> Response:
    """``GET /admin/subscriptions``: every subscription with its state and lag."""
    state = signed_in(request)
    subs = await delivery.list_subscriptions(state.read_db)
    return page(
        request,
        "subscriptions.html",
        {
            "nav": "subscriptions",
            "subscriptions": subs,
            "sources": sorted(state.parsers),
            "kinds": delivery.KINDS,
            "created": None,
            "secret": None,
        },
    )


async def add(request: Request) -> Response:
    """``POST /admin/subscriptions`` (``url``, ``source``, ``kind``, ``full_content``,
    ``start``, ``description``, ``csrf_token``): register an endpoint; the page that answers
    shows its secret, this once (``no-store``). Bad input: back to the page with a message."""
    state = signed_in(request)
    form = await checked_form(request)
    source = form.get("source") or None
    kind = form.get("kind") or None
    try:
        if source is not None and source not in state.parsers:
            raise ValueError(f"unknown source {source!r}")
        start = await delivery.parse_start(state.db, form.get("start") or "head")
        sub, secret = await delivery.create(
            state.db,
            form.get("url", "").strip(),
            start=start,
            source_type=source,
            kinds=[kind] if kind else [],
            full_content=form.get("full_content") == "on",
            description=form.get("description", "").strip()[:500],
        )
    except ValueError as exc:
        flash(request, "error", f"Not added: {exc}.")
        return RedirectResponse(f"{base_path(request)}/subscriptions", status_code=303)
    log.info("subscription %d created for %s (dashboard)", sub.id, sub.url)
    subs = await delivery.list_subscriptions(state.db)
    return page(
        request,
        "subscriptions.html",
        {
            "nav": "subscriptions",
            "subscriptions": subs,
            "sources": sorted(state.parsers),
            "kinds": delivery.KINDS,
            "created": sub,
            "secret": secret,
        },
    )


async def act(request: Request) -> Response:
    """``POST /admin/subscriptions/{id}/{disable|enable|replay}`` (``csrf_token``): back to
    the page with a message. 404: no such subscription or action."""
    state = signed_in(request)
    raw, action = request.path_params["subscription_id"], request.path_params["action"]
    if not DIGITS.fullmatch(raw) or action not in ACTIONS:
        raise ApiError(404, "not_found", f"no subscription action {raw}/{action}")
    await checked_form(request)
    sub_id = int(raw)
    try:
        if action == "disable":
            await delivery.disable(state.db, sub_id)
        elif action == "enable":
            await delivery.enable(state.db, sub_id)
        else:
            await delivery.replay(state.db, sub_id, delivery.Start(None))
    except delivery.SubscriptionNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    log.info("subscription %d: %s (dashboard)", sub_id, action)
    flash(request, "ok", f"Subscription {sub_id} {ACTIONS[action]}.")
    return RedirectResponse(f"{base_path(request)}/subscriptions", status_code=303)
