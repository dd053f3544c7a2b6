"""The one Markdown every document's ``content`` is written in, and its check.

Documents are CommonMark with the GFM extensions tables, task lists, strikethrough and
autolinks (https://github.github.com/gfm/), whichever path read them. :func:`gfm_parser` is
that dialect as markdown-it-py configures it (``commonmark`` preset + ``table`` +
``strikethrough`` + ``linkify`` (linkify-it-py) + mdit-py-plugins' ``tasklists``); the
dashboard renders with it (``html=False``: raw HTML is shown as text) and
:func:`enhanced_tags` parses with it (``html=True``, to see raw HTML as tokens).

:func:`enhanced_tags` names the raw HTML tags of Notion's *enhanced* Markdown
(https://developers.notion.com/guides/data-apis/enhanced-markdown: ``<callout>``,
``<details>``, ``<table>``, ``<columns>``, ``<page>``, ``<database>``, ``<mention-…>``,
``<span>``, ``<br>``, ``<unknown>``, …) that survive in a text: a document that has any was
stored in the dialect, not converted. Text that merely *mentions* such a tag (escaped ``\\<br>``,
inside code) is not a tag and is not reported.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.tasklists import tasklists_plugin

__all__ = ["ENHANCED_TAGS", "enhanced_tags", "gfm_parser", "might_have_enhanced_tags"]

#: Tag names of Notion's enhanced Markdown (the reference's block and rich text tags, and
#: spellings seen in answers); any ``mention-…`` tag counts too.
ENHANCED_TAGS = frozenset(
    {
        "audio",
        "br",
        "breadcrumb",
        "callout",
        "col",
        "colgroup",
        "column",
        "columns",
        "database",
        "details",
        "empty-block",
        "file",
        "image",
        "meeting-notes",
        "notes",
        "page",
        "pdf",
        "span",
        "summary",
        "synced_block",
        "synced_block_reference",
        "tab",
        "table",
        "table_of_contents",
        "tabs",
        "td",
        "th",
        "tr",
        "transcript",
        "u",
        "unknown",
        "unsupported",
        "video",
    }
)

_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9_-]*)(?=[\s/>])")
_CHEAP = re.compile(
    r"<\/?(?:mention-|" + "|".join(sorted(ENHANCED_TAGS, key=len, reverse=True)) + r")[\s/>]",
    re.IGNORECASE,
)


@lru_cache(maxsize=2)
def gfm_parser(*, html: bool = False) -> MarkdownIt:
    """markdown-it-py configured for the documents' dialect: CommonMark + GFM tables, task
    lists, strikethrough and autolinks (bare ``https://…`` and ``www.…`` links). ``html``:
    raw HTML becomes ``html_block``/``html_inline`` tokens and passes through when rendered
    (``False``, the dashboard's choice: it is shown as text). Cached; do not modify it."""
    md = MarkdownIt("commonmark", {"html": html, "linkify": True})
    md.enable(["table", "strikethrough", "linkify"])
    tasklists_plugin(md, enabled=False)
    return md


def might_have_enhanced_tags(markdown: str) -> bool:
    """A cheap pre-check (one regular expression): ``False`` means :func:`enhanced_tags` is
    certainly empty; ``True`` that a parse is needed to know."""
    return bool(_CHEAP.search(markdown))


def _tags_of(token: Token) -> list[str]:
    if token.type not in ("html_block", "html_inline"):
        return []
    return [m.group(1).lower() for m in _TAG.finditer(token.content)]


def enhanced_tags(markdown: str) -> list[str]:
    """The distinct enhanced-Markdown tag names (sorted, lower case, without ``<``/``/``)
    that ``markdown`` holds as raw HTML — ``html_block`` or ``html_inline`` tokens of
    :func:`gfm_parser` (``html=True``) whose tags are in :data:`ENHANCED_TAGS` or start with
    ``mention-``; ``[]`` for a clean document. Never raises."""
    if not might_have_enhanced_tags(markdown):
        return []
    found: set[str] = set()
    stack = list(gfm_parser(html=True).parse(markdown))
    while stack:
        token = stack.pop()
        stack.extend(token.children or [])
        for name in _tags_of(token):
            if name in ENHANCED_TAGS or name.startswith("mention-"):
                found.add(name)
    return sorted(found)
