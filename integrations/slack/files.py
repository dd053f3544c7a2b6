"""The files Slack messages share, as :class:`~debounce.contract.FileRef` (issue 39).

A message's ``files[]`` (https://docs.slack.dev/reference/objects/file-object, as
``conversations.history``/``replies`` return them) become the thread document's files, each a
file document of its own (``file:<file id>``) that the service downloads and extracts
(:mod:`debounce.worker.files`):

- ``url_private_download`` (else ``url_private``) with the workspace's token (``files:read``);
- a remote file (``is_external``) at its third party's URL, without the token: downloaded only
  from the hosts the operator allows (``DEBOUNCE_FILE_EXTERNAL_HOSTS``), else its document says
  why;
- a Slack Connect stub (``file_access: "check_file_info"``, a file of another organisation the
  message only names) is read with ``files.info`` (one request); ``access_denied`` or
  ``file_not_found`` skips it with a logged reason;
- a deleted file (``mode: "tombstone"``) and one the plan hides (``mode: "hidden_by_limit"``)
  are none;
- a canvas is no file to download: it is a document of its own, ``canvas:<file id>``
  (:mod:`integrations.slack.canvases`), which the message's Markdown names instead.

The edit stamp is the file's ``updated`` (else ``timestamp``, else ``created``): a file
replaced under the same id is extracted again, a URL that changed alone is not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from debounce.contract import FileRef
from debounce.contract.files import FILE_KEY_PREFIX
from integrations.slack.canvases import canvas_key, is_canvas
from integrations.slack.client import SlackCall

__all__ = ["NOT_FILES", "document_of", "file_ref", "files_shown", "is_stub", "message_files", "thread_files"]

log = logging.getLogger("integrations.slack")

#: File modes that are no file to download (deleted, or hidden by the plan's limits).
NOT_FILES = frozenset({"tombstone", "hidden_by_limit"})


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def document_of(f: Mapping[str, Any]) -> str | None:
    """The id of the document of the file object ``f`` (``file:<id>``; a canvas's:
    ``canvas:<id>``), or ``None``: no id, deleted, or hidden by the plan's limits."""
    file_id = _text(f.get("id"))
    if file_id is None or f.get("mode") in NOT_FILES or f.get("hidden_by_limit"):
        return None
    return canvas_key(file_id) if is_canvas(f) else FILE_KEY_PREFIX + file_id


def is_stub(f: Mapping[str, Any]) -> bool:
    """Whether ``f`` is a Slack Connect stub that ``files.info`` must complete."""
    return f.get("file_access") == "check_file_info"


def file_ref(f: Mapping[str, Any], parent_document_id: str) -> FileRef | None:
    """The :class:`FileRef` of the complete file object ``f`` shown by the document
    ``parent_document_id``; ``None`` for no file (see :func:`document_of`), a stub or a canvas
    (a document of its own, synced by its own job)."""
    if document_of(f) is None or is_stub(f) or is_canvas(f):
        return None
    file_id = str(f["id"])
    external = bool(f.get("is_external"))
    url = _text(f.get("url_private_download")) or _text(f.get("url_private"))
    stamp = next(
        (
            f[k]
            for k in ("updated", "timestamp", "created")
            if isinstance(f.get(k), int | str) and not isinstance(f.get(k), bool)
        ),
        None,
    )
    size = f.get("size")
    return FileRef(
        file_id=file_id,
        name=_text(f.get("name")) or _text(f.get("title")) or file_id,
        parent_document_id=parent_document_id,
        url=url,
        media_type=_text(f.get("mimetype")) or "",
        external=external,
        with_token=not external,
        edit_stamp=None if stamp is None else str(stamp),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        locator=file_id,
    )


def message_files(messages: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The file objects of ``messages`` that are files (first of each id, in order)."""
    seen: set[str] = set()
    found: list[Mapping[str, Any]] = []
    for m in messages:
        if m.get("subtype") == "tombstone":
            continue
        for f in _maps(m.get("files")):
            file_id = document_of(f)
            if file_id is not None and file_id not in seen:
                seen.add(file_id)
                found.append(f)
    return found


async def thread_files(
    call: SlackCall, document_id: str, messages: Sequence[Mapping[str, Any]], log_fields: Mapping[str, Any]
) -> list[FileRef]:
    """The files a thread's ``messages`` show (its document: ``document_id``); a Slack Connect
    stub is read with ``files.info`` (one request through ``call``), skipped with a logged
    reason when it cannot be.

    Raises:
        As :func:`~integrations.slack.client.call_api`.
    """
    refs: list[FileRef] = []
    for f in message_files(messages):
        if is_stub(f):
            data = await call.call("files.info", file=str(f["id"]))
            full = data.get("file") if data is not None else None
            if not isinstance(full, dict):
                log.info(
                    "Slack file %s in %s: files.info cannot read it (access_denied, "
                    "file_not_found or no files:read scope): no file document",
                    f["id"],
                    document_id,
                    extra=dict(log_fields),
                )
                continue
            f = full
        ref = file_ref(f, document_id)
        if ref is not None:
            refs.append(ref)
    return refs


def files_shown(by_thread: Mapping[str, Any]) -> tuple[FileRef, ...]:
    """Every file of ``by_thread`` (thread ``ts`` -> its files as dicts of :class:`FileRef`'s
    fields, as the conversation's ``sync_state`` keeps them), once each; a file shared in
    several threads belongs to the oldest (the same parent every sync)."""
    known = set(FileRef.__dataclass_fields__)
    refs: dict[str, FileRef] = {}
    for thread_ts in sorted(by_thread, key=lambda ts: [int(p or 0) for p in ts.partition(".")[::2]]):
        entries = by_thread[thread_ts]
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("file_id"), str):
                ref = FileRef(**{k: v for k, v in entry.items() if k in known})
                refs.setdefault(ref.file_id, ref)
    return tuple(refs.values())
