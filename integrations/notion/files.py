"""The files a Notion page shows, as :class:`~debounce.contract.FileRef` (issue 39).

A Notion file object (https://developers.notion.com/reference/file-object) is ``file``
(Notion-hosted: ``file.url``, an S3 presigned URL valid until ``file.expiry_time``, about an
hour), ``external`` (a third party's URL) or ``file_upload``. Files appear in ``file``, ``pdf``,
``image``, ``audio`` and ``video`` blocks and in ``files`` properties; each becomes a file
document of its own:

- **where**: the block walk's blocks (:func:`files_of_blocks`), the page's ``files``
  properties (:func:`files_of_properties`) and, when the markdown endpoint served the page,
  the file tags of its enhanced Markdown (:func:`files_of_markdown`: ``<file src>``,
  ``<pdf src>``, ``<audio src>``, ``<video src>``, ``![caption](src)``);
- **identity**: a hosted file's URL path without its query (the query's signature changes on
  every read, the path does not); an external file's whole URL;
- **what is read**: ``file``/``pdf`` blocks and ``files`` properties are extracted like any
  file; ``image``/``audio``/``video`` are **metadata only** (their ``media_type`` says so: no
  OCR, no transcription);
- **external** files are reported with ``external=True``: the worker downloads them only from
  hosts the operator allows (``DEBOUNCE_FILE_EXTERNAL_HOSTS``) and otherwise makes no document
  of them (the page keeps its link);
- **refresh** (an expired URL): the ``locator`` says where to read the file again, one request —
  a block id (``blocks.retrieve``), ``property:<page id>`` (``pages.retrieve``) or
  ``markdown:<page id>`` (the markdown endpoint again, :mod:`.markdown`).

The edit stamp is the block's ``last_edited_time``; files of properties and of the markdown
path have none (a new upload has a new path, hence a new identity).
"""

from __future__ import annotations

import html
import mimetypes
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from notion_client.errors import APIErrorCode, APIResponseError

from debounce.contract import FileRef
from integrations.notion.client import NotionCall, _code
from integrations.notion.render import BlockNode
from integrations.notion.richtext import plain_text

__all__ = [
    "FILE_BLOCK_TYPES",
    "MARKDOWN_LOCATOR",
    "MEDIA_BLOCK_TYPES",
    "PROPERTY_LOCATOR",
    "file_of_block",
    "file_ref",
    "files_of_blocks",
    "files_of_markdown",
    "files_of_properties",
    "fresh_url",
    "hosted_files",
    "refresh_file",
]

#: Block types whose file's text is extracted.
FILE_BLOCK_TYPES = frozenset({"file", "pdf"})
#: Block types whose file is a document of metadata only (no OCR, no transcription).
MEDIA_BLOCK_TYPES = frozenset({"image", "audio", "video"})
#: Locator prefixes: the file is in a ``files`` property / the markdown endpoint's answer.
PROPERTY_LOCATOR = "property:"
MARKDOWN_LOCATOR = "markdown:"

# The enhanced Markdown's file tags (``src`` HTML-escaped) and images.
_TAG = re.compile(r'<(file|pdf|audio|video)\b[^>]*?\bsrc="([^"]*)"[^>]*>(.*?)</\1>', re.DOTALL)
_IMAGE = re.compile(r"!\[((?:[^\]\\]|\\.)*)\]\((https?://[^\s)]+)\)")
_UNESCAPE = re.compile(r"\\(.)")


def _media_type(kind: str, name: str, path: str) -> str:
    """The media type of an ``image``/``audio``/``video`` file: guessed from its name or path
    when that agrees with the block's kind, else ``<kind>/*`` (never extracted either way);
    ``""`` for other kinds (the download says)."""
    if kind not in MEDIA_BLOCK_TYPES:
        return ""
    for candidate in (name, path):
        guessed = mimetypes.guess_type(candidate)[0]
        if guessed and guessed.startswith(kind + "/"):
            return guessed
    return f"{kind}/*"


def file_ref(
    kind: str,
    file_object: Mapping[str, Any],
    parent_document_id: str,
    *,
    name: str = "",
    locator: str | None = None,
    edit_stamp: str | None = None,
) -> FileRef | None:
    """The :class:`FileRef` of a Notion file object (``{"type": "file"|"external", …}``) shown
    in a ``kind`` block (``file``, ``pdf``, ``image``, ``audio``, ``video``; a ``files``
    property's file counts as ``file``); ``None`` for a ``file_upload`` or an object without a
    URL. ``name``: its name or caption (else the URL's last path segment)."""
    source = file_object.get("type")
    body = file_object.get(source) if source in ("file", "external") else None
    url = body.get("url") if isinstance(body, Mapping) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    external = source == "external"
    path = urlsplit(url).path
    name = name or unquote(path.rsplit("/", 1)[-1]) or url
    return FileRef(
        file_id=url if external else path,
        name=name,
        parent_document_id=parent_document_id,
        url=url,
        media_type=_media_type(kind, name, path),
        external=external,
        edit_stamp=edit_stamp,
        locator=locator,
    )


def file_of_block(block: Mapping[str, Any], parent_document_id: str) -> FileRef | None:
    """The :class:`FileRef` of a ``file``/``pdf``/``image``/``audio``/``video`` block object,
    shown by the document ``parent_document_id``; ``None`` for any other block."""
    kind = block.get("type")
    if not isinstance(kind, str) or kind not in FILE_BLOCK_TYPES | MEDIA_BLOCK_TYPES:
        return None
    data = block.get(kind)
    if not isinstance(data, Mapping):
        return None
    name = data.get("name") if isinstance(data.get("name"), str) else ""
    stamp = block.get("last_edited_time")
    return file_ref(
        kind,
        data,
        parent_document_id,
        name=str(name or plain_text(data.get("caption")).strip()),
        locator=str(block.get("id") or "") or None,
        edit_stamp=stamp if isinstance(stamp, str) else None,
    )


def files_of_blocks(nodes: Iterable[BlockNode], parent_document_id: str) -> list[FileRef]:
    """Every file of a file/media block in the tree ``nodes`` (children included), in order."""
    found: list[FileRef] = []
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        ref = file_of_block(node.block, parent_document_id)
        if ref is not None:
            found.append(ref)
        stack.extend(reversed(node.children))
    return found


def files_of_properties(properties: Any, page_id: str) -> list[FileRef]:
    """Every file of the page's ``files`` properties (``{"type": "files", "files": [{"name",
    "type", …}]}``), in property order; refreshed by re-reading the page."""
    found: list[FileRef] = []
    if not isinstance(properties, Mapping):
        return found
    for value in properties.values():
        if not isinstance(value, Mapping) or value.get("type") != "files":
            continue
        for item in value.get("files") or []:
            if isinstance(item, Mapping):
                name = item.get("name") if isinstance(item.get("name"), str) else ""
                ref = file_ref("file", item, page_id, name=str(name), locator=PROPERTY_LOCATOR + page_id)
                if ref is not None:
                    found.append(ref)
    return found


def files_of_markdown(markdown: str, page_id: str, is_hosted: Any) -> list[FileRef]:
    """Every file the markdown endpoint's enhanced Markdown ``markdown`` of page ``page_id``
    shows (before it is cleaned: the signed URLs are still there), in order. ``is_hosted(url)``:
    whether a URL is a Notion-hosted file's (else it is external)."""
    found: list[tuple[int, FileRef]] = []
    locator = MARKDOWN_LOCATOR + page_id

    def add(at: int, kind: str, url: str, caption: str) -> None:
        source = "file" if is_hosted(url) else "external"
        name = _UNESCAPE.sub(r"\1", caption).strip()
        ref = file_ref(kind, {"type": source, source: {"url": url}}, page_id, name=name, locator=locator)
        if ref is not None:
            found.append((at, ref))

    for match in _TAG.finditer(markdown):
        add(
            match.start(),
            match.group(1),
            html.unescape(match.group(2)),
            re.sub(r"<[^>]+>", "", match.group(3)),
        )
    for match in _IMAGE.finditer(markdown):
        add(match.start(), "image", match.group(2), match.group(1))
    return [ref for _, ref in sorted(found, key=lambda pair: pair[0])]


def hosted_files(refs: Iterable[FileRef]) -> tuple[FileRef, ...]:
    """``refs`` with one :class:`FileRef` per identity (the first), in order: what a page
    sync reports."""
    found: dict[str, FileRef] = {}
    for ref in refs:
        found.setdefault(ref.file_id, ref)
    return tuple(found.values())


async def refresh_file(call: NotionCall, ref: FileRef) -> FileRef:
    """``ref`` with the fresh URL of its block (one ``blocks.retrieve``) or of its page's
    ``files`` property (one ``pages.retrieve``); ``url`` ``None`` when it is gone, trashed, or
    shows another file now. Files of the markdown path are refreshed by the syncer (the
    markdown endpoint); this answers ``None`` for them.

    Raises:
        As :meth:`~integrations.notion.client.NotionCall.call`.
    """
    if not ref.locator or ref.locator.startswith(MARKDOWN_LOCATOR):
        return ref.with_url(None)
    page_id = ref.locator.removeprefix(PROPERTY_LOCATOR) if ref.locator.startswith(PROPERTY_LOCATOR) else None
    try:  # never from the checkpoint: a recorded answer holds the URL that expired
        if page_id is not None:
            found = await call.call(call.api.pages.retrieve, cache=False, page_id=page_id)
        else:
            found = await call.call(call.api.blocks.retrieve, cache=False, block_id=ref.locator)
    except APIResponseError as exc:
        if _code(exc) == APIErrorCode.ObjectNotFound.value:
            return ref.with_url(None)
        raise
    if not isinstance(found, dict) or found.get("in_trash") or found.get("archived"):
        return ref.with_url(None)
    if page_id is not None:
        candidates = files_of_properties(found.get("properties"), ref.parent_document_id)
    else:
        one = file_of_block(found, ref.parent_document_id)
        candidates = [one] if one is not None else []
    return fresh_url(ref, candidates)


def fresh_url(ref: FileRef, candidates: Iterable[FileRef]) -> FileRef:
    """``ref`` with the URL of the candidate of the same identity (``None``: none is)."""
    for candidate in candidates:
        if candidate.file_id == ref.file_id:
            return ref.with_url(candidate.url)
    return ref.with_url(None)
