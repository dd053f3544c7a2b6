"""Files a document shows, as a sync reports them: part of the contract (:mod:`debounce.contract`).

A sync that renders a page or conversation showing files returns them in
:attr:`~debounce.contract.SyncResult.files` (the complete set its job's documents show). The
service makes each file a document of its own, synced as its own job in the same queue (the job
key :meth:`FileRef.job_key`; its document :meth:`FileRef.document_id`): downloaded within the
operator's limits, its text extracted in a bounded child process, its audience its parent's.
It is re-extracted only when its content changed (the source's ``edit_stamp``, then the bytes'
hash — never the URL, which rotates), and tombstoned when no sync of its parent shows it any
more. A syncer that can give a fresh URL for an expired one (Notion's hosted files expire after
an hour) implements :class:`~debounce.contract.sync.FileRefresher`; the file job calls it, at
the cost of one request.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["FILES_STATE_PREFIX", "FILE_KEY_PREFIX", "FileRef"]

#: The prefix of a file's job key and document id (``file:<file id>``).
FILE_KEY_PREFIX = "file:"
#: The ``sync_state`` key prefix under which the service keeps, per parent job key, the files
#: that job's last sync showed (``files-of:<job key>`` -> ``{"files": {<file id>: identity}}``).
FILES_STATE_PREFIX = "files-of:"


@dataclass(frozen=True)
class FileRef:
    """One file a document shows.

    ``file_id``: stable per source (Notion: the hosted file URL's path without its query;
    Slack: the file id). ``name``: its name or caption (the file document's title).
    ``parent_document_id``: the document that shows it. ``url``: where to download it now
    (``None``: not yet known, e.g. a fresh Slack upload). ``media_type``: as the source says
    (``""``: from the download, else the name). ``external``: a third party's URL (fetched only
    from hosts the operator allows). ``with_token``: send the workspace's token (Slack
    ``url_private``; only ever to the source's own hosts). ``edit_stamp``: the source's edit
    time or version of the file, when it has one. ``size``: bytes, when the source says.
    ``locator``: what the source needs to refresh the URL (Notion: the block id).
    """

    file_id: str
    name: str
    parent_document_id: str
    url: str | None
    media_type: str = ""
    external: bool = False
    with_token: bool = False
    edit_stamp: str | None = None
    size: int | None = None
    locator: str | None = None

    def job_key(self) -> str:
        """The file job's key (``source_page_id``): ``file:<file id>``."""
        return FILE_KEY_PREFIX + self.file_id

    def document_id(self) -> str:
        """The file document's id: ``file:<file id>`` (what the parent's Markdown names)."""
        return FILE_KEY_PREFIX + self.file_id

    def identity(self) -> tuple[str, str, str | None, str]:
        """What decides whether the file changed as the parent shows it: id, name, edit stamp
        and parent (not the URL, which rotates)."""
        return (self.file_id, self.name, self.edit_stamp, self.parent_document_id)

    def to_payload(self) -> dict[str, Any]:
        """The file job's payload (JSON)."""
        return {"file": asdict(self)}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> FileRef:
        """The file a file job's payload names.

        Raises:
            ValueError: the payload names no file.
        """
        data = payload.get("file")
        if not isinstance(data, dict) or not isinstance(data.get("file_id"), str):
            raise ValueError("a file job's payload has no 'file' object with a 'file_id'")
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def with_url(self, url: str | None) -> FileRef:
        """This file with another download URL."""
        return replace(self, url=url)
