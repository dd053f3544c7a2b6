"""The dashboard's held deletions (:mod:`debounce.documents.deletions`): the overview lists the
open holds with their reasons; ``POST /admin/holds/{id}/apply`` or ``.../dismiss`` decides one
(CSRF-checked, then back to the overview with a message)."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from debounce.documents import deletions
from debounce.web.dashboard.auth import checked_form, safe_next, signed_in
from debounce.web.dashboard.render import base_path, flash
from debounce.web.errors import ApiError

__all__ = ["resolve"]

log = logging.getLogger("debounce.web")


async def resolve(request: Request) -> Response:
    """``POST /admin/holds/{hold_id}/{apply|dismiss}`` (``csrf_token``, ``back``): apply the
    hold (its documents deleted) or dismiss it (kept live); back to ``back`` (default: the
    overview) with a message saying how many documents it deleted or kept."""
    state = signed_in(request)
    raw, action = request.path_params["hold_id"], request.path_params["action"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18 or action not in deletions.DECISIONS:
        raise ApiError(404, "not_found", f"no hold action {raw[:20]}/{action[:20]}")
    form = await checked_form(request)
    back = safe_next(request, form.get("back") or f"{base_path(request)}/")
    try:
        hold = await deletions.resolve(state.db, int(raw), action)
    except deletions.HoldNotOpen as exc:
        flash(request, "error", f"Nothing done: {exc}.")
    else:
        log.warning(
            "held deletions %s (dashboard)",
            hold.status,
            extra={"hold_id": hold.id, "workspace_id": hold.workspace_id, "documents": hold.resolved},
        )
        verb = "deleted" if hold.status == "applied" else "kept"
        flash(request, "ok", f"Hold {hold.id} {hold.status}: {hold.resolved or 0} document(s) {verb}.")
    return RedirectResponse(back, status_code=303)
