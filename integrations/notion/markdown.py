"""A page's content through ``GET /v1/pages/{id}/markdown`` (``pages.retrieve_markdown``,
https://developers.notion.com/reference/retrieve-page-markdown), and its post-processing.

The endpoint answers ``{"object": "page_markdown", "id", "markdown", "truncated",
"unknown_block_ids"}``: the page as Notion's enhanced Markdown
(https://developers.notion.com/guides/data-apis/enhanced-markdown). For a page too large to
render in one answer, ``truncated`` is true and each block left out is an
``<unknown url="…#<block>" alt="…"/>`` tag whose id is in ``unknown_block_ids``; asking the same
endpoint for that id answers the block's subtree. We fetch each (one request each, further
unknown ids too) and **splice** its Markdown in place of its tag, indented like the tag (the
format indents children with tabs); a subtree whose tag is not found is appended at the end.

Before it is stored it is completed and cleaned (see ``docs/notion.md``, "Markdown path"):

- **Notion-hosted files** (signed URLs that expire after about an hour and change on every
  answer) are rewritten to the stable link of the page, ``https://www.notion.so/<page>``
  (the Markdown does not name the file's block, so the block walk's ``#<block>`` anchor is not
  available); a hosted image ``![cap](signed)`` becomes a link ``[Image: cap](…)``, as the
  block walk writes it, since the target is not an image. Nothing signed is ever stored, and
  an unchanged page renders byte for byte the same. The page's files are read from the answer
  before this (:func:`raw_page_markdown`, then
  :func:`integrations.notion.files.files_of_markdown`).
- **Relative links** (``](/…)``, ``url="/…"``, ``src="/…"``) are made absolute on
  ``https://www.notion.so``.

and then **converted** to the block walk's CommonMark/GFM by
:func:`integrations.notion.enhanced.enhanced_to_markdown` (the dialect itself is never
stored; "One Markdown" in ``docs/notion.md`` lists what still differs between the paths).
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from urllib.parse import urlsplit

from notion_client.errors import APIResponseError

from debounce.contract import FILE_KEY_PREFIX
from integrations.notion.client import NotionCall
from integrations.notion.enhanced import enhanced_to_markdown
from integrations.notion.refusals import EndpointRefusals
from integrations.notion.richtext import NOTION_BASE_URL, notion_url

#: Pages whose Markdown is longer than this (characters) are converted in a thread.
_CONVERT_IN_THREAD_CHARS = 100_000

__all__ = [
    "MARKDOWN_VERSION",
    "MAX_MARKDOWN_REQUESTS",
    "clean_markdown",
    "converted",
    "is_signed_url",
    "page_markdown",
    "raw_page_markdown",
    "splice_unknown",
]

log = logging.getLogger("integrations.notion")

#: The Markdown dialect asked of the endpoint (its ``markdown_version`` query parameter,
#: https://developers.notion.com/guides/data-apis/migrate-to-notion-flavored-markdown: "GET
#: /v1/pages/:page_id/markdown — Query parameter"). ``v1`` (enhanced Markdown) is what this
#: converter was built and pinned against; Notion-Version 2026-03-11 (ours) still accepts it, the
#: next version "makes Notion-flavored Markdown (v2) the default and rejects
#: markdown_version: "v1"". The converter also reads v2's shapes
#: (:func:`~integrations.notion.enhanced.enhanced_to_markdown` with ``version="v2"``,
#: tests/test_notion_markdown_v2.py): moving to v2 is this constant and the tests it flips.
MARKDOWN_VERSION = "v1"

#: At most this many markdown requests per page (the page itself included); a page that needs
#: more is synced by the block walk instead.
MAX_MARKDOWN_REQUESTS = 200

_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_IMAGE = re.compile(r"!\[((?:[^\]\\]|\\.)*)\]\((https?://[^\s)]+)\)")
_SIGNED_QUERY = re.compile(
    r"[?&](?:amp;)?(?:X-Amz-Signature|X-Amz-Expires|X-Amz-Credential|Signature|Expires|"
    r"expirationTimestamp)=",
    re.IGNORECASE,
)
_HOSTED = re.compile(
    r"^https?://(?:prod-files-secure\.s3[.\w-]*\.amazonaws\.com|file\.notion\.so|"
    r"s3[.\w-]*\.amazonaws\.com/secure\.notion-static\.com)/",
    re.IGNORECASE,
)
_RELATIVE = re.compile(r"(\]\(|\burl=\"|\bsrc=\")/(?!/)")
# A hosted file's tag: ``<file|pdf|audio|video … src="…"``, its src up to the value.
_FILE_TAG = re.compile(r'(<(?:file|pdf|audio|video)\b)([^>]*?)\bsrc="(?=([^"]*)")')


def _document(url: str) -> str:
    """The file document a hosted file's URL names: ``file:`` and the URL's path (its stable
    identity, as :func:`integrations.notion.files.file_ref` makes it)."""
    return FILE_KEY_PREFIX + urlsplit(url).path


def is_signed_url(url: str) -> bool:
    """Whether ``url`` is a Notion-hosted file's expiring URL (an S3/``file.notion.so`` host,
    or a query with a signature or expiry: ``X-Amz-Signature``, ``Expires``, …)."""
    return bool(_HOSTED.match(url) or _SIGNED_QUERY.search(url))


def clean_markdown(markdown: str, page_id: str) -> str:
    """Notion's enhanced Markdown of page ``page_id`` as stored: hosted files → the page's
    stable link, relative links absolute, one trailing newline (module docstring); ``""`` for
    an empty page."""

    def image(match: re.Match[str]) -> str:
        caption, url = match.group(1), match.group(2)
        if not is_signed_url(url):
            return match.group(0)
        label = f"Image: {caption}" if caption else "Image"
        return f"[{label}]({notion_url(page_id)}) · document `{_document(url)}`"

    def tag(match: re.Match[str]) -> str:
        src = html.unescape(match.group(3))
        if not is_signed_url(src):
            return match.group(0)
        return f'{match.group(1)}{match.group(2)}data-document="{_document(src)}" src="'

    def url(match: re.Match[str]) -> str:
        found = match.group(0)
        return notion_url(page_id) if is_signed_url(found) else found

    out = _IMAGE.sub(image, markdown)
    out = _FILE_TAG.sub(tag, out)
    out = _URL.sub(url, out)
    out = _RELATIVE.sub(lambda m: m.group(1) + NOTION_BASE_URL + "/", out)
    out = out.strip("\n")
    return out + "\n" if out.strip() else ""


def splice_unknown(markdown: str, block_id: str, subtree: str) -> str:
    """``markdown`` with the ``<unknown …#<block_id>…/>`` line replaced by ``subtree``, each
    of its lines indented like the tag; appended after a blank line if no such tag."""
    compact = block_id.replace("-", "")
    pattern = re.compile(
        r"^([ \t]*)<unknown\b[^>\n]*" + re.escape(compact) + r"[^>\n]*/>[ \t]*$", re.MULTILINE
    )
    match = pattern.search(markdown)
    body = subtree.strip("\n")
    if match is None:
        return markdown.rstrip("\n") + "\n\n" + body if body else markdown
    indent = match.group(1)
    lines = [indent + line if line else line for line in body.split("\n")] if body else []
    return markdown[: match.start()] + "\n".join(lines) + markdown[match.end() :]


async def page_markdown(
    call: NotionCall, page_id: str, refusals: EndpointRefusals, workspace_id: int | None = None
) -> str | None:
    """Page ``page_id``'s content as stored Markdown through the markdown endpoint
    (:func:`raw_page_markdown`, then :func:`converted`); ``None`` when the endpoint does not
    serve (as :func:`raw_page_markdown`).

    Raises:
        As :func:`raw_page_markdown`.
    """
    raw = await raw_page_markdown(call, page_id, refusals, workspace_id)
    return None if raw is None else await converted(raw, page_id)


async def converted(raw: str, page_id: str) -> str:
    """The endpoint's enhanced Markdown ``raw`` of page ``page_id`` as stored: cleaned
    (:func:`clean_markdown`), then converted to the block walk's CommonMark/GFM
    (:func:`~integrations.notion.enhanced.enhanced_to_markdown`)."""
    cleaned = clean_markdown(raw, page_id)
    if len(cleaned) > _CONVERT_IN_THREAD_CHARS:
        # A very large page (~1 s of conversion for 14 000 lines): off the event loop, so the
        # worker's other syncs, lease renewals and LISTEN keep running meanwhile.
        return await asyncio.to_thread(enhanced_to_markdown, cleaned, page_id, MARKDOWN_VERSION)
    return enhanced_to_markdown(cleaned, page_id, MARKDOWN_VERSION)


async def raw_page_markdown(
    call: NotionCall,
    page_id: str,
    refusals: EndpointRefusals,
    workspace_id: int | None = None,
    *,
    cache: bool = True,
) -> str | None:
    """Page ``page_id``'s enhanced Markdown as the markdown endpoint answers it, unknown
    blocks fetched and spliced in (signed file URLs still in it: :func:`converted` makes it
    what is stored; :func:`integrations.notion.files.files_of_markdown` reads its files).
    ``cache=False``: never from the checkpoint (a refresh of an expired file URL).
    ``None`` when the endpoint does not serve and the block walk must be used: it refused this
    workspace's token (403: no read-content capability; 400 ``invalid_request_url``: an API
    without the endpoint) — remembered in ``refusals``, so later syncs of the workspace skip
    the endpoint until it is retried (:mod:`integrations.notion.refusals`) — or 404 or another
    non-transient 4xx, a malformed answer, more than :data:`MAX_MARKDOWN_REQUESTS` requests.

    The request pins ``markdown_version`` (:data:`MARKDOWN_VERSION`, the dialect the
    converter is pinned to) and leaves ``include_transcript`` at its default, false (see
    docs/notion.md, "Meeting notes").

    Raises:
        RateLimited: a 429 with a long ``Retry-After`` (as every request).
        HTTPResponseError: 5xx once the in-process retries are spent (the queue retries).
    """
    token = call.token
    if await refusals.refused(call.context, workspace_id, token):
        return None
    pending = [page_id]
    seen = {page_id}
    markdown: str | None = None
    requests = 0
    while pending:
        object_id = pending.pop(0)
        requests += 1
        if requests > MAX_MARKDOWN_REQUESTS:
            log.warning(
                "notion: page %s needs over %d markdown requests; block walk", page_id, MAX_MARKDOWN_REQUESTS
            )
            return None
        try:
            # notion-client 3.1's pages.retrieve_markdown passes include_transcript only:
            # the SDK's generic request, to send markdown_version too.
            answer = await call.call(
                call.api.request,
                path=f"pages/{object_id}/markdown",
                method="GET",
                cache=cache,
                query={"markdown_version": MARKDOWN_VERSION},
            )
        except APIResponseError as exc:
            if exc.status >= 500 or exc.status in (401, 429):
                raise
            code = getattr(exc.code, "value", exc.code)
            if exc.status == 403 or code == "invalid_request_url":
                await refusals.remember(call.context, workspace_id, token, f"{exc.status} {code}")
            else:
                log.info(
                    "notion: the markdown endpoint answered %s for %s; block walk", exc.status, object_id
                )
            return None
        if requests == 1:
            await refusals.forget(call.context, workspace_id)
        if not isinstance(answer, dict) or not isinstance(answer.get("markdown"), str):
            return None
        text = str(answer["markdown"])
        markdown = text if markdown is None else splice_unknown(markdown, object_id, text)
        for unknown in answer.get("unknown_block_ids") or []:
            if isinstance(unknown, str) and unknown not in seen:
                seen.add(unknown)
                pending.append(unknown)
    return markdown or ""
