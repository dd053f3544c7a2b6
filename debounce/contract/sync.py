"""The two halves the service drives: the webhook parser (web process, no I/O) and the syncer
(worker), what a sync receives (:class:`SyncContext`) and what it returns (:class:`SyncResult`).

A source hands out each half from its typed settings (``Source.webhooks(settings)``,
``Source.create(settings)``): the web builds parsers only, the worker syncers only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from debounce.contract.audience import AudienceCache
from debounce.contract.documents import DocumentWriter
from debounce.contract.files import FileRef
from debounce.contract.jobs import SyncJob
from debounce.contract.metering import Checkpoint, Meter
from debounce.contract.webhooks import WebhookResult

__all__ = ["FileRefresher", "FileTokenSource", "SyncContext", "SyncResult", "Syncer", "WebhookParser"]


@dataclass(frozen=True)
class SyncResult:
    """What one successful sync wrote: counts of documents by outcome, for logs and metrics;
    and the files its documents show (``files``: the complete set, each a
    :class:`~debounce.contract.files.FileRef`, which the service syncs as file documents of
    their own and tombstones when a later sync no longer shows them; ``None``: the sync does
    not report files, and the files of earlier syncs are left as they are)."""

    written: int = 0
    unchanged: int = 0
    deleted: int = 0
    files: tuple[FileRef, ...] | None = None


@dataclass
class SyncContext:
    """Everything one sync (or one backfill page) runs with, handed to it as one argument:

    - ``store``: where it writes (the worker's store, fenced by the job's claim: a write after
      the claim was lost raises :class:`~debounce.contract.errors.LeaseLost`); ``None`` for a
      listing, which writes nothing;
    - ``credentials``: the job's workspace's (``access_token`` and what the install gave),
      ``None``: the source's configured token (:meth:`token`);
    - ``meter``: charges each request sent to the workspace's budget (``None``: unmetered);
    - ``checkpoint``: the responses this sync received, served back free when a yielded sync
      resumes (:meth:`recall`, :meth:`remember`); ``None``: nothing kept or served (the
      worker always gives one);
    - ``audiences``: the cache of the workspace's conversation audiences
      (:class:`~debounce.contract.audience.AudienceCache`; fenced like the store in a sync);
      ``None``: no cache (the source learns the audience afresh, or leaves it unknown).

    A source's one request wrapper does, before each attempt it sends (retries included):
    ``cached = context.recall(key)`` (free), else ``await context.charge()`` (one request, or
    :class:`~debounce.contract.errors.BudgetExhausted`), and after a success
    ``context.remember(key, response)`` (``key``: :func:`~debounce.contract.metering.request_key`).
    """

    store: DocumentWriter | None = None
    credentials: Mapping[str, Any] | None = None
    meter: Meter | None = None
    checkpoint: Checkpoint | None = None
    audiences: AudienceCache | None = None

    def token(self, default: str | None) -> str | None:
        """The access token of the workspace this sync runs for, else ``default`` (the
        source's configured token)."""
        token = self.credentials.get("access_token") if self.credentials else None
        return str(token) if token else default

    async def charge(self) -> None:
        """Charge one request to the workspace's budget (no-op without a meter).

        Raises:
            BudgetExhausted: the budget is empty.
        """
        if self.meter is not None:
            await self.meter.take()

    def recall(self, key: str) -> Any:
        """The response to ``key`` this sync already received (checkpoint), else ``None``."""
        return None if self.checkpoint is None else self.checkpoint.responses.get(key)

    def remember(self, key: str, response: Any) -> None:
        """Record a successful response (only JSON objects are kept)."""
        if self.checkpoint is not None and isinstance(response, dict):
            self.checkpoint.responses[key] = response

    def writer(self) -> DocumentWriter:
        """The store.

        Raises:
            RuntimeError: no store (a listing's context).
        """
        if self.store is None:
            raise RuntimeError("this sync context has no document store (a listing's context)")
        return self.store


@runtime_checkable
class WebhookParser(Protocol):
    """A source's webhook parser (web process)."""

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and parse one delivery. ``headers`` are case-insensitive (Starlette's
        ``Headers`` or a lower-cased dict); ``body`` is the raw body as received.

        Must not do I/O: the web layer answers inside Slack's 3 s.

        Raises:
            WebhookError: refused (401 signature, 400 malformed, 503 not configured).
        """
        ...


@runtime_checkable
class Syncer(Protocol):
    """A source's syncer (worker process): built from its typed settings, it syncs one page
    per call with the job's :class:`SyncContext`. A syncer that can list what it sees is also
    a :class:`~debounce.contract.backfill.Backfillable`."""

    #: The ``source_type`` of its jobs.
    source_type: str

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        """Fetch the page's latest state from the source and write it to ``context.store``.

        A page that no longer exists is a success that marks its document(s) deleted.

        Raises:
            RateLimited: the source answered 429 (retry at its ``Retry-After``).
            BudgetExhausted: the workspace's budget ran dry (hand the job back).
            PermanentError: retrying cannot help (:class:`AuthRevoked`: the token is gone).
            LeaseLost: the claim was lost; nothing more was written.
            Exception: anything else is transient; the job is retried with backoff.
        """
        ...

    async def aclose(self) -> None:
        """Release HTTP clients; called once when the worker stops."""
        ...


@runtime_checkable
class FileTokenSource(Protocol):
    """A syncer whose files are downloaded with a token it knows (Slack's ``url_private``
    with the bot token), also when the job's workspace has no stored credentials."""

    def file_token(self, context: SyncContext) -> str | None:
        """The token to send with a :class:`~debounce.contract.files.FileRef` whose
        ``with_token`` is set (only ever to the source's own hosts), ``None``: none."""
        ...


@runtime_checkable
class FileRefresher(Protocol):
    """A syncer that gives a fresh download URL for a file whose URL expired."""

    async def refresh_file(self, ref: FileRef, context: SyncContext) -> FileRef:
        """``ref`` with a fresh ``url`` (one request of the workspace's budget, charged through
        ``context``); ``url`` ``None`` when the source no longer shows the file.

        Raises:
            RateLimited, BudgetExhausted, PermanentError: as :meth:`Syncer.sync`.
        """
        ...
