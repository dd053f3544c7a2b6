"""Notion: verify and map webhook events (web process), sync one page or database (worker).

Parse half — https://developers.notion.com/reference/webhooks and
https://developers.notion.com/reference/webhooks-events-delivery:

- the first request to a new subscription is ``{"verification_token": "secret_..."}``, unsigned;
  it is answered 200 and the token surfaced to the operator (it becomes
  ``NOTION_WEBHOOK_SECRET``);
- every event carries ``X-Notion-Signature: sha256=<hex HMAC-SHA256 of the raw body keyed by
  that token>``; there is no timestamp, so replay protection is the event ``id`` (idempotency);
- ``page.*`` events → the page ``entity.id``; ``comment.*`` → the page ``data.page_id``;
  ``database.*`` / ``data_source.*`` → the ``entity.id``, synced as a document of its schema;
  anything else (``file_upload.*``, …) is acknowledged and ignored.

Sync half — through ``notion-client``'s ``AsyncClient`` (Notion-Version 2025-09-03): one
``pages.retrieve`` (https://developers.notion.com/reference/retrieve-a-page), then the block
tree through ``blocks.children.list`` (https://developers.notion.com/reference/get-block-children,
100 per request, paged with the SDK's ``async_collect_paginated_api``), rendered to Markdown by
this module; or ``databases.retrieve`` + ``data_sources.retrieve``
(https://developers.notion.com/reference/database, .../data-source) for a database.

Retries (see :class:`NotionIntegration`): the SDK's own retry loop is switched off; this module
retries 5xx answers twice after short sleeps and a 429 only when its ``Retry-After`` is short,
and hands a long ``Retry-After`` back to the queue as :class:`~integrations.base.RateLimited`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from notion_client import AsyncClient
from notion_client.client import ClientOptions
from notion_client.errors import APIErrorCode, APIResponseError, HTTPResponseError
from notion_client.helpers import async_collect_paginated_api

from debounce.config import Settings
from debounce.documents import Document, DocumentStore, WriteOutcome
from debounce.types import SyncJob
from integrations.base import (
    PageEvent,
    PermanentError,
    RateLimited,
    SyncResult,
    WebhookError,
    WebhookResult,
    header,
)

__all__ = [
    "NOTION_VERSION",
    "SOURCE_TYPE",
    "BlockNode",
    "NotionIntegration",
    "create",
    "normalize_id",
    "render_blocks",
    "render_rich_text",
]

SOURCE_TYPE = "notion"

#: The Notion API version we speak (notion-client 3.1's default; pinned so an SDK upgrade
#: cannot change the response shapes under us). 2025-09-03 splits databases into data sources.
NOTION_VERSION = "2025-09-03"

SIGNATURE_HEADER = "x-notion-signature"

log = logging.getLogger(__name__)

#: Event type prefixes → what the job key is (https://developers.notion.com/reference/webhooks-events-delivery).
_ENTITY_PREFIXES = ("page.", "database.", "data_source.")
_COMMENT_PREFIX = "comment."

#: Error codes after which a retry cannot help: the queue fails the job at once.
_PERMANENT_CODES = frozenset(
    {
        APIErrorCode.Unauthorized.value,
        APIErrorCode.RestrictedResource.value,
        APIErrorCode.InvalidJSON.value,
        APIErrorCode.InvalidRequestURL.value,
        APIErrorCode.InvalidRequest.value,
        APIErrorCode.ValidationError.value,
    }
)
#: Codes meaning "this id is not (or no longer) an object of the kind asked for".
_WRONG_KIND_CODES = frozenset(
    {APIErrorCode.ObjectNotFound.value, APIErrorCode.ValidationError.value}
)

#: Retry-After to assume when a 429 carries none, seconds.
DEFAULT_RETRY_AFTER = 30.0


# ============================================================================================
# Parse half
# ============================================================================================


def normalize_id(raw: str) -> str:
    """Canonical form of a Notion id: dashed lower-case UUID (``153104cd-477e-…``).

    Notion accepts ids with or without dashes; the job key must be one spelling so a webhook
    and a manual re-sync of the same page share one job. A non-UUID is returned stripped.
    """
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        return raw.strip()


def _malformed(detail: str) -> WebhookError:
    return WebhookError(400, "malformed_body", detail)


def _load_json(body: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, reason)`` if ``body`` is not UTF-8 JSON."""
    try:
        return json.loads(body.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, f"body is not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return None, f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, "body is not valid JSON: nested too deeply"


def _required_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _malformed(f"event has no {where!r} (a non-empty string is required)")
    return value


# ============================================================================================
# Markdown rendering (pure functions; shapes: https://developers.notion.com/reference/block
# and https://developers.notion.com/reference/rich-text)
# ============================================================================================


@dataclass
class BlockNode:
    """A block object as ``blocks.children.list`` returns it, plus its fetched children."""

    block: dict[str, Any]
    children: list[BlockNode] = field(default_factory=list)

    @property
    def type(self) -> str:
        """The block ``type`` ("paragraph", "heading_1", …; "" if missing)."""
        value = self.block.get("type")
        return value if isinstance(value, str) else ""

    @property
    def data(self) -> dict[str, Any]:
        """The type-specific body (``block[block["type"]]``), ``{}`` if missing."""
        value = self.block.get(self.type)
        return value if isinstance(value, dict) else {}


def _plain(items: Any) -> str:
    """Concatenated ``plain_text`` of a rich text array (no Markdown)."""
    if not isinstance(items, list):
        return ""
    return "".join(_item_text(i) for i in items if isinstance(i, dict))


def _item_text(item: Mapping[str, Any]) -> str:
    plain = item.get("plain_text")
    if isinstance(plain, str):
        return plain
    kind = item.get("type")
    body = item.get(kind) if isinstance(kind, str) else None
    if isinstance(body, dict):
        if isinstance(body.get("content"), str):
            return str(body["content"])
        if isinstance(body.get("expression"), str):
            return str(body["expression"])
    return ""


def _code_span(value: str) -> str:
    fence = "`"
    while fence in value:
        fence += "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def render_rich_text(items: Any) -> str:
    """Markdown of a Notion rich text array.

    Annotations map to ``**bold**``, ``*italic*``, ``~~strike~~`` and `` `code` ``; a link
    (``href``) to ``[text](url)``; an inline equation to ``$expr$``. Underline and colours have
    no Markdown and are dropped. Adjacent items with the same annotations and link are merged
    first (Notion splits runs freely), and markers are kept inside surrounding whitespace so
    ``**bold **`` never appears. Text is not escaped.
    """
    if not isinstance(items, list):
        return ""
    runs: list[tuple[str, tuple[bool, bool, bool, bool], str | None, bool]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        raw_ann = item.get("annotations")
        ann: Mapping[str, Any] = raw_ann if isinstance(raw_ann, dict) else {}
        key = (
            bool(ann.get("bold")),
            bool(ann.get("italic")),
            bool(ann.get("strikethrough")),
            bool(ann.get("code")),
        )
        href = item.get("href") if isinstance(item.get("href"), str) else None
        if item.get("type") == "equation":
            expr = _item_text(item)
            if expr:
                runs.append((expr, key, href, True))
            continue
        content = _item_text(item)
        if not content:
            continue
        if runs and not runs[-1][3] and runs[-1][1] == key and runs[-1][2] == href:
            runs[-1] = (runs[-1][0] + content, key, href, False)
        else:
            runs.append((content, key, href, False))
    out: list[str] = []
    for content, (bold, italic, strike, is_code), href, is_equation in runs:
        core = content.strip()
        if not core:
            out.append(content)
            continue
        lead = content[: len(content) - len(content.lstrip())]
        trail = content[len(content.rstrip()) :]
        if is_equation:
            core = f"${core}$"
        elif is_code:
            core = _code_span(core)
        if strike:
            core = f"~~{core}~~"
        if italic:
            core = f"*{core}*"
        if bold:
            core = f"**{core}**"
        if href:
            core = f"[{core}]({href})"
        out.append(f"{lead}{core}{trail}")
    return "".join(out)


def _notion_url(object_id: str) -> str:
    return f"https://www.notion.so/{object_id.replace('-', '')}"


def _file_url(data: Mapping[str, Any]) -> str:
    kind = data.get("type")
    body = data.get(kind) if isinstance(kind, str) else None
    if isinstance(body, dict) and isinstance(body.get("url"), str):
        return str(body["url"])
    return str(data.get("url") or "")


def _indent(lines: list[str], prefix: str) -> list[str]:
    return [prefix + line if line else line for line in lines]


_BULLET_GROUP = frozenset({"bulleted_list_item", "to_do"})
_NUMBER_GROUP = frozenset({"numbered_list_item"})
#: Blocks whose children are separate Notion objects (synced as their own documents).
_NO_RECURSE = frozenset({"child_page", "child_database"})
#: Navigation-only blocks with no content of their own: rendered as nothing.
_SILENT = frozenset({"table_of_contents", "breadcrumb"})
_CODE_LANGUAGE_ALIASES = {"plain text": "", "c++": "cpp", "c#": "csharp", "f#": "fsharp"}


def _list_group(block_type: str) -> str | None:
    if block_type in _BULLET_GROUP:
        return "bullet"
    if block_type in _NUMBER_GROUP:
        return "number"
    return None


def _render_children_into(lines: list[str], node: BlockNode) -> list[str]:
    """``lines`` then, after a blank line, the node's children (flattened, not indented)."""
    if not node.children:
        return lines
    kids = _render_nodes(node.children)
    if not kids:
        return lines
    return [*lines, "", *kids] if lines else kids


def _list_item(marker: str, node: BlockNode, indent: int | None = None) -> list[str]:
    """A list item: ``marker`` + text; continuation lines and children indented by
    ``indent`` spaces (default: the marker's width, CommonMark's content column)."""
    first, *rest = render_rich_text(node.data.get("rich_text")).split("\n")
    pad = " " * (len(marker) if indent is None else indent)
    lines = [f"{marker}{first}".rstrip(), *_indent(rest, pad)]
    if node.children:
        kids = _render_nodes(node.children)
        tight = _list_group(node.children[0].type) is not None
        lines += ([] if tight else [""]) + _indent(kids, pad)
    return lines


def _quoted(lines: list[str]) -> list[str]:
    return [f"> {line}" if line else ">" for line in lines]


def _table(node: BlockNode) -> list[str]:
    rows: list[list[str]] = []
    for row in node.children:
        cells = row.data.get("cells")
        if row.type != "table_row" or not isinstance(cells, list):
            continue
        rows.append(
            [render_rich_text(cell).replace("|", "\\|").replace("\n", "<br>") for cell in cells]
        )
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]

    def fmt(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [fmt(rows[0]), fmt(["---"] * width), *(fmt(r) for r in rows[1:])]


def _link_block(label: str, url: str, *, image: bool = False) -> list[str]:
    if not url:
        return [f"[{label}]"]
    return [f"{'!' if image else ''}[{label}]({url})"]


def _render_node(node: BlockNode, number: int) -> list[str]:
    """Markdown lines of one block (``number``: its position in a numbered list)."""
    t, data = node.type, node.data
    rich = render_rich_text(data.get("rich_text"))
    if t == "paragraph":
        return _render_children_into(rich.split("\n") if rich else [], node)
    if t in ("heading_1", "heading_2", "heading_3"):
        return _render_children_into([f"{'#' * int(t[-1])} {rich}".rstrip()], node)
    if t == "bulleted_list_item":
        return _list_item("- ", node)
    if t == "numbered_list_item":
        return _list_item(f"{number}. ", node)
    if t == "to_do":
        # A task item's content column is after "- ": nest its children by 2, not 6.
        return _list_item("- [x] " if data.get("checked") else "- [ ] ", node, indent=2)
    if t == "toggle":
        body = _render_nodes(node.children)
        return [
            "<details>",
            f"<summary>{rich}</summary>",
            *(["", *body] if body else []),
            "",
            "</details>",
        ]
    if t == "quote":
        return _quoted(_render_children_into(rich.split("\n"), node))
    if t == "callout":
        icon = data.get("icon")
        emoji = icon.get("emoji") if isinstance(icon, dict) else None
        head = f"{emoji} {rich}" if isinstance(emoji, str) and emoji else rich
        return _quoted(_render_children_into(head.split("\n"), node))
    if t == "code":
        source = _plain(data.get("rich_text"))
        raw_lang = str(data.get("language") or "").strip().lower()
        lang = _CODE_LANGUAGE_ALIASES.get(raw_lang, raw_lang.replace(" ", "-"))
        fence = "```"
        while fence in source:
            fence += "`"
        lines = [f"{fence}{lang}", *source.split("\n"), fence]
        caption = render_rich_text(data.get("caption"))
        return [*lines, "", caption] if caption else lines
    if t == "divider":
        return ["---"]
    if t == "equation":
        return ["$$", str(data.get("expression") or ""), "$$"]
    if t == "table":
        return _table(node)
    if t == "table_row":  # only reached outside a table
        cells = data.get("cells")
        if not isinstance(cells, list):
            cells = []
        return ["| " + " | ".join(render_rich_text(c) for c in cells) + " |"]
    if t == "image":
        alt = _plain(data.get("caption")) or "image"
        return _link_block(alt, _file_url(data), image=True)
    if t in ("file", "pdf", "video", "audio"):
        name = data.get("name") if isinstance(data.get("name"), str) else ""
        label = render_rich_text(data.get("caption")) or str(name) or t
        return _link_block(label, _file_url(data))
    if t in ("bookmark", "embed", "link_preview"):
        url = str(data.get("url") or "")
        return _link_block(render_rich_text(data.get("caption")) or url or t, url)
    if t == "child_page":
        title = str(data.get("title") or "Untitled")
        return [f"Page: [{title}]({_notion_url(str(node.block.get('id', '')))})"]
    if t == "child_database":
        title = str(data.get("title") or "Untitled database")
        return [f"Database: [{title}]({_notion_url(str(node.block.get('id', '')))})"]
    if t == "link_to_page":
        kind = data.get("type")
        target = data.get(kind) if isinstance(kind, str) else None
        if isinstance(target, str):
            return [f"Link: [{kind}]({_notion_url(target)})"]
        return ["[link to page]"]
    if t in ("column_list", "column", "synced_block", "template"):
        lines = rich.split("\n") if rich else []
        return _render_children_into(lines, node)
    if t in _SILENT:
        return []
    label = t or "unknown"
    return _render_children_into([f"[unsupported Notion block: {label}]"], node)


def _render_nodes(nodes: Sequence[BlockNode]) -> list[str]:
    out: list[str] = []
    prev_group: str | None = None
    prev_type: str | None = None
    number = 0
    for node in nodes:
        group = _list_group(node.type)
        number = number + 1 if node.type == "numbered_list_item" and prev_type == node.type else 1
        lines = _render_node(node, number)
        if lines:
            if out:
                if group is None or group != prev_group:
                    out.append("")
            out.extend(lines)
        prev_group, prev_type = group, node.type
    return out


def render_blocks(nodes: Sequence[BlockNode]) -> str:
    """Markdown of a block tree (the page body), ending with one newline, or ``""``.

    Headings 1-3, paragraphs, bulleted/numbered/to-do lists (nested by indentation,
    consecutive items of one list kept tight), toggles (``<details>``), quotes and callouts
    (``>``), fenced code with its language, dividers, ``$$`` equations, tables (first row as
    header), image/file/bookmark/embed links, child page/database links. An unknown block
    becomes ``[unsupported Notion block: <type>]``; it never raises.
    """
    lines = _render_nodes(nodes)
    return "\n".join(lines).strip("\n") + "\n" if lines else ""


# ============================================================================================
# Properties and schema summaries
# ============================================================================================


def _title_of(page: Mapping[str, Any]) -> str:
    props = page.get("properties")
    if isinstance(props, dict):
        for value in props.values():
            if isinstance(value, dict) and value.get("type") == "title":
                return _plain(value.get("title")).strip()
    return ""


def _user_id(value: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    return None


def _property_value(prop: Mapping[str, Any]) -> Any:
    """A JSON-simple summary of one page property value
    (https://developers.notion.com/reference/page-property-values)."""
    kind = prop.get("type")
    value = prop.get(kind) if isinstance(kind, str) else None
    if kind in ("title", "rich_text"):
        return _plain(value)
    if kind in ("select", "status"):
        return value.get("name") if isinstance(value, dict) else None
    if kind == "multi_select":
        return [o.get("name") for o in value or [] if isinstance(o, dict)]
    if kind in ("people", "relation"):
        return [i for i in (_user_id(v) for v in value or []) if i]
    if kind in ("created_by", "last_edited_by"):
        return _user_id(value)
    if kind == "date":
        if not isinstance(value, dict):
            return None
        start, end = value.get("start"), value.get("end")
        return f"{start}/{end}" if end else start
    if kind == "formula":
        if not isinstance(value, dict):
            return None
        inner = value.get(value.get("type", ""))
        return inner.get("start") if isinstance(inner, dict) else inner
    if kind == "unique_id":
        if not isinstance(value, dict):
            return None
        prefix, num = value.get("prefix"), value.get("number")
        return f"{prefix}-{num}" if prefix else num
    if kind == "files":
        return [f.get("name") for f in value or [] if isinstance(f, dict)]
    if kind == "rollup":
        if not isinstance(value, dict):
            return None
        inner = value.get(value.get("type", ""))
        return inner if isinstance(inner, (int, float, str)) else None
    if kind == "verification":
        return value.get("state") if isinstance(value, dict) else None
    return value if isinstance(value, (str, int, float, bool)) or value is None else None


def _parent_summary(parent: Any) -> dict[str, Any]:
    """``{"type": "page_id", "id": "…"}`` from a parent object (``workspace`` has no id)."""
    if not isinstance(parent, dict):
        return {}
    kind = parent.get("type")
    out: dict[str, Any] = {"type": kind}
    value = parent.get(kind) if isinstance(kind, str) else None
    if isinstance(value, str):
        out["id"] = value
    if isinstance(parent.get("database_id"), str) and kind != "database_id":
        out["database_id"] = parent["database_id"]
    return out


def _parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``2026-11-20T23:55:00.000Z``) as aware UTC, else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _schema_details(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    config = prop.get(kind) if isinstance(kind, str) else None
    if not isinstance(config, dict):
        return ""
    options = config.get("options")
    if isinstance(options, list):
        return ", ".join(str(o.get("name")) for o in options if isinstance(o, dict))
    if kind == "number" and config.get("format"):
        return str(config["format"])
    if kind == "formula" and config.get("expression"):
        return _code_span(str(config["expression"]))
    if kind == "relation":
        target = config.get("data_source_id") or config.get("database_id")
        return f"→ {target}" if target else ""
    if kind == "rollup":
        return " ".join(
            str(config[k]) for k in ("function", "rollup_property_name") if config.get(k)
        )
    return ""


def _schema_markdown(data_source: Mapping[str, Any]) -> list[str]:
    props = data_source.get("properties")
    if not isinstance(props, dict) or not props:
        return ["(no properties)"]
    lines = ["| Property | Type | Details |", "| --- | --- | --- |"]
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        cells = [str(name), str(prop.get("type") or ""), _schema_details(prop)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def _schema_summary(data_source: Mapping[str, Any]) -> dict[str, str]:
    props = data_source.get("properties")
    if not isinstance(props, dict):
        return {}
    return {str(k): str(v.get("type")) for k, v in props.items() if isinstance(v, dict)}


def _retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date), ``None`` if absent/invalid."""
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _code(error: HTTPResponseError) -> str:
    code = error.code
    return str(code.value if isinstance(code, APIErrorCode) else code)


# ============================================================================================
# The integration
# ============================================================================================


class NotionIntegration:
    """Both halves of the Notion source.

    Retry policy (a deliberate choice). notion-client 3.x retries 429 and GET 500/503 inside
    the call, sleeping ``Retry-After`` (capped at 60 s) — a worker slot asleep for up to a
    minute, twice, and the sleep repeats the call the rate limit just refused. So the SDK's
    loop is off (``ClientOptions(retry=False)``) and :meth:`_call` decides per answer:

    - 5xx (``internal_server_error``, ``service_unavailable``, ``gateway_timeout``, a gateway's
      non-JSON 502) and ``conflict_error``: retried in process after ``retry_delays`` seconds
      (default 0.5 s then 2 s: a blip should not cost the page a 30 s queue backoff); when
      they are spent the SDK's exception propagates and the queue backs off;
    - 429 ``rate_limited``: retried in process only if ``Retry-After`` ≤ ``max_inline_wait``
      (default 1 s, within the same retry budget); a longer wait raises
      :class:`RateLimited` at once so the slot is freed and the queue reschedules at
      ``Retry-After`` without spending an attempt (Notion allows ~3 requests/s per
      integration, shared by every worker: https://developers.notion.com/reference/request-limits);
    - timeouts (``timeout_seconds``, default 30 s) and connection errors propagate (retry);
    - ``unauthorized``/``restricted_resource`` and 400-class request errors:
      :class:`PermanentError`;
    - ``object_not_found`` for the page/database itself, or ``in_trash``: success, the
      document is marked deleted.

    ``page_size`` is the block-children page size (Notion's maximum, 100).
    """

    source_type = SOURCE_TYPE

    def __init__(
        self,
        settings: Settings,
        store: DocumentStore | None,
        *,
        retry_delays: Sequence[float] = (0.5, 2.0),
        max_inline_wait: float = 1.0,
        timeout_seconds: float = 30.0,
        page_size: int = 100,
    ) -> None:
        self.settings = settings
        self.store = store
        self.retry_delays = tuple(retry_delays)
        self.max_inline_wait = max_inline_wait
        self.timeout_seconds = timeout_seconds
        self.page_size = page_size
        self._client: AsyncClient | None = None

    # -- parse ---------------------------------------------------------------------------

    def normalize_page_id(self, page_id: str) -> str:
        """Job key spelling of a Notion id (see :func:`normalize_id`)."""
        return normalize_id(page_id)

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and map one Notion delivery (no I/O).

        ``headers``: case-insensitive mapping; ``body``: the raw request body (bytes).

        Returns a :class:`WebhookResult` with the verification token (the unsigned
        ``{"verification_token": ...}`` handshake), one :class:`PageEvent` (job key, event
        ``id``, the whole event as payload), or none and a ``note`` for ignored event types.

        Raises:
            WebhookError: 503 ``not_configured`` (``NOTION_WEBHOOK_SECRET`` unset), 401
                ``invalid_signature`` (``X-Notion-Signature`` missing or wrong), 400
                ``malformed_body`` (not a JSON object, or ``type``/``id``/``entity.id``/
                ``data.page_id`` missing).
        """
        value, json_error = _load_json(body)
        if (
            isinstance(value, dict)
            and "type" not in value
            and isinstance(value.get("verification_token"), str)
            and value["verification_token"]
        ):
            return WebhookResult(
                verification_token=value["verification_token"], note="verification request"
            )
        self._verify_signature(headers, body)
        if json_error is not None:
            raise _malformed(json_error)
        if not isinstance(value, dict):
            raise _malformed(f"body must be a JSON object, got {type(value).__name__}")
        return self._map_event(value)

    def _verify_signature(self, headers: Mapping[str, str], body: bytes) -> None:
        secret = self.settings.notion_webhook_secret
        if not secret:
            raise WebhookError(
                503,
                "not_configured",
                "Notion webhooks are not configured: set NOTION_WEBHOOK_SECRET to the "
                "verification token Notion sent to this endpoint (it was logged when the "
                "verification request arrived) and restart.",
            )
        given = header(headers, SIGNATURE_HEADER)
        if not given:
            raise WebhookError(401, "invalid_signature", "missing X-Notion-Signature header")
        scheme, _, digest = given.strip().partition("=")
        if scheme.lower() != "sha256" or not digest:
            raise WebhookError(
                401, "invalid_signature", "malformed X-Notion-Signature (expected sha256=<hex>)"
            )
        expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode("ascii"), digest.lower().encode("utf-8")):
            raise WebhookError(
                401,
                "invalid_signature",
                "X-Notion-Signature does not match the body signed with NOTION_WEBHOOK_SECRET",
            )

    @staticmethod
    def _map_event(event: dict[str, Any]) -> WebhookResult:
        event_type = _required_str(event, "type", "type")
        event_id = _required_str(event, "id", "id")
        if event_type.startswith(_COMMENT_PREFIX):
            data = event.get("data")
            page_id = data.get("page_id") if isinstance(data, dict) else None
            if not isinstance(page_id, str) or not page_id.strip():
                raise _malformed(f"{event_type} event has no 'data.page_id'")
            key = page_id
        elif event_type.startswith(_ENTITY_PREFIXES):
            entity = event.get("entity")
            if not isinstance(entity, dict):
                raise _malformed(f"{event_type} event has no 'entity' object")
            entity_id = entity.get("id")
            if not isinstance(entity_id, str) or not entity_id.strip():
                raise _malformed(f"{event_type} event has no 'entity.id'")
            key = entity_id
        else:
            return WebhookResult(note=f"ignored event type {event_type}")
        return WebhookResult(
            events=[PageEvent(source_page_id=normalize_id(key), event_id=event_id, payload=event)]
        )

    # -- client and calls ----------------------------------------------------------------

    def _api(self) -> AsyncClient:
        """The SDK client, created on first use.

        Raises:
            PermanentError: ``NOTION_TOKEN`` is unset.
        """
        if self._client is None:
            token = self.settings.notion_token
            if not token:
                raise PermanentError(
                    "NOTION_TOKEN is not set: set NOTION_TOKEN to the Notion integration's "
                    "token (Settings → Connections → Develop or manage integrations) and "
                    "share the pages with it, then re-sync"
                )
            self._client = AsyncClient(
                options=ClientOptions(
                    auth=token,
                    base_url=self.settings.notion_base_url.rstrip("/"),
                    timeout_ms=int(self.timeout_seconds * 1000),
                    notion_version=NOTION_VERSION,
                    retry=False,
                    logger=logging.getLogger(f"{__name__}.sdk"),
                    log_level=logging.WARNING,
                )
            )
        return self._client

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _call(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """``await fn(**kwargs)`` with this integration's retry policy (class docstring).

        Raises:
            RateLimited: a 429 whose ``Retry-After`` (seconds) is too long to wait here.
            HTTPResponseError: any other error answer once in-process retries are spent.
        """
        attempt = 0
        while True:
            try:
                call: Awaitable[Any] = fn(**kwargs)
                return await call
            except HTTPResponseError as exc:
                code = _code(exc)
                can_retry = attempt < len(self.retry_delays)
                if exc.status == 429 or code == APIErrorCode.RateLimited.value:
                    wait = _retry_after_seconds(exc.headers)
                    if wait is not None and wait <= self.max_inline_wait and can_retry:
                        log.info("notion: rate limited, waiting %.1f s in process", wait)
                        await asyncio.sleep(wait)
                        attempt += 1
                        continue
                    raise RateLimited(
                        DEFAULT_RETRY_AFTER if wait is None else wait, "Notion rate limited"
                    ) from exc
                transient = exc.status >= 500 or code == APIErrorCode.ConflictError.value
                if transient and can_retry:
                    delay = self.retry_delays[attempt]
                    log.info("notion: %s (%s), retrying in %.1f s", exc.status, code, delay)
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                raise

    async def _fetch(self, fn: Callable[..., Any], /, **kwargs: Any) -> dict[str, Any] | None:
        """One object via :meth:`_call`; ``None`` if Notion answers ``object_not_found``."""
        try:
            result = await self._call(fn, **kwargs)
        except APIResponseError as exc:
            if _code(exc) == APIErrorCode.ObjectNotFound.value:
                return None
            raise
        return result if isinstance(result, dict) else None

    async def _walk(self, api: AsyncClient, block_id: str, depth: int = 0) -> list[BlockNode]:
        """All children of ``block_id``, recursively (``has_children``), in order; the pages
        are collected with ``async_collect_paginated_api``. A nested block that vanished
        mid-walk (404) becomes a childless node rather than failing the sync."""
        bound = self._bound(api.blocks.children.list)
        try:
            results = await async_collect_paginated_api(
                bound, block_id=block_id, page_size=self.page_size
            )
        except APIResponseError as exc:
            if depth > 0 and _code(exc) == APIErrorCode.ObjectNotFound.value:
                return []
            raise
        nodes: list[BlockNode] = []
        for item in results:
            if not isinstance(item, dict):
                continue
            node = BlockNode(item)
            if item.get("has_children") and node.type not in _NO_RECURSE and depth < 64:
                node.children = await self._walk(api, str(item["id"]), depth + 1)
            nodes.append(node)
        return nodes

    def _bound(self, fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        async def call(**kwargs: Any) -> Any:
            return await self._call(fn, **kwargs)

        return call

    # -- sync ----------------------------------------------------------------------------

    async def sync(self, job: SyncJob) -> SyncResult:
        """Fetch the job's page (or database / data source) and write its document.

        The kind comes from the payload's ``entity.type`` (``comment.*`` events → page); a
        payload without one (a manual re-sync) tries the page, then the database, then the
        data source. One ``pages.retrieve`` per page sync.

        Raises:
            RateLimited: Notion answered 429 with a long ``Retry-After``.
            PermanentError: no ``NOTION_TOKEN``; ``unauthorized``/``restricted_resource``;
                the request itself is invalid.
            Exception: 5xx after in-process retries, timeouts, connection errors (retry).
        """
        if self.store is None:
            raise RuntimeError("NotionIntegration.sync needs a DocumentStore (worker only)")
        api = self._api()
        object_id = job.source_page_id
        kind = _entity_kind(job.payload)
        try:
            if kind == "page":
                page = await self._fetch(api.pages.retrieve, page_id=object_id)
                return await self._sync_page(api, job, page)
            if kind == "database":
                db = await self._fetch(api.databases.retrieve, database_id=object_id)
                return await self._sync_database(api, job, db)
            if kind == "data_source":
                ds = await self._fetch(api.data_sources.retrieve, data_source_id=object_id)
                return await self._sync_data_source(job, ds)
            return await self._sync_unknown(api, job)
        except APIResponseError as exc:
            code = _code(exc)
            if code in _PERMANENT_CODES:
                raise PermanentError(f"Notion answered {exc.status} {code}: {exc}") from exc
            raise

    async def _sync_unknown(self, api: AsyncClient, job: SyncJob) -> SyncResult:
        """Manual re-sync of an id of unknown kind: page, else database, else data source."""
        object_id = job.source_page_id
        attempts: list[tuple[str, Callable[..., Any], str]] = [
            ("page", api.pages.retrieve, "page_id"),
            ("database", api.databases.retrieve, "database_id"),
            ("data_source", api.data_sources.retrieve, "data_source_id"),
        ]
        for kind, fn, arg in attempts:
            try:
                found = await self._call(fn, **{arg: object_id})
            except APIResponseError as exc:
                if _code(exc) in _WRONG_KIND_CODES:
                    continue
                raise
            if kind == "page":
                return await self._sync_page(api, job, found)
            if kind == "database":
                return await self._sync_database(api, job, found)
            return await self._sync_data_source(job, found)
        return await self._deleted(job, "not found as a page, database or data source")

    async def _deleted(self, job: SyncJob, why: str) -> SyncResult:
        assert self.store is not None
        marked = await self.store.mark_page_deleted(SOURCE_TYPE, job.source_page_id)
        return SyncResult(deleted=len(marked), detail=f"{job.source_page_id}: {why}")

    async def _write(self, doc: Document, detail: str) -> SyncResult:
        assert self.store is not None
        outcome = await self.store.upsert(doc)
        if outcome is WriteOutcome.UNCHANGED:
            return SyncResult(unchanged=1, detail=f"{detail} (unchanged)")
        return SyncResult(written=1, detail=f"{detail} ({outcome.value})")

    async def _sync_page(
        self, api: AsyncClient, job: SyncJob, page: dict[str, Any] | None
    ) -> SyncResult:
        if page is None:
            return await self._deleted(job, "page not found (deleted or no longer shared)")
        if page.get("in_trash") or page.get("archived"):
            return await self._deleted(job, "page is in the trash")
        page_id = str(page.get("id") or job.source_page_id)
        nodes = await self._walk(api, page_id)
        raw_props = page.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        created_by = _user_id(page.get("created_by"))
        edited_by = _user_id(page.get("last_edited_by"))
        metadata: dict[str, Any] = {
            "object": "page",
            "parent": _parent_summary(page.get("parent")),
            "created_by": created_by,
            "last_edited_by": edited_by,
            "authors": sorted({i for i in (created_by, edited_by) if i}),
            "created_time": page.get("created_time"),
            "properties": {
                str(name): _property_value(value)
                for name, value in props.items()
                if isinstance(value, dict) and value.get("type") != "title"
            },
        }
        doc = Document(
            source_type=SOURCE_TYPE,
            document_id=page_id,
            source_page_id=job.source_page_id,
            title=_title_of(page) or "Untitled",
            content=render_blocks(nodes),
            url=page.get("url") if isinstance(page.get("url"), str) else None,
            metadata=metadata,
            source_updated_at=_parse_time(page.get("last_edited_time")),
        )
        return await self._write(doc, f"page {page_id}: {_count(nodes)} blocks")

    async def _sync_database(
        self, api: AsyncClient, job: SyncJob, db: dict[str, Any] | None
    ) -> SyncResult:
        if db is None:
            return await self._deleted(job, "database not found (deleted or no longer shared)")
        if db.get("in_trash") or db.get("archived"):
            return await self._deleted(job, "database is in the trash")
        db_id = str(db.get("id") or job.source_page_id)
        title = _plain(db.get("title")).strip() or "Untitled database"
        lines: list[str] = []
        description = render_rich_text(db.get("description"))
        if description:
            lines += [description, ""]
        refs = [r for r in db.get("data_sources") or [] if isinstance(r, dict) and r.get("id")]
        schemas: dict[str, dict[str, str]] = {}
        for ref in refs:
            ds = await self._fetch(api.data_sources.retrieve, data_source_id=str(ref["id"]))
            name = str(ref.get("name") or (_plain(ds.get("title")) if ds else "") or ref["id"])
            lines += [f"## {name}", ""]
            if ds is None:
                lines += ["(data source not shared with the integration)", ""]
                continue
            lines += [*_schema_markdown(ds), ""]
            schemas[name] = _schema_summary(ds)
        if "properties" in db:  # databases retrieved with an API version before 2025-09-03
            lines += [*_schema_markdown(db), ""]
            schemas[title] = _schema_summary(db)
        metadata: dict[str, Any] = {
            "object": "database",
            "parent": _parent_summary(db.get("parent")),
            "created_by": _user_id(db.get("created_by")),
            "last_edited_by": _user_id(db.get("last_edited_by")),
            "data_sources": [{"id": r["id"], "name": r.get("name")} for r in refs],
            "schema": schemas,
        }
        doc = Document(
            source_type=SOURCE_TYPE,
            document_id=db_id,
            source_page_id=job.source_page_id,
            title=title,
            content="\n".join(lines).strip("\n") + "\n" if lines else "",
            url=db.get("url") if isinstance(db.get("url"), str) else None,
            metadata=metadata,
            source_updated_at=_parse_time(db.get("last_edited_time")),
        )
        return await self._write(doc, f"database {db_id}: {len(refs)} data source(s)")

    async def _sync_data_source(self, job: SyncJob, ds: dict[str, Any] | None) -> SyncResult:
        if ds is None:
            return await self._deleted(job, "data source not found")
        if ds.get("in_trash") or ds.get("archived"):
            return await self._deleted(job, "data source is in the trash")
        ds_id = str(ds.get("id") or job.source_page_id)
        lines: list[str] = []
        description = render_rich_text(ds.get("description"))
        if description:
            lines += [description, ""]
        lines += _schema_markdown(ds)
        metadata: dict[str, Any] = {
            "object": "data_source",
            "parent": _parent_summary(ds.get("parent")),
            "created_by": _user_id(ds.get("created_by")),
            "last_edited_by": _user_id(ds.get("last_edited_by")),
            "schema": _schema_summary(ds),
        }
        doc = Document(
            source_type=SOURCE_TYPE,
            document_id=ds_id,
            source_page_id=job.source_page_id,
            title=_plain(ds.get("title")).strip() or "Untitled data source",
            content="\n".join(lines) + "\n",
            url=ds.get("url") if isinstance(ds.get("url"), str) else None,
            metadata=metadata,
            source_updated_at=_parse_time(ds.get("last_edited_time")),
        )
        return await self._write(doc, f"data source {ds_id}")


def _count(nodes: Sequence[BlockNode]) -> int:
    return sum(1 + _count(n.children) for n in nodes)


def _entity_kind(payload: Mapping[str, Any]) -> str | None:
    """``"page"``, ``"database"``, ``"data_source"`` or ``None`` (unknown: try each)."""
    event_type = payload.get("type")
    if isinstance(event_type, str) and event_type.startswith(_COMMENT_PREFIX):
        return "page"
    entity = payload.get("entity")
    kind = entity.get("type") if isinstance(entity, dict) else None
    if kind in ("page", "database", "data_source"):
        return str(kind)
    if isinstance(event_type, str):
        for prefix in _ENTITY_PREFIXES:
            if event_type.startswith(prefix):
                return prefix[:-1]
    return None


def create(settings: Settings, store: DocumentStore | None) -> NotionIntegration:
    """The registry's factory (see ``integrations/__init__.py``)."""
    return NotionIntegration(settings, store)
