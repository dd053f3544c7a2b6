"""Edits of the demo's stand-ins, the way a person edits a page in Notion or a message in Slack
before the source sends its webhook: ``POST /_demo/edit`` on a stand-in of ``serve --demo``.

Not part of any API the stand-ins imitate: a route the demo adds (:func:`with_edits`) beside
the API's own, so ``debounce send --demo`` and the demo's tour can make the edit an example
webhook describes real before they post the webhook. The request body is the example webhook
(``examples/<source>/<event>.json``); the answer is

- 200 ``{"edited": "<what changed, one line>", "text": "<the new text>", "webhook": {…}}``:
  the edit is applied, and ``webhook`` is the event the source would send for it (a fresh
  event id, the time of this edit; the example's shape otherwise);
- 404 ``{"error": "not_an_edit", "detail": …}``: the example describes no edit of content
  (``page.created``, a new message …): post it as it is;
- 404 ``{"error": "not_found", "detail": …}``: the example names a page or message the
  stand-in does not hold;
- 400 ``{"error": "bad_request", "detail": …}``: the body is not a JSON object.

Each edit of the same page or message counts up and carries the time of day, so every edit is
new text: ``Hello world (edit 2, 17:04:12)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

__all__ = ["EDIT_PATH", "DemoEdit", "EditCounter", "NotAnEdit", "with_edits"]

#: The path of the edit route on a demo stand-in.
EDIT_PATH = "/_demo/edit"


@dataclass(frozen=True)
class DemoEdit:
    """An applied edit: ``edited`` says what changed (one line, for the operator), ``text``
    is the new text, ``webhook`` the event the source sends for it."""

    edited: str
    text: str
    webhook: dict[str, Any]


class NotAnEdit(Exception):
    """The example webhook describes no edit of content."""


class EditCounter:
    """The text of the next edit of a page or message: its original text, then `` (edit N,
    HH:MM:SS)``, N counting this stand-in's edits of it (so every edit is new text).
    ``clock`` gives the time of an edit (UTC, timezone-aware)."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        self._originals: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def next_text(self, key: str, current: str) -> tuple[str, datetime]:
        """The text of the next edit of ``key`` (a page's block, a message) whose text is
        ``current`` now, and the time of the edit."""
        with self._lock:
            original = self._originals.setdefault(key, current)
            count = self._counts.get(key, 0) + 1
            self._counts[key] = count
        now = self.clock()
        return f"{original} (edit {count}, {now.astimezone():%H:%M:%S})", now


def with_edits(api: Starlette, edit: Callable[[Mapping[str, Any]], DemoEdit]) -> Starlette:
    """``api`` with ``POST`` :data:`EDIT_PATH` in front: ``edit`` applies the edit an example
    webhook describes (raises :class:`NotAnEdit`, or :class:`LookupError` for what the
    stand-in does not hold). Everything else goes to ``api`` unchanged."""

    async def apply(request: Request) -> Response:
        try:
            event = await request.json()
        except ValueError:
            event = None
        if not isinstance(event, dict):
            return _error(400, "bad_request", "the body must be an example webhook (a JSON object)")
        try:
            done = edit(event)
        except NotAnEdit as exc:
            return _error(404, "not_an_edit", str(exc))
        except LookupError as exc:
            return _error(404, "not_found", str(exc.args[0] if exc.args else exc))
        return JSONResponse({"edited": done.edited, "text": done.text, "webhook": done.webhook})

    return Starlette(routes=[Route(EDIT_PATH, apply, methods=["POST"]), Mount("", app=api)])


def _error(status: int, code: str, detail: str) -> Response:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)
