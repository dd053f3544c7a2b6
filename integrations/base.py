"""The boundary between the generic service and one source (Notion, Slack, …): the whole
contract a source implements.

A source is a package under ``integrations/`` (or a third-party distribution, through the
``debounce.integrations`` entry point group) that exposes one :class:`Source`: its
``source_type``, the settings it reads from the environment, its default debounce window, how
its webhooks are signed (for ``debounce send``), how it spells page ids, its local stand-in
for ``debounce serve --demo``, and the factory of its :class:`Integration`. The service —
configuration, CLI, web, worker — iterates the registry and names no source.

An :class:`Integration` both *parses* its source's webhooks (web process) and *syncs* one page
(worker process). The service never looks inside a payload and an integration never touches
``sync_jobs``: it receives a :class:`~debounce.types.SyncJob`, writes documents through
:class:`~debounce.documents.DocumentStore`, and reports the outcome by returning or by raising
one of the errors below.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from debounce.types import ApiBudget, SourceWindow, SyncJob

if TYPE_CHECKING:
    from debounce.config import Settings
    from debounce.documents import DocumentStore

__all__ = [
    "AuthRevoked",
    "DemoSetup",
    "DemoWorkspace",
    "Identity",
    "InstallError",
    "Installed",
    "Installer",
    "current_token",
    "sync_credentials",
    "Factory",
    "Source",
    "SourceSetting",
    "SourceWindow",
    "PageEvent",
    "WebhookResult",
    "SyncResult",
    "Integration",
    "WebhookError",
    "SyncError",
    "RateLimited",
    "PermanentError",
    "header",
]


@dataclass(frozen=True)
class PageEvent:
    """One webhook event mapped to the page it concerns.

    ``source_page_id`` is the job key (a Notion page/database id, a Slack channel id);
    ``event_id`` the source's id of the event (the idempotency key; ``None`` if it has none);
    ``payload`` the JSON the job keeps as its latest event.
    """

    source_page_id: str
    event_id: str | None
    payload: dict[str, Any]
    #: The source's id of the workspace the event came from (Notion ``workspace_id``, Slack
    #: ``team_id``) and, for a Slack Enterprise Grid org, its ``enterprise_id``: routing
    #: metadata, read from the payload, so not part of the event's equality.
    workspace: str | None = field(default=None, compare=False)
    enterprise: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class WebhookResult:
    """What a verified webhook delivery amounts to.

    - ``events``: zero or more page events to enqueue (the web layer debounces them);
    - ``reply``: JSON body answered with 200 instead of the default acknowledgement (Slack's
      ``url_verification`` challenge);
    - ``verification_token``: a handshake secret the operator must see (Notion's verification
      request); the web layer logs it and stores it for ``debounce notion-token``;
    - ``note``: a short reason for an acknowledged delivery that enqueues nothing ("ignored
      event type reaction_added"), used in logs and metrics;
    - ``warning``: something the operator should hear about (Slack ``app_rate_limited``);
    - ``revoked_workspace``: the source says this workspace's token is gone (Slack
      ``app_uninstalled``, ``tokens_revoked``): the web marks it revoked.
    """

    events: list[PageEvent] = field(default_factory=list)
    reply: dict[str, Any] | None = None
    verification_token: str | None = None
    note: str | None = None
    warning: str | None = None
    revoked_workspace: str | None = None


@dataclass(frozen=True)
class SyncResult:
    """What one successful sync wrote: counts of documents by outcome, for logs and metrics."""

    written: int = 0
    unchanged: int = 0
    deleted: int = 0


class WebhookError(Exception):
    """A webhook delivery is refused; the web layer answers ``status`` with
    ``{"error": error, "detail": detail}`` and writes nothing.

    ``status`` is 400 (malformed), 401 (bad, missing or stale signature) or 503 (the source is
    not configured: its signing secret is unset).
    """

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail


class SyncError(Exception):
    """Base of the errors a sync raises to steer the queue (any other exception: retry)."""


class RateLimited(SyncError):
    """The source answered 429 (or Notion's 529 ``service_overload``): reschedule after
    ``retry_after`` seconds without spending an attempt (the queue's ``fail(...,
    retry_after=)``); the worker blocks the job's workspace for every worker meanwhile.
    ``reason`` is what the source said (Notion's ``rate_limit_reason``, ``service_overload``,
    Slack's ``ratelimited``), for the operator and the metrics."""

    def __init__(self, retry_after: float, message: str = "rate limited",
                 reason: str | None = None) -> None:
        super().__init__(f"{message} (retry after {retry_after:g} s)")
        self.retry_after = max(0.0, float(retry_after))
        self.reason = reason or "rate_limited"


class PermanentError(SyncError):
    """Retrying cannot help (no access, a malformed request): the job fails at once."""


class AuthRevoked(PermanentError):
    """The workspace's token no longer works (Notion 401 ``unauthorized``; Slack
    ``invalid_auth``, ``token_revoked``, ``account_inactive``): the worker marks the workspace
    ``revoked`` and parks its jobs until it is re-installed."""


#: The credentials of the workspace the current sync runs for (``access_token`` and what the
#: install gave), set by the worker around ``sync``; ``None``: the source's settings.
_CREDENTIALS: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "debounce_sync_credentials", default=None)


@contextlib.contextmanager
def sync_credentials(credentials: Mapping[str, Any] | None) -> Iterator[None]:
    """Run a sync (and the tasks it creates) with ``credentials`` (the worker does)."""
    token = _CREDENTIALS.set(credentials)
    try:
        yield
    finally:
        _CREDENTIALS.reset(token)


def current_token(default: str | None) -> str | None:
    """The access token of the workspace the current sync runs for, else ``default`` (the
    source's configured token)."""
    credentials = _CREDENTIALS.get()
    token = credentials.get("access_token") if credentials else None
    return str(token) if token else default


@runtime_checkable
class Integration(Protocol):
    """One source. Implementations live in ``integrations/<source_type>/`` (a package).

    Construction takes the :class:`~debounce.config.Settings` and, in the worker, a
    :class:`~debounce.documents.DocumentStore` (``None`` in the web process, which only parses).
    """

    #: The ``source_type`` of its jobs and the ``{source}`` of ``POST /webhooks/{source}``.
    source_type: str

    def parse_webhook(self, headers: Mapping[str, str], body: bytes) -> WebhookResult:
        """Verify and parse one delivery. ``headers`` are case-insensitive (Starlette's
        ``Headers`` or a lower-cased dict); ``body`` is the raw body as received.

        Must not do I/O: the web layer answers inside Slack's 3 s.

        Raises:
            WebhookError: refused (401 signature, 400 malformed, 503 not configured).
        """
        ...

    async def sync(self, job: SyncJob) -> SyncResult:
        """Fetch the page's latest state from the source and write it to ``documents``.

        A page that no longer exists is a success that marks its document(s) deleted.

        Raises:
            RateLimited: the source answered 429 (retry at its ``Retry-After``).
            PermanentError: retrying cannot help.
            Exception: anything else is transient; the job is retried with backoff.
        """
        ...

    async def aclose(self) -> None:
        """Release HTTP clients; called once when the worker stops."""
        ...


@dataclass(frozen=True)
class SourceSetting:
    """One setting a source reads from the environment.

    ``name`` is the attribute on :class:`~debounce.config.Settings` (``settings.<name>``),
    ``env`` the variable, ``default`` the value when it is unset or empty; ``kind`` is
    ``"str"`` (kept as given), ``"seconds"`` or ``"number"`` (a number >= 0) or ``"secret"`` (a
    string never shown). ``help`` is one line for the README's configuration table.
    """

    name: str
    env: str
    default: Any = None
    kind: str = "str"
    help: str = ""

    def parse(self, raw: str | None) -> Any:
        """The value of ``raw`` (the variable's text, ``None`` if unset).

        Raises:
            ValueError: not a number of seconds >= 0 for a ``seconds`` setting (names the
                variable).
        """
        if raw is None or raw.strip() == "":
            return self.default
        if self.kind in ("seconds", "number"):
            what = "a number of seconds" if self.kind == "seconds" else "a number"
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{self.env} must be {what}, got {raw!r}") from None
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"{self.env} must be {what}, got {raw!r}")
            if value < 0:
                raise ValueError(f"{self.env} must be >= 0, got {raw!r}")
            return value
        return raw


@dataclass(frozen=True)
class DemoWorkspace:
    """A further workspace of a source's stand-in that ``serve --demo`` connects (besides the
    one its settings' token defines), and one webhook body of that workspace the tour posts."""

    external_id: str
    name: str
    token: str
    event: Mapping[str, Any]


@dataclass(frozen=True)
class DemoSetup:
    """What a source's stand-in for ``debounce serve --demo`` gives the service: settings to
    apply (its API base URL and token), the demo window, the example webhook files (names in
    ``examples/<source_type>/``, glob patterns allowed) the tour posts, where the stand-in
    listens (``url``, for the log), and ``stop`` to call at exit."""

    settings: dict[str, Any]
    window: SourceWindow
    examples: tuple[str, ...]
    url: str
    stop: Callable[[], None]
    workspaces: tuple[DemoWorkspace, ...] = ()


@dataclass(frozen=True)
class Identity:
    """Who a token is, as its source says (``users.me`` / ``auth.test``): the workspace's id
    and name, the bot's user id, the Grid org."""

    external_id: str
    name: str = ""
    bot_user_id: str | None = None
    enterprise_id: str | None = None


@dataclass(frozen=True)
class Installed:
    """A workspace an install flow connected: the row saved (``id``, ``external_id``,
    ``name``, …, never the credentials) and what the success page shows (``details``)."""

    workspace: Mapping[str, Any]
    details: Mapping[str, Any] = field(default_factory=dict)


class InstallError(Exception):
    """An install flow failed (the source refused the code, the user denied access): ``reason``
    is shown on the failure page; nothing was stored."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Installer(Protocol):
    """A source's OAuth install flow ("Add to Slack", Notion's public integration).

    ``authorize_url(state, redirect_uri)``: where to send the user; ``complete(code,
    redirect_uri, save)`` exchanges the code for a token and stores the workspace with
    ``save(**fields)`` (:func:`debounce.workspaces.save`'s keywords) — raises
    :class:`InstallError`; ``success_page`` / ``failure_page`` render the HTML the user sees.
    """

    def authorize_url(self, state: str, redirect_uri: str) -> str: ...

    async def complete(
        self, code: str, redirect_uri: str, save: Callable[..., Awaitable[Mapping[str, Any]]]
    ) -> Installed: ...

    def success_page(self, installed: Installed) -> str: ...

    def failure_page(self, reason: str) -> str: ...


Factory: TypeAlias = "Callable[[Settings, DocumentStore | None], Integration]"
#: The window of a source that declares none, seconds.
DEFAULT_WINDOW = SourceWindow(30.0, 300.0)


@dataclass(frozen=True)
class Source:
    """A source as the service sees it (see the module docstring).

    - ``source_type``: the ``{source}`` of ``POST /webhooks/{source}`` and of its jobs;
    - ``create(settings, store)``: its :class:`Integration` (``store`` is ``None`` in the web
      process, which only parses);
    - ``settings``: what it reads from the environment; ``env_prefix`` names its window
      variables (``<PREFIX>_DEBOUNCE_SECONDS``, ``<PREFIX>_MAX_WAIT_SECONDS``) whose defaults
      are ``window``;
    - ``secret_setting``: the name of the setting holding its webhook signing secret, and
      ``demo_secret`` the one ``serve --demo`` uses when it is unset;
    - ``sign(body, secret, timestamp)``: the headers that sign ``body`` as the source does
      (``debounce send``, tests); ``timestamp`` is Unix seconds or ``None`` for now;
    - ``normalize_page_id``: the job key spelling of a page id given by a person (manual
      re-sync, CLI);
    - ``handshake_command``: the CLI command that prints the handshake token the source sent
      (``None`` if it has no handshake);
    - ``demo()``: start the source's local stand-in and say how to use it
      (:class:`DemoSetup`); ``None`` when it has none;
    - ``installer(settings)``: its OAuth install flow (:class:`Installer`; raises
      :class:`InstallError` naming the settings it lacks);
    - ``token_setting``: the setting whose token defines the environment's workspace;
      ``identify(settings, token)``: ask the source who a token is (:class:`Identity`; raises
      :class:`AuthRevoked` for a token that does not work);
    - ``budget``: the default API budget of each of its workspaces (``None``: unmetered),
      overridable by ``<PREFIX>_BUDGET_PER_MINUTE`` / ``<PREFIX>_BUDGET_BURST`` and per
      workspace (``debounce workspaces set-budget``); ``requests_per_page``: what a typical
      sync of one page costs (for the backfill's ETA);
    - ``reconcile_by_default``: whether its workspaces are swept for lost webhooks unless
      set otherwise (``debounce workspaces set-reconcile``).
    """

    source_type: str
    create: Factory
    settings: tuple[SourceSetting, ...] = ()
    env_prefix: str = ""
    window: SourceWindow = DEFAULT_WINDOW
    secret_setting: str | None = None
    demo_secret: str | None = None
    sign: Callable[[bytes, str, int | None], dict[str, str]] | None = None
    normalize_page_id: Callable[[str], str] = str.strip
    handshake_command: str | None = None
    demo: Callable[[], DemoSetup] | None = None
    token_setting: str | None = None
    identify: Callable[[Settings, str], Awaitable[Identity]] | None = None
    installer: Callable[[Settings], Installer] | None = None
    budget: ApiBudget | None = None
    requests_per_page: float = 1.0
    reconcile_by_default: bool = False

    def signing_secret(self, settings: Settings) -> str | None:
        """The configured webhook signing secret (``None`` when unset)."""
        if self.secret_setting is None:
            return None
        value = getattr(settings, self.secret_setting)
        return str(value) if value else None

    def secret_env(self) -> str | None:
        """The environment variable of the webhook signing secret (``None`` if none)."""
        return next((s.env for s in self.settings if s.name == self.secret_setting), None)

    def window_settings(self) -> tuple[SourceSetting, SourceSetting]:
        """The two window variables, with this source's defaults."""
        prefix = self.env_prefix or self.source_type.upper()
        return (
            SourceSetting("debounce_seconds", f"{prefix}_DEBOUNCE_SECONDS",
                          self.window.debounce_seconds, "seconds", "debounce window"),
            SourceSetting("max_wait_seconds", f"{prefix}_MAX_WAIT_SECONDS",
                          self.window.max_wait_seconds, "seconds", "max wait"),
        )


    def budget_settings(self) -> tuple[SourceSetting, SourceSetting]:
        """The two budget variables, with this source's defaults (0 per minute: unmetered)."""
        prefix = self.env_prefix or self.source_type.upper()
        budget = self.budget or ApiBudget(0.0, 1.0)
        return (
            SourceSetting("budget_per_minute", f"{prefix}_BUDGET_PER_MINUTE", budget.per_minute,
                          "number", "API requests per minute per workspace (0: unmetered)"),
            SourceSetting("budget_burst", f"{prefix}_BUDGET_BURST", budget.burst, "number",
                          "API requests a workspace may send at once (bucket capacity)"),
        )


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Value of header ``name`` in ``headers``, case-insensitively: Starlette's ``Headers`` are
    case-insensitive already; a plain dict (tests, an SDK response's headers) keeps its
    original casing."""
    if headers is None:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, val in headers.items():
        if key.lower() == lowered:
            return val
    return None
