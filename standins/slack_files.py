"""Files shared in the stand-in Slack (issue 39): file objects as messages carry them
(https://docs.slack.dev/reference/objects/file-object) whose ``url_private`` and
``url_private_download`` point at the file-host stand-in (:class:`standins.file_host.FileHost`,
which serves them only for a bearer token with ``files:read``), Slack Connect stubs
(``file_access: "check_file_info"``) and ``files.info``
(https://docs.slack.dev/reference/methods/files.info), which answers ``access_denied`` for a
file of another organisation the token may not read and ``file_not_found`` for a deleted one.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from standins.file_host import FileHost
from standins.slack_teams import DEFAULT_TEAM_ID

__all__ = ["SlackFiles"]


class SlackFiles:
    """The mixin of :class:`~standins.slack_api.FakeSlack` that keeps its files."""

    _lock: threading.RLock
    _channels: dict[str, dict[str, dict[str, Any]]]

    def _init_files(self) -> None:
        #: file id -> the complete file object ``files.info`` answers.
        self._files: dict[str, dict[str, Any]] = {}
        #: file ids ``files.info`` refuses with ``access_denied``.
        self._denied_files: set[str] = set()

    def share_file(
        self,
        host: FileHost,
        file_id: str,
        name: str,
        data: bytes,
        media_type: str,
        *,
        updated: int = 1_763_600_000,
        team_id: str = DEFAULT_TEAM_ID,
    ) -> dict[str, Any]:
        """Serve ``data`` from ``host`` as Slack's private URL of file ``file_id`` and return
        its file object, to put in a message's ``files`` (:meth:`FakeSlack.post`)."""
        key = f"{team_id}-{file_id}"
        host.add(key, data, media_type)
        private = f"{host.base_url}/files-pri/{key}/{name}"
        obj: dict[str, Any] = {
            "id": file_id,
            "created": updated,
            "timestamp": updated,
            "updated": updated,
            "name": name,
            "title": name,
            "mimetype": media_type,
            "filetype": name.rsplit(".", 1)[-1],
            "user": "U2147483697",
            "user_team": team_id,
            "mode": "hosted",
            "is_external": False,
            "is_public": True,
            "size": len(data),
            "url_private": private,
            "url_private_download": private + "?download=1",
            "permalink": f"https://debounce-demo.slack.com/files/U2147483697/{file_id}/{name}",
        }
        with self._lock:
            self._files[file_id] = obj
        return copy.deepcopy(obj)

    def connect_stub(self, file_id: str, *, denied: bool = False) -> dict[str, Any]:
        """The stub a Slack Connect message carries for a file (``files.info`` completes it,
        or answers ``access_denied`` when ``denied``)."""
        with self._lock:
            if denied:
                self._denied_files.add(file_id)
        return {"id": file_id, "mode": "file_access", "file_access": "check_file_info"}

    def delete_file(self, file_id: str) -> None:
        """Delete a file as Slack does: the messages that shared it show it as
        ``{"id", "mode": "tombstone"}``, ``files.info`` answers ``file_not_found``."""
        with self._lock:
            self._files.pop(file_id, None)
            for msgs in self._channels.values():
                for msg in msgs.values():
                    files = msg.get("files")
                    if isinstance(files, list):
                        msg["files"] = [
                            {"id": file_id, "mode": "tombstone"}
                            if isinstance(f, dict) and f.get("id") == file_id
                            else f
                            for f in files
                        ]

    def _files_info(self, params: dict[str, str]) -> dict[str, Any]:
        file_id = params.get("file", "")
        if file_id in self._denied_files:
            return {"ok": False, "error": "access_denied"}
        obj = self._files.get(file_id)
        if obj is None:
            return {"ok": False, "error": "file_not_found"}
        return {
            "ok": True,
            "file": copy.deepcopy(obj),
            "comments": [],
            "response_metadata": {"next_cursor": ""},
        }
