"""The contract between the service and its sources — everything a source implements and
receives, and nothing else of the project: this package imports no other module of
``debounce`` or ``integrations`` (checked by ``lint-imports``, see ``pyproject.toml``).

- :mod:`.source`: the :class:`Source` spec the registry lists;
- :mod:`.settings`: a source's typed settings and the one parser of environment values;
- :mod:`.webhooks`: what a webhook delivery amounts to (:class:`WebhookResult`,
  :class:`PageEvent`);
- :mod:`.sync`: the :class:`WebhookParser` and the :class:`Syncer` the service drives, the
  :class:`SyncContext` a sync receives and the :class:`SyncResult` it returns;
- :mod:`.jobs`: the :class:`SyncJob` a sync receives, a source's window and API budget;
- :mod:`.audience`: who may read a document (:class:`Audience`) and the cache of
  conversation audiences a sync reaches (:class:`AudienceCache`);
- :mod:`.documents`: the :class:`Document` a sync writes and the :class:`DocumentWriter` it
  writes through;
- :mod:`.metering`: the budget meter and the checkpoint of a yielded sync;
- :mod:`.backfill`: one page of what a source can see (backfill, reconciliation);
- :mod:`.install`: OAuth install flows and who a token is;
- :mod:`.errors`: what parsers, syncs and install flows raise to steer the service;
- :mod:`.http`: ``Retry-After`` parsing and counting each API request;
- :mod:`.markdown`: the one Markdown a document's ``content`` is written in (CommonMark + GFM,
  as markdown-it-py parses it) and the check that no tag of Notion's enhanced Markdown survives.

A source (``integrations/<source>/``) imports only this package, its own modules and its SDK.
"""

from debounce.contract.audience import (
    AUDIENCE_KINDS,
    CONVERSATION_KINDS,
    Audience,
    AudienceCache,
    CachedAudience,
)
from debounce.contract.backfill import (
    Backfillable,
    BackfillItem,
    BackfillPage,
    as_backfillable,
)
from debounce.contract.documents import Document, DocumentWriter, WriteOutcome
from debounce.contract.errors import (
    AuthRevoked,
    BudgetExhausted,
    InstallError,
    LeaseLost,
    PermanentError,
    RateLimited,
    ScopeMissing,
    SyncError,
    WebhookError,
)
from debounce.contract.files import FILE_KEY_PREFIX, FileRef
from debounce.contract.http import count_api_request, parse_retry_after
from debounce.contract.install import Identity, Installed, Installer
from debounce.contract.jobs import ApiBudget, JobStatus, SourceWindow, SyncJob
from debounce.contract.metering import Checkpoint, Meter, request_key
from debounce.contract.settings import NoSettings, SourceSetting, setting
from debounce.contract.source import DEFAULT_WINDOW, Factory, HasSourceValues, Source
from debounce.contract.sync import (
    FileRefresher,
    FileTokenSource,
    SyncContext,
    Syncer,
    SyncResult,
    WebhookParser,
)
from debounce.contract.webhooks import PageEvent, WebhookResult, header

__all__ = [
    "FILE_KEY_PREFIX",
    "FileRef",
    "FileRefresher",
    "FileTokenSource",
    "AUDIENCE_KINDS",
    "CONVERSATION_KINDS",
    "DEFAULT_WINDOW",
    "ApiBudget",
    "Audience",
    "AudienceCache",
    "AuthRevoked",
    "BudgetExhausted",
    "CachedAudience",
    "Checkpoint",
    "BackfillItem",
    "Backfillable",
    "as_backfillable",
    "BackfillPage",
    "Document",
    "DocumentWriter",
    "Factory",
    "HasSourceValues",
    "Identity",
    "InstallError",
    "Installed",
    "Installer",
    "JobStatus",
    "LeaseLost",
    "Meter",
    "NoSettings",
    "PageEvent",
    "PermanentError",
    "RateLimited",
    "ScopeMissing",
    "Source",
    "SourceSetting",
    "SourceWindow",
    "SyncError",
    "SyncContext",
    "SyncJob",
    "SyncResult",
    "Syncer",
    "WebhookError",
    "WebhookParser",
    "WebhookResult",
    "WriteOutcome",
    "count_api_request",
    "header",
    "parse_retry_after",
    "request_key",
    "setting",
]
