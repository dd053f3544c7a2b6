"""Settings read from the environment (12-factor).

Each of the service's variables is declared once, on its field of :class:`Settings`: the
variable, how its text is read (a :class:`Kind`), the default and one line of meaning
(:func:`variable`). :meth:`Settings.from_env` reads them in one loop and is the only place that
reads ``os.environ``; the rest of the service receives a :class:`Settings` value, which keeps
tests free to build their own. ``docs/configuration.md`` is generated from the same fields
(``python -m debounce.devtools.config_reference``). Environment values are parsed by one set of
functions, :mod:`debounce.contract.settings`, for the service's settings and the sources' alike.

Sources declare their own settings as a typed frozen dataclass (``Source.settings_type``, its
fields made with :func:`debounce.contract.setting`): ``Settings`` accepts their fields as
keyword arguments and keeps the values set in ``source_values``; a source receives its typed
settings (``Source.configure(settings)``), never this class. This module names no source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from debounce import registry
from debounce.config_kinds import (
    BACKOFF,
    BOOLEAN,
    COUNT,
    ENV,
    HOSTS,
    INTEGER,
    LOG_FORMAT,
    LOG_LEVEL,
    MEDIA_TYPES,
    OPTIONAL_INTEGER,
    POSITIVE_SECONDS,
    POSTGRES_URL,
    SECONDS,
    SECRET,
    SECRET_KEY,
    SHARE,
    TEXT,
    EnvVar,
    Kind,
    number_text,
    variable,
)
from debounce.contract.source import DEFAULT_WINDOW
from debounce.infra.retry import DEFAULT_BACKOFF_SECONDS
from debounce.types import ApiBudget, SourceWindow

#: The media types extracted by default (the formats debounce.worker.extraction reads).
DEFAULT_FILE_MEDIA_TYPES: tuple[str, ...] = (
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "text/csv",
    "text/markdown",
    "text/x-markdown",
    "text/plain",
    "text/html",
)

__all__ = [
    "BACKOFF",
    "BOOLEAN",
    "COUNT",
    "DEFAULT_FILE_MEDIA_TYPES",
    "DEFAULT_WINDOW",
    "ENV",
    "HOSTS",
    "INTEGER",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "MEDIA_TYPES",
    "OPTIONAL_INTEGER",
    "POSITIVE_SECONDS",
    "POSTGRES_URL",
    "SECONDS",
    "SECRET",
    "SECRET_KEY",
    "SHARE",
    "TEXT",
    "EnvVar",
    "Kind",
    "Settings",
    "SourceWindow",
    "number_text",
    "variable",
]


@dataclass(frozen=True, init=False)
class Settings:
    """The service's configuration.

    Times are seconds. ``None`` means "unset" for the optional secrets and tokens; a source
    whose signing secret is unset refuses its webhooks with 503 (see its parser).
    The fields made with :func:`variable` are read from the environment (the module
    docstring). ``windows`` holds the windows set explicitly (by environment or by a caller);
    a source missing from it gets the window its :class:`~debounce.contract.Source` declares.
    ``budgets`` does the same for API budgets. ``source_values`` holds the sources' own
    settings that were set, by field name (see the module docstring); a source's
    ``configure(settings)`` builds its typed settings from it.

    Raises (construction):
        TypeError: a keyword that is neither a field nor a registered source's setting.
    """

    database_url: str | None = variable(
        "DATABASE_URL",
        POSTGRES_URL,
        "Postgres URL",
        unset="`debounce serve` starts an embedded Postgres under `DEBOUNCE_DATA_DIR`, which "
        "the commands run by hand then use; `migrate`, `worker`, `web` refuse to start",
    )
    database_replica_url: str | None = variable(
        "DATABASE_REPLICA_URL",
        POSTGRES_URL,
        "Postgres URL of a hot standby of `DATABASE_URL` (a Heroku follower): the read-only "
        "routes (`GET /documents`, `GET /documents/{source}/{id}`, `GET /documents/changes`), "
        "the dashboard's pages and the read-only commands (`documents changes`) read there; "
        'everything that writes stays on `DATABASE_URL` (docs/scaling.md, "Read replicas")',
        unset="every read goes to `DATABASE_URL`",
    )
    port: int = variable(
        "PORT", INTEGER, "web port (`web`, `serve`; where `debounce send` posts by default)", 8000
    )
    data_dir: str = variable(
        "DEBOUNCE_DATA_DIR",
        TEXT,
        "directory of the embedded Postgres (and of the demo's secret key)",
        ".debounce",
    )

    windows: Mapping[str, SourceWindow] = field(default_factory=dict)
    budgets: Mapping[str, ApiBudget] = field(default_factory=dict)

    admin_token: str | None = variable(
        "DEBOUNCE_ADMIN_TOKEN",
        SECRET,
        "bearer token of the admin routes, and the sign-in of the dashboard at `/admin/`",
        unset="the admin routes and the dashboard answer 503",
    )
    read_token: str | None = variable(
        "DEBOUNCE_READ_TOKEN",
        SECRET,
        "bearer token of the read API (`/documents`, the change feed); the admin token reads "
        "too, this one opens nothing else",
        unset="only the admin token reads; neither set: the read API answers 503",
    )
    change_retention_seconds: float = variable(
        "DEBOUNCE_CHANGE_RETENTION_SECONDS",
        SECONDS,
        "how long the change feed keeps a change at least (pruned with finished jobs, by whole "
        "partitions: up to about an eighth longer; an older cursor answers 410)",
        7 * 86400.0,
    )
    dashboard_secure_cookie: bool = variable(
        "DEBOUNCE_DASHBOARD_SECURE_COOKIE",
        BOOLEAN,
        "mark the dashboard's session cookie `Secure` even on plain-HTTP requests (a TLS proxy "
        "that does not forward the scheme; see docs/dashboard.md)",
        False,
        unset="`Secure` over HTTPS only",
    )
    worker_concurrency: int = variable(
        "DEBOUNCE_WORKER_CONCURRENCY", INTEGER, "syncs in flight per worker process", 8
    )
    worker_source_concurrency: int | None = variable(
        "DEBOUNCE_WORKER_SOURCE_CONCURRENCY",
        OPTIONAL_INTEGER,
        "of which one source may take at most (so one source cannot starve another)",
        unset="¾ of `DEBOUNCE_WORKER_CONCURRENCY`, rounded up",
    )
    workspace_concurrency: int = variable(
        "DEBOUNCE_WORKSPACE_CONCURRENCY",
        INTEGER,
        "syncs of one workspace in flight, across every worker process (the fair claim)",
        4,
    )
    worker_flush_seconds: float = variable(
        "DEBOUNCE_WORKER_FLUSH_SECONDS",
        SECONDS,
        "how long a worker buffers its syncs' outcomes and lease renewals before writing them "
        "in one statement (a renewal is written at once; a crash loses at most the unwritten "
        "outcomes, whose jobs come back with their leases)",
        0.005,
    )
    lease_seconds: float = variable(
        "DEBOUNCE_LEASE_SECONDS", POSITIVE_SECONDS, "claim lease, extended while a sync runs", 60.0
    )
    max_attempts: int = variable("DEBOUNCE_MAX_ATTEMPTS", INTEGER, "attempts before a job is `failed`", 5)
    backoff_seconds: tuple[float, ...] = variable(
        "DEBOUNCE_BACKOFF_SECONDS",
        BACKOFF,
        "backoff after a transient failure, by attempt (the last value repeats)",
        DEFAULT_BACKOFF_SECONDS,
    )
    max_body_bytes: int = variable(
        "DEBOUNCE_MAX_BODY_BYTES", INTEGER, "largest webhook body accepted (larger: 413)", 1_048_576
    )
    log_format: str = variable("DEBOUNCE_LOG_FORMAT", LOG_FORMAT, "format of the log lines", "text")
    log_level: str = variable(
        "DEBOUNCE_LOG_LEVEL",
        LOG_LEVEL,
        "least level logged (CRITICAL, ERROR, WARNING or WARN, INFO, DEBUG)",
        "INFO",
    )
    shutdown_grace_seconds: float = variable(
        "DEBOUNCE_SHUTDOWN_GRACE_SECONDS",
        SECONDS,
        "time running syncs get to finish after SIGTERM before the worker releases them",
        25.0,
    )
    poll_interval_seconds: float = variable(
        "DEBOUNCE_POLL_INTERVAL_SECONDS",
        POSITIVE_SECONDS,
        "longest sleep of an idle worker between checks for due jobs",
        2.0,
    )
    pool_timeout_seconds: float = variable(
        "DEBOUNCE_POOL_TIMEOUT_SECONDS",
        POSITIVE_SECONDS,
        "how long a request waits for a database connection before answering 503",
        3.0,
    )
    webhook_deadline_seconds: float = variable(
        "DEBOUNCE_WEBHOOK_DEADLINE_SECONDS",
        POSITIVE_SECONDS,
        "longest wait for a webhook's events to commit before answering 503 (well under the "
        "senders' 3 s delivery timeout); also the web's statement timeout",
        2.0,
    )
    pool_max_size: int = variable(
        "DEBOUNCE_POOL_MAX_SIZE",
        INTEGER,
        "database connections of a web process's pool (`debounce serve`: this + 4, its worker "
        "sharing it; a replica pool of the same size on `DATABASE_REPLICA_URL`); the whole "
        'deployment\'s count: docs/deploying.md, "Connections"',
        10,
    )
    worker_pool_max_size: int | None = variable(
        "DEBOUNCE_WORKER_POOL_MAX_SIZE",
        OPTIONAL_INTEGER,
        "database connections of a worker process's pool (plus one for its `LISTEN`): one a "
        "running sync, and its helpers' (reaper, heartbeat, leases, backfill, pruner)",
        unset="`DEBOUNCE_WORKER_CONCURRENCY` + 4",
    )
    forwarded_allow_ips: str = variable(
        "FORWARDED_ALLOW_IPS",
        TEXT,
        "the addresses whose `X-Forwarded-Proto` / `X-Forwarded-For` the web trusts (comma-"
        "separated IPs or networks, `*`: any): the platform's router, so that HTTPS is seen as "
        "such (the dashboard's `Secure` cookie and `https` redirects) and the log names the "
        'client (uvicorn\'s own variable; docs/deploying.md, "Behind a router")',
        "127.0.0.1",
        unset="`127.0.0.1`; the `Procfile`'s and the Dockerfile's web: `*` (the router is the only way in)",
    )
    feed_max_wait_seconds: float = variable(
        "DEBOUNCE_FEED_MAX_WAIT_SECONDS",
        POSITIVE_SECONDS,
        "longest a long-poll of the change feed is held (a larger `wait` is answered after "
        "this, with no changes): under the idle limit of the platform's router (Heroku ends a "
        "request silent for 30 s)",
        25.0,
    )
    event_retention_seconds: float = variable(
        "DEBOUNCE_EVENT_RETENTION_SECONDS",
        SECONDS,
        "how long event ids are remembered (idempotency)",
        3 * 86400.0,
    )
    job_retention_seconds: float = variable(
        "DEBOUNCE_JOB_RETENTION_SECONDS",
        SECONDS,
        "how long finished (completed, failed) jobs are kept at least (pruned by whole "
        "partitions of finished_jobs: up to about an eighth longer); also the window of the "
        'dashboard\'s "completed" column',
        7 * 86400.0,
    )
    prune_interval_seconds: float = variable(
        "DEBOUNCE_PRUNE_INTERVAL_SECONDS",
        SECONDS,
        "how often a worker prunes finished jobs, event ids and feed changes past retention "
        "(one worker at a time; 0: never, `debounce prune` still works)",
        3600.0,
    )
    backfill_on_connect: bool = variable(
        "DEBOUNCE_BACKFILL_ON_CONNECT",
        BOOLEAN,
        "backfill a workspace when it is connected (environment, install flow, CLI)",
        True,
    )
    reconcile_interval_seconds: float = variable(
        "DEBOUNCE_RECONCILE_INTERVAL_SECONDS",
        SECONDS,
        "how often workspaces with reconciliation on are reconciled, for lost webhooks (a "
        "backfill of the newest edits, down to the last reconciliation's; 0: never)",
        600.0,
    )
    reconcile_full_interval_seconds: float = variable(
        "DEBOUNCE_RECONCILE_FULL_INTERVAL_SECONDS",
        POSITIVE_SECONDS,
        "how often a reconciliation lists everything instead (a full reconciliation: finds deletions)",
        86400.0,
    )
    metrics_port: int | None = variable(
        "DEBOUNCE_METRICS_PORT",
        OPTIONAL_INTEGER,
        "port of the worker's Prometheus endpoint (`/metrics`)",
        unset="no endpoint",
    )
    secret_key: str | None = variable(
        "DEBOUNCE_SECRET_KEY",
        SECRET_KEY,
        "key(s) that encrypt workspace credentials at rest (the first encrypts, all decrypt; "
        "`debounce workspaces new-key` makes one)",
        unset="no credentials can be stored (install flows answer 503)",
    )
    public_url: str | None = variable(
        "DEBOUNCE_PUBLIC_URL",
        TEXT,
        "the service's public base URL (`https://debounce.example.com`), for the install "
        "flows' redirect URIs",
        unset="the URL each request came in on",
    )
    delivery_concurrency: int = variable(
        "DEBOUNCE_DELIVERY_CONCURRENCY",
        INTEGER,
        "subscriptions a worker process delivers to at once (push delivery: its own "
        "connections, apart from the syncs')",
        4,
    )
    delivery_timeout_seconds: float = variable(
        "DEBOUNCE_DELIVERY_TIMEOUT_SECONDS",
        POSITIVE_SECONDS,
        "how long a subscription's endpoint has to answer one delivery (then it is retried)",
        15.0,
    )
    delivery_lease_seconds: float = variable(
        "DEBOUNCE_DELIVERY_LEASE_SECONDS",
        POSITIVE_SECONDS,
        "how long a worker holds a subscription without renewing (at least twice the "
        "delivery timeout; a crashed worker's subscriptions move after it)",
        60.0,
    )
    delivery_disable_after_seconds: float = variable(
        "DEBOUNCE_DELIVERY_DISABLE_AFTER_SECONDS",
        POSITIVE_SECONDS,
        "how long a subscription's endpoint may keep failing before it is disabled",
        5 * 86400.0,
    )
    deletion_guard_count: int = variable(
        "DEBOUNCE_DELETION_GUARD_COUNT",
        COUNT,
        "deletions of a workspace within the guard's window above which they are held for an "
        'operator (when they also exceed the share; docs/consumers.md, "Deletions held")',
        10,
    )
    deletion_guard_share: float = variable(
        "DEBOUNCE_DELETION_GUARD_SHARE",
        SHARE,
        "share of a workspace's documents that deletions within the window must also exceed to "
        "be held (0.1: 10 %)",
        0.1,
    )
    deletion_guard_window_seconds: float = variable(
        "DEBOUNCE_DELETION_GUARD_WINDOW_SECONDS",
        SECONDS,
        "the window over which the deletion guard counts a workspace's deletions",
        600.0,
    )

    file_max_bytes: int = variable(
        "DEBOUNCE_FILE_MAX_BYTES",
        INTEGER,
        "largest file whose text is extracted (bytes, counted as they download); a larger "
        'file\'s document keeps its metadata and says "too large"',
        64_000_000,
    )
    file_max_characters: int = variable(
        "DEBOUNCE_FILE_MAX_CHARACTERS",
        INTEGER,
        'characters of Markdown kept of one file; past them its text ends with a "truncated" mark',
        1_000_000,
    )
    file_timeout_seconds: float = variable(
        "DEBOUNCE_FILE_TIMEOUT_SECONDS",
        POSITIVE_SECONDS,
        "wall-clock time one file's extraction may take before its child process is killed",
        60.0,
    )
    file_memory_mb: int = variable(
        "DEBOUNCE_FILE_MEMORY_MB",
        INTEGER,
        "address space an extraction's child process may add (MiB; `RLIMIT_AS`, Linux)",
        1024,
    )
    file_media_types: tuple[str, ...] = variable(
        "DEBOUNCE_FILE_MEDIA_TYPES",
        MEDIA_TYPES,
        "media types whose text is extracted (others, and every image, audio and video file: metadata only)",
        DEFAULT_FILE_MEDIA_TYPES,
    )
    file_external_hosts: tuple[str, ...] = variable(
        "DEBOUNCE_FILE_EXTERNAL_HOSTS",
        HOSTS,
        "hosts (and their subdomains) whose external files are downloaded: Notion `external` "
        "files, Slack remote files; never at a loopback, private or link-local address",
        (),
        unset="none: external files keep their link and metadata only",
    )
    file_token_hosts: tuple[str, ...] = variable(
        "DEBOUNCE_FILE_TOKEN_HOSTS",
        HOSTS,
        "hosts besides https `slack.com`, `slack-gov.com` and their subdomains that a "
        "workspace token may be sent to for a file (stand-ins on loopback: `127.0.0.1:8010`)",
        (),
        unset="none",
    )

    source_values: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        own = {f.name: f for f in fields(Settings)}
        extra = dict(values.pop("source_values", None) or {})
        for key in [k for k in values if k not in own]:
            extra[key] = values.pop(key)
        if extra:
            declared = registry.source_settings()
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

    def worker_pool_size(self) -> int:
        """Connections of a worker process's pool: ``DEBOUNCE_WORKER_POOL_MAX_SIZE``, else
        ``DEBOUNCE_WORKER_CONCURRENCY`` + 4 (one a running sync, four for its helpers)."""
        return self.worker_pool_max_size or self.worker_concurrency + 4

    def connections(self, process: str) -> tuple[int, str]:
        """The connections one ``process`` (``web``, ``worker``, ``serve``) may open on
        ``DATABASE_URL`` at its busiest, and the settings that size them, as the formula of
        docs/deploying.md ("Connections") counts them: a web its pool; a worker its pool and
        its ``LISTEN``; ``serve`` the web's pool + 4 (shared with its worker) and the
        ``LISTEN``.

        Raises:
            ValueError: an unknown ``process``.
        """
        if process == "web":
            return self.pool_max_size, f"DEBOUNCE_POOL_MAX_SIZE {self.pool_max_size}"
        if process == "worker":
            return (
                self.worker_pool_size() + 1,
                f"a pool of {self.worker_pool_size()} (DEBOUNCE_WORKER_POOL_MAX_SIZE, else "
                f"DEBOUNCE_WORKER_CONCURRENCY {self.worker_concurrency} + 4) + 1 LISTEN",
            )
        if process == "serve":
            return (self.pool_max_size + 5, f"DEBOUNCE_POOL_MAX_SIZE {self.pool_max_size} + 4 + 1 LISTEN")
        raise ValueError(f"unknown process {process!r}")

    def window(self, source_type: str) -> SourceWindow:
        """Debounce window of ``source_type``: the one set, else its source's default, else
        :data:`DEFAULT_WINDOW` (30 s / 300 s)."""
        if source_type in self.windows:
            return self.windows[source_type]
        source = registry.sources().get(source_type)
        return source.window if source is not None else DEFAULT_WINDOW

    def budget(self, source_type: str) -> ApiBudget | None:
        """Default API budget of ``source_type``'s workspaces: the one set, else its source's,
        else ``None`` (unmetered). A per-minute rate of 0 also means unmetered."""
        if source_type in self.budgets:
            return self.budgets[source_type]
        source = registry.sources().get(source_type)
        return source.budget if source is not None else None

    def source_budgets(self) -> dict[str, ApiBudget]:
        """The default budget of every registered source that has one (see :meth:`budget`)."""
        return {s: b for s in registry.sources() if (b := self.budget(s)) is not None}

    def with_(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default ``os.environ``): every field made with
        :func:`variable`, and every registered source's settings, window and budget.

        Raises:
            ValueError: a variable is present but malformed (names the variable).
        """
        env = os.environ if env is None else env
        values = {f.name: f.metadata[ENV].read(env, f.default) for f in fields(cls) if ENV in f.metadata}
        source_values: dict[str, Any] = {}
        windows: dict[str, SourceWindow] = {}
        budgets: dict[str, ApiBudget] = {}
        for source in registry.sources().values():
            for setting in source.settings:
                source_values[setting.name] = setting.parse(env.get(setting.env))
            debounce, max_wait = source.window_settings()
            windows[source.source_type] = SourceWindow(
                debounce.parse(env.get(debounce.env)), max_wait.parse(env.get(max_wait.env))
            )
            per_minute, burst = source.budget_settings()
            budgets[source.source_type] = ApiBudget(
                per_minute.parse(env.get(per_minute.env)), max(1.0, burst.parse(env.get(burst.env)))
            )
        return cls(**values, windows=windows, budgets=budgets, source_values=source_values)
