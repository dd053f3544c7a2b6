"""The files a Notion page shows, as :class:`~debounce.contract.FileRef` (issue 39).

``file`` and ``pdf`` blocks of Notion-hosted files (``type: "file"``: ``file.url``, an S3
presigned URL valid until ``file.expiry_time``, about an hour;
https://developers.notion.com/reference/file-object) found by the block walk become file
documents of their own. The file's identity is the URL's path without its query (the query's
signature changes on every read, the path does not); its edit stamp the block's
``last_edited_time``; its locator the block id, which :func:`refresh_file` re-reads (one
``blocks.retrieve``) for a fresh URL. ``external`` files (a third party's link) and files of
other block types (images, video, audio) are not reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from notion_client.errors import APIErrorCode, APIResponseError

from debounce.contract import FileRef
from integrations.notion.client import NotionCall, _code
from integrations.notion.render import BlockNode
from integrations.notion.richtext import plain_text

__all__ = ["FILE_BLOCK_TYPES", "file_of_block", "hosted_files", "refresh_file"]

#: Block types whose Notion-hosted file is made a file document.
FILE_BLOCK_TYPES = frozenset({"file", "pdf"})


def file_of_block(block: Mapping[str, Any], parent_document_id: str) -> FileRef | None:
    """The :class:`FileRef` of a ``file``/``pdf`` block object holding a Notion-hosted file,
    shown by the document ``parent_document_id``; ``None`` for any other block."""
    kind = block.get("type")
    data = block.get(kind) if isinstance(kind, str) and kind in FILE_BLOCK_TYPES else None
    if not isinstance(data, Mapping) or data.get("type") != "file":
        return None
    hosted = data.get("file")
    url = hosted.get("url") if isinstance(hosted, Mapping) else None
    if not isinstance(url, str) or not url:
        return None
    path = urlsplit(url).path
    name = data.get("name") if isinstance(data.get("name"), str) else ""
    name = name or plain_text(data.get("caption")).strip() or path.rsplit("/", 1)[-1]
    stamp = block.get("last_edited_time")
    return FileRef(
        file_id=path,
        name=str(name),
        parent_document_id=parent_document_id,
        url=url,
        edit_stamp=stamp if isinstance(stamp, str) else None,
        locator=str(block.get("id") or "") or None,
    )


def hosted_files(nodes: Iterable[BlockNode], parent_document_id: str) -> tuple[FileRef, ...]:
    """Every Notion-hosted file of a ``file``/``pdf`` block in the tree ``nodes`` (children
    included), first of each identity, in order."""
    found: dict[str, FileRef] = {}
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        ref = file_of_block(node.block, parent_document_id)
        if ref is not None:
            found.setdefault(ref.file_id, ref)
        stack.extend(reversed(node.children))
    return tuple(found.values())


async def refresh_file(call: NotionCall, ref: FileRef) -> FileRef:
    """``ref`` with the fresh URL of its block (one ``blocks.retrieve``); ``url`` ``None``
    when the block is gone, trashed, or shows another file now.

    Raises:
        As :meth:`~integrations.notion.client.NotionCall.call`.
    """
    if not ref.locator:
        return ref.with_url(None)
    try:  # never from the checkpoint: a recorded answer holds the URL that expired
        block = await call.call(call.api.blocks.retrieve, cache=False, block_id=ref.locator)
    except APIResponseError as exc:
        if _code(exc) == APIErrorCode.ObjectNotFound.value:
            return ref.with_url(None)
        raise
    if not isinstance(block, dict) or block.get("in_trash") or block.get("archived"):
        return ref.with_url(None)
    fresh = file_of_block(block, ref.parent_document_id)
    if fresh is None or fresh.file_id != ref.file_id:
        return ref.with_url(None)
    return ref.with_url(fresh.url)
