"""Settings read from the environment (12-factor).

Every name and default here is the table in the README. :meth:`Settings.from_env` is the only
place that reads ``os.environ``; the rest of the service receives a :class:`Settings` value,
which keeps tests free to build their own. Each default is declared once, here (the service's)
or in its source's :class:`~debounce.contract.Source` (a source's settings and window).
Environment values are parsed by one set of functions, :mod:`debounce.contract.settings`, for
the service's settings and the sources' alike.

Sources declare their own settings as a typed frozen dataclass (``Source.settings_type``):
``Settings`` accepts their fields as keyword arguments and keeps the values set in
``source_values``; a source receives its typed settings (``Source.configure(settings)``), never
this class. This module names no source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import integrations
from debounce.contract.settings import env_bool as _bool
from debounce.contract.settings import env_int as _int
from debounce.contract.settings import env_seconds as _float
from debounce.contract.settings import env_str as _str
from debounce.contract.source import DEFAULT_WINDOW
from debounce.retry import DEFAULT_BACKOFF_SECONDS
from debounce.types import ApiBudget, SourceWindow

__all__ = ["DEFAULT_WINDOW", "Settings", "SourceWindow"]


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    return _float(env, name, default, positive=True)


def _secret_key(env: Mapping[str, str]) -> str | None:
    raw = _str(env, "DEBOUNCE_SECRET_KEY")
    if raw is not None:
        from debounce.secrets import Keyring

        Keyring(raw)  # raises SecretKeyError (a ValueError) naming the variable
    return raw


#: The level names ``logging`` knows.
_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def _log_level(env: Mapping[str, str], default: str) -> str:
    raw = (env.get("DEBOUNCE_LOG_LEVEL") or default).strip().upper()
    if raw == "WARN":
        raw = "WARNING"
    if raw not in _LEVELS:
        raise ValueError(f"DEBOUNCE_LOG_LEVEL must be one of {', '.join(_LEVELS)}, "
                         f"got {env.get('DEBOUNCE_LOG_LEVEL')!r}")
    return raw




@dataclass(frozen=True, init=False)
class Settings:
    """The service's configuration.

    Times are seconds. ``None`` means "unset" for the optional secrets and tokens; a source
    whose signing secret is unset refuses its webhooks with 503 (see ``integrations``).
    ``windows`` holds the windows set explicitly (by environment or by a caller); a source
    missing from it gets the window its :class:`~debounce.contract.Source` declares.
    ``source_values`` holds the sources' own settings that were set, by field name (see the
    module docstring); :meth:`source_settings` builds one source's typed settings from it.

    Raises (construction):
        TypeError: a keyword that is neither a field nor a registered source's setting.
    """

    database_url: str | None = None
    port: int = 8000
    data_dir: str = ".debounce"

    windows: Mapping[str, SourceWindow] = field(default_factory=dict)
    #: API budgets set explicitly (by environment or by a caller); a source missing from it
    #: gets the budget its :class:`~debounce.contract.Source` declares.
    budgets: Mapping[str, ApiBudget] = field(default_factory=dict)

    admin_token: str | None = None
    #: Bearer token of the read API (``/documents``, the change feed); the admin token reads
    #: too. ``None`` (and no admin token): the read API answers 503.
    read_token: str | None = field(default=None, repr=False)
    #: How long the change feed keeps a change before the prune deletes it, in seconds.
    change_retention_seconds: float = 7 * 86400.0
    #: Mark the dashboard's session cookie ``Secure`` on every answer, not only over HTTPS
    #: (for a TLS proxy that does not forward the scheme; see docs/dashboard.md).
    dashboard_secure_cookie: bool = False
    worker_concurrency: int = 8
    #: Syncs in flight per source per worker process (so one source cannot starve another).
    worker_source_concurrency: int | None = None
    #: Syncs in flight per workspace across every worker process (the fair claim's K).
    workspace_concurrency: int = 4
    lease_seconds: float = 60.0
    max_attempts: int = 5
    #: Transient-failure backoff schedule in seconds; the last value repeats.
    backoff_seconds: tuple[float, ...] = DEFAULT_BACKOFF_SECONDS
    max_body_bytes: int = 1_048_576
    log_format: str = "text"
    log_level: str = "INFO"
    #: Seconds the worker lets running syncs finish after SIGTERM before releasing them.
    shutdown_grace_seconds: float = 25.0
    #: Longest sleep of an idle worker between checks for due jobs, in seconds.
    poll_interval_seconds: float = 2.0
    #: How long a request waits for a database connection before answering 503, seconds.
    pool_timeout_seconds: float = 3.0
    #: Longest time a webhook waits for its events to be committed before answering 503
    #: (seconds; well under the senders' delivery timeouts (3 s at the shortest), so a slow database
    #: never counts as a failed delivery).
    #: Also the web's ``statement_timeout``: a statement past it is cancelled and rolled back.
    webhook_deadline_seconds: float = 2.0
    pool_max_size: int = 10
    #: How long ``seen_events`` remembers an event id (idempotency), in seconds.
    event_retention_seconds: float = 3 * 86400.0
    #: How long finished (completed/failed) jobs are kept before ``prune``, in seconds.
    job_retention_seconds: float = 7 * 86400.0
    #: How often a worker prunes finished jobs and event ids past retention (one worker at a
    #: time), in seconds; 0 turns the scheduled prune off (``debounce prune`` still works).
    prune_interval_seconds: float = 3600.0
    #: Backfill every workspace when it is connected (environment, install flow, CLI).
    backfill_on_connect: bool = True
    #: How often each workspace whose reconciliation is on is swept for lost webhooks
    #: (newest edits first, down to the last sweep's watermark), seconds; 0: never.
    reconcile_interval_seconds: float = 600.0
    #: How often a sweep walks the whole listing instead (finds deletions), seconds.
    reconcile_full_interval_seconds: float = 86400.0
    #: Port of the worker's Prometheus endpoint; ``None``: no endpoint.
    metrics_port: int | None = None
    #: Fernet key(s), comma-separated, that encrypt workspace credentials at rest (the first
    #: encrypts, all decrypt: see ``debounce.secrets``); ``None``: none stored yet.
    secret_key: str | None = field(default=None, repr=False)
    #: The service's public base URL (``https://debounce.example.com``), for the install flows'
    #: redirect URIs; ``None``: the URL each request came in on.
    public_url: str | None = None

    source_values: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        own = {f.name: f for f in fields(Settings)}
        extra = dict(values.pop("source_values", None) or {})
        for key in [k for k in values if k not in own]:
            extra[key] = values.pop(key)
        if extra:
            declared = integrations.source_settings()
            unknown = sorted(k for k in extra if k not in declared)
            if unknown:
                raise TypeError(f"Settings got unknown setting(s): {', '.join(unknown)}")
        for name, f in own.items():
            if name == "source_values":
                continue
            if name in values:
                value = values[name]
            elif callable(f.default_factory):
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(self, name, value)
        object.__setattr__(self, "source_values", extra)


    def window(self, source_type: str) -> SourceWindow:
        """Debounce window of ``source_type``: the one set, else its source's default, else
        :data:`DEFAULT_WINDOW` (30 s / 300 s)."""
        if source_type in self.windows:
            return self.windows[source_type]
        source = integrations.sources().get(source_type)
        return source.window if source is not None else DEFAULT_WINDOW

    def budget(self, source_type: str) -> ApiBudget | None:
        """Default API budget of ``source_type``'s workspaces: the one set, else its source's,
        else ``None`` (unmetered). A per-minute rate of 0 also means unmetered."""
        if source_type in self.budgets:
            return self.budgets[source_type]
        source = integrations.sources().get(source_type)
        return source.budget if source is not None else None

    def source_budgets(self) -> dict[str, ApiBudget]:
        """The default budget of every registered source that has one (see :meth:`budget`)."""
        return {s: b for s in integrations.sources() if (b := self.budget(s)) is not None}

    def source_settings(self, source_type: str) -> Any:
        """The typed settings of ``source_type`` (its ``Source.settings_type``) from the values
        set here and its defaults.

        Raises:
            integrations.UnknownSource: nothing is registered under that name.
        """
        return integrations.get(source_type).configure(self)

    def with_(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default ``os.environ``).

        Raises:
            ValueError: a variable is present but malformed (names the variable).
        """
        env = os.environ if env is None else env
        d = cls()
        log_format = env.get("DEBOUNCE_LOG_FORMAT", d.log_format).strip().lower() or d.log_format
        if log_format not in ("text", "json"):
            raise ValueError(f"DEBOUNCE_LOG_FORMAT must be 'text' or 'json', got {log_format!r}")
        backoff_raw = env.get("DEBOUNCE_BACKOFF_SECONDS")
        backoff = d.backoff_seconds
        if backoff_raw:
            try:
                backoff = tuple(float(x) for x in backoff_raw.split(",") if x.strip())
            except ValueError:
                raise ValueError(
                    f"DEBOUNCE_BACKOFF_SECONDS must be comma-separated seconds, got {backoff_raw!r}"
                ) from None
            if not backoff or any(b < 0 for b in backoff):
                raise ValueError("DEBOUNCE_BACKOFF_SECONDS must list non-negative seconds")
        source_concurrency_raw = env.get("DEBOUNCE_WORKER_SOURCE_CONCURRENCY")
        source_values: dict[str, Any] = {}
        windows: dict[str, SourceWindow] = {}
        budgets: dict[str, ApiBudget] = {}
        for source in integrations.sources().values():
            for setting in source.settings:
                source_values[setting.name] = setting.parse(env.get(setting.env))
            debounce, max_wait = source.window_settings()
            windows[source.source_type] = SourceWindow(debounce.parse(env.get(debounce.env)),
                                                       max_wait.parse(env.get(max_wait.env)))
            per_minute, burst = source.budget_settings()
            budgets[source.source_type] = ApiBudget(per_minute.parse(env.get(per_minute.env)),
                                                    max(1.0, burst.parse(env.get(burst.env))))
        return cls(
            database_url=_str(env, "DATABASE_URL"),
            port=_int(env, "PORT", d.port),
            data_dir=env.get("DEBOUNCE_DATA_DIR") or d.data_dir,
            windows=windows,
            budgets=budgets,
            source_values=source_values,
            admin_token=_str(env, "DEBOUNCE_ADMIN_TOKEN"),
            read_token=_str(env, "DEBOUNCE_READ_TOKEN"),
            change_retention_seconds=_float(env, "DEBOUNCE_CHANGE_RETENTION_SECONDS",
                                            d.change_retention_seconds),
            dashboard_secure_cookie=_bool(env, "DEBOUNCE_DASHBOARD_SECURE_COOKIE",
                                          d.dashboard_secure_cookie),
            worker_concurrency=_int(env, "DEBOUNCE_WORKER_CONCURRENCY", d.worker_concurrency),
            workspace_concurrency=_int(env, "DEBOUNCE_WORKSPACE_CONCURRENCY",
                                       d.workspace_concurrency),
            worker_source_concurrency=(
                _int(env, "DEBOUNCE_WORKER_SOURCE_CONCURRENCY", 1)
                if source_concurrency_raw
                else None
            ),
            lease_seconds=_positive(env, "DEBOUNCE_LEASE_SECONDS", d.lease_seconds),
            max_attempts=_int(env, "DEBOUNCE_MAX_ATTEMPTS", d.max_attempts),
            backoff_seconds=backoff,
            max_body_bytes=_int(env, "DEBOUNCE_MAX_BODY_BYTES", d.max_body_bytes),
            log_format=log_format,
            log_level=_log_level(env, d.log_level),
            shutdown_grace_seconds=_float(env, "DEBOUNCE_SHUTDOWN_GRACE_SECONDS", d.shutdown_grace_seconds),
            poll_interval_seconds=_positive(env, "DEBOUNCE_POLL_INTERVAL_SECONDS", d.poll_interval_seconds),
            pool_timeout_seconds=_positive(env, "DEBOUNCE_POOL_TIMEOUT_SECONDS", d.pool_timeout_seconds),
            webhook_deadline_seconds=_positive(env, "DEBOUNCE_WEBHOOK_DEADLINE_SECONDS",
                                               d.webhook_deadline_seconds),
            pool_max_size=_int(env, "DEBOUNCE_POOL_MAX_SIZE", d.pool_max_size),
            event_retention_seconds=_float(env, "DEBOUNCE_EVENT_RETENTION_SECONDS",
                                           d.event_retention_seconds),
            job_retention_seconds=_float(env, "DEBOUNCE_JOB_RETENTION_SECONDS",
                                         d.job_retention_seconds),
            prune_interval_seconds=_float(env, "DEBOUNCE_PRUNE_INTERVAL_SECONDS",
                                          d.prune_interval_seconds),
            backfill_on_connect=_bool(env, "DEBOUNCE_BACKFILL_ON_CONNECT", d.backfill_on_connect),
            reconcile_interval_seconds=_float(env, "DEBOUNCE_RECONCILE_INTERVAL_SECONDS",
                                              d.reconcile_interval_seconds),
            reconcile_full_interval_seconds=_positive(
                env, "DEBOUNCE_RECONCILE_FULL_INTERVAL_SECONDS",
                d.reconcile_full_interval_seconds),
            metrics_port=(_int(env, "DEBOUNCE_METRICS_PORT", 0, minimum=1)
                          if env.get("DEBOUNCE_METRICS_PORT") else None),
            secret_key=_secret_key(env),
            public_url=_str(env, "DEBOUNCE_PUBLIC_URL"),
        )
