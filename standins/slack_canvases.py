"""Canvases in the stand-in Slack (issue 39), as the real Web API serves them:

- a canvas is a file with its own id (``filetype: "quip"``, ``mimetype:
  "application/vnd.slack-docs"``, ``pretty_type: "Canvas"``) that ``files.info`` answers, with
  the conversations it is shared in (``channels``, ``groups``, ``ims``); a channel canvas also
  hangs off its channel (``conversations.info`` ``properties.canvas.file_id``);
- ``canvases.getContent`` (https://docs.slack.dev/reference/methods/canvases.getContent,
  scope ``canvases:read``) answers ``{"ok": true, "content": "<markdown>"}`` for the whole
  canvas in one call, ``canvas_not_found`` when it is gone or not visible;
- ``files.list`` with ``types=canvas`` lists them, paged by ``page``/``count`` with
  ``paging.pages``;
- a team may lack a scope (:meth:`SlackCanvases.withhold_scope`): the methods that need it
  answer ``missing_scope`` with ``needed`` and ``provided``, as Slack does;
- :meth:`SlackCanvases.canvas_event` builds the ``file_created`` / ``file_shared`` /
  ``file_change`` / ``file_deleted`` envelopes Slack sends for them (the event carries the
  file's id only: ``{"file_id", "file": {"id"}}``, plus ``channel_id`` for ``file_shared``).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from standins.slack_teams import DEFAULT_TEAM_ID

__all__ = ["CANVAS_MEDIA_TYPE", "SCOPE_OF", "SlackCanvases"]

#: The media type Slack gives a canvas file.
CANVAS_MEDIA_TYPE = "application/vnd.slack-docs"
#: The scope each method of the stand-in needs, where a test may withhold one.
SCOPE_OF = {"canvases.getContent": "canvases:read", "files.info": "files:read", "files.list": "files:read"}


class SlackCanvases:
    """The mixin of :class:`~standins.slack_api.FakeSlack` that keeps canvases and scopes."""

    _lock: threading.RLock
    _files: dict[str, dict[str, Any]]
    _clock: int
    bot_scopes: str

    def _init_canvases(self) -> None:
        #: canvas file id -> its Markdown (``canvases.getContent``).
        self._canvases: dict[str, str] = {}
        #: canvas file id -> the team that owns it.
        self._canvas_teams: dict[str, str] = {}
        #: team id -> scopes its token lacks.
        self._withheld: dict[str, set[str]] = {}
        #: channel id -> its channel canvas's file id (``conversations.info``).
        self._channel_canvases: dict[str, str] = {}

    def withhold_scope(self, scope: str, *, team_id: str = DEFAULT_TEAM_ID) -> None:
        """Make ``team_id``'s token lack ``scope``: the methods needing it answer
        ``missing_scope``."""
        with self._lock:
            self._withheld.setdefault(team_id, set()).add(scope)

    def add_canvas(
        self,
        file_id: str,
        title: str,
        markdown: str,
        *,
        channels: tuple[str, ...] = (),
        channel_canvas: bool = False,
        updated: int | None = None,
        team_id: str = DEFAULT_TEAM_ID,
    ) -> dict[str, Any]:
        """A canvas ``file_id`` shared in ``channels`` (``C…`` public, ``G…`` private, ``D…``
        DMs; ``channel_canvas``: the first channel's own canvas); returns its file object."""
        stamp = self._clock if updated is None else updated
        obj: dict[str, Any] = {
            "id": file_id,
            "created": stamp,
            "timestamp": stamp,
            "updated": stamp,
            "name": title.replace(" ", "_"),
            "title": title,
            "mimetype": CANVAS_MEDIA_TYPE,
            "filetype": "quip",
            "pretty_type": "Canvas",
            "user": "U2147483697",
            "user_team": team_id,
            "mode": "quip",
            "editable": True,
            "is_external": False,
            "is_public": any(c.startswith("C") for c in channels),
            "size": len(markdown.encode()),
            "channels": [c for c in channels if c.startswith("C")],
            "groups": [c for c in channels if c.startswith("G")],
            "ims": [c for c in channels if c.startswith("D")],
            "permalink": f"https://debounce-demo.slack.com/docs/{team_id}/{file_id}",
        }
        with self._lock:
            self._files[file_id] = obj
            self._canvases[file_id] = markdown
            self._canvas_teams[file_id] = team_id
            if channel_canvas and channels:
                self._channel_canvases[channels[0]] = file_id
        return copy.deepcopy(obj)

    def edit_canvas(self, file_id: str, markdown: str, *, updated: int | None = None) -> None:
        """Replace the canvas's content (its ``updated`` stamp moves)."""
        with self._lock:
            self._canvases[file_id] = markdown
            obj = self._files[file_id]
            obj["updated"] = (obj["updated"] + 1) if updated is None else updated
            obj["size"] = len(markdown.encode())

    def delete_canvas(self, file_id: str) -> None:
        """Delete the canvas: ``canvases.getContent`` answers ``canvas_not_found`` and
        ``files.info`` ``file_not_found``."""
        with self._lock:
            self._canvases.pop(file_id, None)
            self._files.pop(file_id, None)
            self._canvas_teams.pop(file_id, None)
            for channel, canvas in list(self._channel_canvases.items()):
                if canvas == file_id:
                    del self._channel_canvases[channel]

    def canvas_event(
        self,
        event_type: str,
        file_id: str,
        *,
        event_id: str,
        channel: str | None = None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """The Events API envelope of ``event_type`` (``file_created``, ``file_shared``,
        ``file_change``, ``file_deleted``) for file ``file_id``: the event carries the file's
        id only, as Slack's do."""
        event: dict[str, Any] = {
            "type": event_type,
            "file_id": file_id,
            "file": {"id": file_id},
            "user_id": "U2147483697",
            "event_ts": f"{self._clock}.000100",
        }
        if event_type == "file_shared" and channel is not None:
            event["channel_id"] = channel
        return {
            "token": "verification-token",
            "team_id": team_id or self._canvas_teams.get(file_id, DEFAULT_TEAM_ID),
            "api_app_id": "A0DEBOUNCE1",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": self._clock,
        }

    # ------------------------------------------------------------------ Web API

    def _missing_scope(self, method: str, team_id: str) -> dict[str, Any] | None:
        """Slack's answer to a method whose scope ``team_id``'s token lacks (``None``: it has
        it)."""
        needed = SCOPE_OF.get(method)
        if needed is None or needed not in self._withheld.get(team_id, set()):
            return None
        provided = [s for s in self.bot_scopes.split(",") if s and s not in self._withheld[team_id]]
        return {"ok": False, "error": "missing_scope", "needed": needed, "provided": ",".join(provided)}

    def _canvases_get_content(self, team_id: str, params: dict[str, str]) -> dict[str, Any]:
        canvas_id = params.get("canvas_id", "")
        if not canvas_id:
            return {"ok": False, "error": "invalid_arguments"}
        markdown = self._canvases.get(canvas_id)
        if markdown is None or self._canvas_teams.get(canvas_id) != team_id:
            return {"ok": False, "error": "canvas_not_found"}
        if params.get("content_type", "markdown") == "html":
            return {"ok": True, "content": "<p>" + markdown.replace("\n", "<br>") + "</p>"}
        return {"ok": True, "content": markdown}

    def _files_list(self, team_id: str, params: dict[str, str]) -> dict[str, Any]:
        types = {t for t in params.get("types", "all").split(",") if t}
        canvases_only = "canvas" in types or "canvases" in types
        found = [
            copy.deepcopy(obj)
            for file_id, obj in sorted(self._files.items())
            if obj.get("user_team", DEFAULT_TEAM_ID) == team_id
            and (not canvases_only or file_id in self._canvases)
            and (
                not params.get("channel")
                or params["channel"] in obj.get("channels", []) + obj.get("groups", [])
            )
        ]
        count = max(1, min(int(params.get("count") or 100), 1000))
        page = max(1, int(params.get("page") or 1))
        pages = max(1, -(-len(found) // count))
        return {
            "ok": True,
            "files": found[(page - 1) * count : page * count],
            "paging": {"count": count, "total": len(found), "page": page, "pages": pages},
        }

    def _channel_properties(self, channel: str) -> dict[str, Any] | None:
        """``conversations.info``'s ``properties`` of ``channel`` when it has a channel canvas."""
        canvas = self._channel_canvases.get(channel)
        if canvas is None:
            return None
        return {
            "canvas": {"file_id": canvas, "is_empty": not self._canvases.get(canvas), "quip_thread_id": ""}
        }
