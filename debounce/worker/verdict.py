"""What an exception out of a sync (or out of one backfill page) means: the
one mapping from what a source raised to what happens to its job (``worker/loop.py``) or its
backfill (``worker/backfiller.py``). The contract's errors (:mod:`debounce.contract.errors`)
say it, and a stored token this worker cannot decrypt (``CredentialsUnreadable``); anything else
is transient.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from debounce.contract import AuthRevoked, BudgetExhausted, LeaseLost, PermanentError, RateLimited
from debounce.workspaces import CredentialsUnreadable

__all__ = ["Verdict", "VerdictKind", "verdict"]


class VerdictKind(enum.StrEnum):
    """The kinds of outcome, as the worker's ``debounce_sync_seconds`` labels them."""

    #: The workspace's budget ran dry: hand the job back, keeping its place and what it fetched.
    BUDGET = "budget"
    #: The workspace's stored token does not decrypt here: the workspace is marked, the job
    #: waits (its attempt given back, its place kept) until a worker whose key decrypts it.
    CREDENTIALS = "credentials"
    #: The claim was lost mid-sync: nothing more was written; the job's holder syncs it.
    LEASE_LOST = "lease_lost"
    #: The source answered 429 (or overload): back at its ``Retry-After``, no attempt spent.
    RATE_LIMITED = "rate_limited"
    #: The workspace's token no longer works: revoke the workspace, park its jobs.
    REVOKED = "revoked"
    #: Retrying cannot help: failed at once.
    PERMANENT = "permanent"
    #: Anything else: retried with backoff.
    RETRY = "retry"


@dataclass(frozen=True)
class Verdict:
    """What one exception means: its ``kind``, the ``error`` text kept with the job (or the
    backfill), and for a budget or a rate limit the seconds to wait (``retry_after``) and
    the source's ``reason``."""

    kind: VerdictKind
    error: str
    retry_after: float | None = None
    reason: str | None = None


def verdict(exc: BaseException) -> Verdict:
    """The :class:`Verdict` of ``exc`` raised by a sync or a backfill page."""
    if isinstance(exc, BudgetExhausted):
        return Verdict(VerdictKind.BUDGET, str(exc), exc.retry_after)
    if isinstance(exc, CredentialsUnreadable):
        return Verdict(VerdictKind.CREDENTIALS, f"credentials error: {exc.reason}")
    if isinstance(exc, LeaseLost):
        return Verdict(VerdictKind.LEASE_LOST, str(exc))
    if isinstance(exc, RateLimited):
        return Verdict(VerdictKind.RATE_LIMITED, str(exc), exc.retry_after, exc.reason)
    if isinstance(exc, AuthRevoked):
        return Verdict(VerdictKind.REVOKED, f"AuthRevoked: {exc}")
    if isinstance(exc, PermanentError):
        return Verdict(VerdictKind.PERMANENT, f"PermanentError: {exc}")
    return Verdict(VerdictKind.RETRY, f"{exc.__class__.__name__}: {exc}")
