"""Settings read from the environment (12-factor).

Every name and default here is the table in ``docs/design.md`` (copied from the shared
DESIGN.md). :meth:`Settings.from_env` is the only place that reads ``os.environ``; the rest
of the service receives a :class:`Settings` value, which keeps tests free to build their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Settings", "SourceWindow"]


@dataclass(frozen=True)
class SourceWindow:
    """Debounce window and max wait of one source, both in seconds (>= 0)."""

    debounce_seconds: float
    max_wait_seconds: float


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {raw!r}")
    return value


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    value = _float(env, name, default)
    if value <= 0:
        raise ValueError(f"{name} must be > 0 seconds, got {env.get(name)!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {raw!r}")
    return value


def _str(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name)
    return raw if raw else None


@dataclass(frozen=True)
class Settings:
    """The service's configuration.

    Times are seconds. ``None`` means "unset" for the optional secrets and tokens; a source
    whose signing secret is unset refuses its webhooks with 503 (see ``integrations``).
    """

    database_url: str | None = None
    port: int = 8000
    data_dir: str = ".debounce"

    notion_token: str | None = None
    notion_base_url: str = "https://api.notion.com"
    notion_webhook_secret: str | None = None

    slack_bot_token: str | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_signing_secret: str | None = None
    #: How far back (seconds) each Slack sync re-reads history before its watermark, so recent
    #: edits and deletions are seen.
    slack_lookback_seconds: float = 3600.0
    #: Our own Slack bot user id (``U…``) or bot id (``B…``); messages it posts are not synced.
    slack_bot_user_id: str | None = None

    windows: Mapping[str, SourceWindow] = field(
        default_factory=lambda: {
            "notion": SourceWindow(300.0, 3600.0),
            "slack": SourceWindow(30.0, 300.0),
        }
    )

    admin_token: str | None = None
    worker_concurrency: int = 8
    #: Syncs in flight per source per worker process (so one source cannot starve another).
    worker_source_concurrency: int | None = None
    lease_seconds: float = 60.0
    max_attempts: int = 5
    #: Transient-failure backoff schedule in seconds; the last value repeats.
    backoff_seconds: tuple[float, ...] = (30.0, 120.0, 480.0, 1800.0, 7200.0)
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
    #: (seconds; well under Slack's 3 s, so a slow database never counts as a failed delivery).
    #: Also the web's ``statement_timeout``: a statement past it is cancelled and rolled back.
    webhook_deadline_seconds: float = 2.0
    pool_max_size: int = 10
    #: How long ``seen_events`` remembers an event id (idempotency), in seconds.
    event_retention_seconds: float = 3 * 86400.0
    #: How long finished (completed/failed) jobs are kept before ``prune``, in seconds.
    job_retention_seconds: float = 7 * 86400.0

    def window(self, source_type: str) -> SourceWindow:
        """Debounce window of ``source_type``; unknown sources get Slack-like 30 s / 300 s."""
        return self.windows.get(source_type, SourceWindow(30.0, 300.0))

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
        log_format = env.get("DEBOUNCE_LOG_FORMAT", "text").strip().lower() or "text"
        if log_format not in ("text", "json"):
            raise ValueError(f"DEBOUNCE_LOG_FORMAT must be 'text' or 'json', got {log_format!r}")
        backoff_raw = env.get("DEBOUNCE_BACKOFF_SECONDS")
        backoff = cls.backoff_seconds
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
        return cls(
            database_url=_str(env, "DATABASE_URL"),
            port=_int(env, "PORT", 8000),
            data_dir=env.get("DEBOUNCE_DATA_DIR") or ".debounce",
            notion_token=_str(env, "NOTION_TOKEN"),
            notion_base_url=env.get("NOTION_BASE_URL") or "https://api.notion.com",
            notion_webhook_secret=_str(env, "NOTION_WEBHOOK_SECRET"),
            slack_bot_token=_str(env, "SLACK_BOT_TOKEN"),
            slack_api_url=env.get("SLACK_API_URL") or "https://slack.com/api/",
            slack_signing_secret=_str(env, "SLACK_SIGNING_SECRET"),
            slack_bot_user_id=_str(env, "SLACK_BOT_USER_ID"),
            slack_lookback_seconds=_float(env, "SLACK_LOOKBACK_SECONDS", 3600.0),
            windows={
                "notion": SourceWindow(
                    _float(env, "NOTION_DEBOUNCE_SECONDS", 300.0),
                    _float(env, "NOTION_MAX_WAIT_SECONDS", 3600.0),
                ),
                "slack": SourceWindow(
                    _float(env, "SLACK_DEBOUNCE_SECONDS", 30.0),
                    _float(env, "SLACK_MAX_WAIT_SECONDS", 300.0),
                ),
            },
            admin_token=_str(env, "DEBOUNCE_ADMIN_TOKEN"),
            worker_concurrency=_int(env, "DEBOUNCE_WORKER_CONCURRENCY", 8),
            worker_source_concurrency=(
                _int(env, "DEBOUNCE_WORKER_SOURCE_CONCURRENCY", 1)
                if source_concurrency_raw
                else None
            ),
            lease_seconds=_float(env, "DEBOUNCE_LEASE_SECONDS", 60.0),
            max_attempts=_int(env, "DEBOUNCE_MAX_ATTEMPTS", 5),
            backoff_seconds=backoff,
            max_body_bytes=_int(env, "DEBOUNCE_MAX_BODY_BYTES", 1_048_576),
            log_format=log_format,
            log_level=(env.get("DEBOUNCE_LOG_LEVEL") or "INFO").upper(),
            shutdown_grace_seconds=_float(env, "DEBOUNCE_SHUTDOWN_GRACE_SECONDS", 25.0),
            poll_interval_seconds=_float(env, "DEBOUNCE_POLL_INTERVAL_SECONDS", 2.0),
            pool_timeout_seconds=_float(env, "DEBOUNCE_POOL_TIMEOUT_SECONDS", 3.0),
            webhook_deadline_seconds=_positive(env, "DEBOUNCE_WEBHOOK_DEADLINE_SECONDS", 2.0),
            pool_max_size=_int(env, "DEBOUNCE_POOL_MAX_SIZE", 10),
        )
