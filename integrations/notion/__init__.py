"""Notion: verify and map webhook events (web process), sync one page or database (worker).

The package's modules: ``settings.py`` (:class:`NotionSettings`), ``webhook.py``
(:class:`NotionWebhooks`: verify, parse, id spelling), ``client.py`` (the SDK clients, retries,
error codes, budget charging), ``render.py`` (blocks → Markdown), ``richtext.py`` (rich text and
Markdown escaping), ``properties.py`` (page properties and schemas), ``markdown.py`` (the
markdown endpoint), ``sync.py`` (:class:`NotionSyncer`: the sync paths, writing ``documents``),
``backfill.py`` (``search``: what the connection can see, one backfill page per call),
``datasource.py`` + ``table.py`` (a data source's document with the table of its rows),
``comments.py`` (a page's open discussions),
``source.py`` (:data:`SOURCE`, what its entry point names: ``debounce.registry`` loads it).

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

Sync half — through ``notion-client``'s ``AsyncClient`` (Notion-Version 2026-03-11), asking
only for what changed (``sync.py``; docs/notion.md, "What a page sync asks for"): the page
object (``pages.retrieve``, https://developers.notion.com/reference/retrieve-a-page, or the
listing's copy a bulk job carries) and/or the content (``pages.retrieve_markdown``, else the
block tree through ``blocks.children.list``, rendered to Markdown by ``render.py``); or
``databases.retrieve`` + ``data_sources.retrieve``
(https://developers.notion.com/reference/database, .../data-source) for a database.

Retries (see :class:`~integrations.notion.client.NotionClient`): the SDK's own retry loop is
switched off; ``client.py`` retries 5xx answers twice after short sleeps and a 429 only when
its ``Retry-After`` is short, and hands a long ``Retry-After`` back to the queue as
:class:`~debounce.contract.RateLimited`.
"""

from integrations.notion.client import NOTION_VERSION
from integrations.notion.render import BlockNode, render_blocks
from integrations.notion.richtext import render_rich_text
from integrations.notion.settings import NotionSettings
from integrations.notion.source import SOURCE
from integrations.notion.sync import SOURCE_TYPE, NotionSyncer, create
from integrations.notion.webhook import NotionWebhooks, normalize_id

__all__ = [
    "NOTION_VERSION",
    "SOURCE",
    "SOURCE_TYPE",
    "BlockNode",
    "NotionSettings",
    "NotionSyncer",
    "NotionWebhooks",
    "create",
    "normalize_id",
    "render_blocks",
    "render_rich_text",
]
