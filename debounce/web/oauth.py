"""The install flows: ``GET /{source}/install`` sends the user to the source's authorize page
with a single-use ``state``; ``GET /{source}/oauth_redirect`` checks the state, lets the
source exchange the code and store the workspace (credentials encrypted), and shows a page.
A bad, reused or expired state, or an error from the source, shows a clear page and stores
nothing. Each source's flow is its :class:`~debounce.contract.Installer`.
"""

from __future__ import annotations

import html
import logging
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from debounce import registry, workspaces
from debounce.contract import Installer, InstallError
from debounce.infra.secrets import Keyring, SecretKeyError
from debounce.web.state import WebState, web_state

__all__ = ["install", "oauth_redirect"]

log = logging.getLogger("debounce.web")

_PAGE = (
    "<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body><h1>{title}</h1><p>{body}</p></body></html>"
)


def _page(status: int, title: str, body: str) -> HTMLResponse:
    return HTMLResponse(_PAGE.format(title=html.escape(title), body=html.escape(body)), status_code=status)


def _installer(state: WebState, source: str) -> Installer | HTMLResponse:
    spec = registry.sources().get(source)
    if spec is None or spec.installer is None:
        return _page(404, "Unknown source", f"debounce has no install flow for {source!r}.")
    try:
        return spec.installer(spec.configure(state.settings))
    except InstallError as exc:
        return _page(503, "Install flow not configured", exc.reason)


def _redirect_uri(request: Request, source: str) -> str:
    base = (request.app.state.web.settings.public_url or str(request.base_url)).rstrip("/")
    return f"{base}/{source}/oauth_redirect"


async def install(request: Request) -> Response:
    """``GET /{source}/install``: a fresh state, then a redirect to the authorize page."""
    state = web_state(request)
    source = request.url.path.strip("/").split("/")[0]
    flow = _installer(state, source)
    if isinstance(flow, HTMLResponse):
        return flow
    token = await workspaces.issue_state(state.db, source)
    return RedirectResponse(flow.authorize_url(token, _redirect_uri(request, source)), status_code=302)


async def oauth_redirect(request: Request) -> Response:
    """``GET /{source}/oauth_redirect?code=…&state=…`` (or ``?error=…``)."""
    state = web_state(request)
    source = request.url.path.strip("/").split("/")[0]
    flow = _installer(state, source)
    if isinstance(flow, HTMLResponse):
        return flow
    params = request.query_params
    given = params.get("state") or ""
    if not await workspaces.consume_state(state.db, source, given):
        log.warning("%s install refused: unknown, reused or expired state", source)
        return HTMLResponse(
            flow.failure_page(
                "This install link is invalid, was already used, or expired. Start the installation again."
            ),
            status_code=400,
        )
    if params.get("error") or not params.get("code"):
        reason = params.get("error") or "no authorization code"
        return HTMLResponse(
            flow.failure_page(f"The installation was not completed ({reason})."), status_code=400
        )
    try:
        keyring = Keyring(state.settings.secret_key)
    except SecretKeyError as exc:
        return _page(503, "Secret key not configured", str(exc))
    save: Any = partial(workspaces.save, state.db, keyring)
    try:
        installed = await flow.complete(params["code"], _redirect_uri(request, source), save)
    except InstallError as exc:
        log.warning("%s install failed: %s", source, exc.reason)
        return HTMLResponse(flow.failure_page(exc.reason), status_code=400)
    if state.directory is not None:
        await state.directory.refresh(force=True)
    ws = installed.workspace
    log.info(
        "%s workspace %s (%s) connected, token %s",
        source,
        ws.get("external_id"),
        ws.get("name"),
        ws.get("token_fingerprint"),
    )
    return HTMLResponse(flow.success_page(installed))
