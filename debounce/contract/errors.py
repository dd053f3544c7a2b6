"""The errors of the contract: what a webhook parser, a sync, a backfill page and an install flow
raise to steer the service (:mod:`debounce.contract`)."""

from __future__ import annotations

__all__ = [
    "AuthRevoked",
    "BudgetExhausted",
    "InstallError",
    "LeaseLost",
    "PermanentError",
    "RateLimited",
    "ScopeMissing",
    "SyncError",
    "WebhookError",
]


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

    def __init__(self, retry_after: float, message: str = "rate limited", reason: str | None = None) -> None:
        super().__init__(f"{message} (retry after {retry_after:g} s)")
        self.retry_after = max(0.0, float(retry_after))
        self.reason = reason or "rate_limited"


class PermanentError(SyncError):
    """Retrying cannot help (no access, a malformed request): the job fails at once."""


class AuthRevoked(PermanentError):
    """The workspace's token no longer works (Notion 401 ``unauthorized``; Slack
    ``invalid_auth``, ``token_revoked``, ``account_inactive``): the worker marks the workspace
    ``revoked`` and parks its jobs until it is re-installed."""


class ScopeMissing(PermanentError):
    """The workspace's token lacks ``scope`` (Slack ``missing_scope``: ``canvases:read``,
    ``files:read``): this job fails at once, and the worker records the scope on the workspace
    (``workspaces.missing_scopes``, shown by the dashboard and ``debounce workspaces list``)
    until a re-install stores new credentials. The workspace's other jobs go on."""

    def __init__(self, scope: str, message: str) -> None:
        super().__init__(message)
        self.scope = scope


class BudgetExhausted(SyncError):
    """The workspace's budget has no request left for this sync: hand the job back, due in
    ``retry_after`` seconds (when the bucket will hold one again). Not a 429: nothing was sent
    and no other worker needs telling (their claims skip an empty bucket)."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"API budget exhausted (a request is available in {retry_after:.2f} s)")
        self.retry_after = max(0.0, float(retry_after))


class InstallError(Exception):
    """An install flow failed (the source refused the code, the user denied access): ``reason``
    is shown on the failure page; nothing was stored."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LeaseLost(RuntimeError):
    """The claim this sync runs under no longer holds its job (the lease expired and the job
    was requeued or re-claimed): nothing was written. The sync must stop; the job's current
    holder writes the page."""
