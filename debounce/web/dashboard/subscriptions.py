"""The dashboard's Subscriptions page (push delivery, docs/dashboard.md): each subscription's
endpoint, filters, status (disabled: why), lag (changes and seconds), last answer, failed
attempts of the batch in flight and when it is tried next; and its actions (POST,
CSRF-checked): disable, enable (from where it stopped), replay from the oldest change."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from debounce import delivery
from debounce.web.admin_api import DIGITS
from debounce.web.dashboard.auth import checked_form, signed_in
from debounce.web.dashboard.render import base_path, flash, page
from debounce.web.errors import ApiError

__all__ = ["ACTIONS", "act", "subscriptions"]

log = logging.getLogger("debounce.web")

#: The actions of the page, with what each says when done.
ACTIONS = {"disable": "disabled", "enable": "enabled: delivery goes on from where it stopped",
           "replay": "replaying every change retained"}


async def subscriptions(request: Request) -> Response:
    """``GET /admin/subscriptions``: every subscription with its state and lag."""
    state = signed_in(request)
    subs = await delivery.list_subscriptions(state.read_db)
    return page(request, "subscriptions.html", {"nav": "subscriptions", "subscriptions": subs,
                                                 "here": request.url.path})


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
