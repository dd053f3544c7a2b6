"""The debounced job queue on Postgres: every statement on ``sync_jobs``.

Modules: :mod:`.checks` (what is accepted), :mod:`.lifecycle` (a job's life: enqueue, claim,
leases, outcomes), :mod:`.operations` (re-sync, retry, inspection, prune), :mod:`.wakeups`
(idle workers notified after an enqueue committed). Callers use this
package's names: ``from debounce import queue; await queue.enqueue(...)``.

Functions take ``db`` (an ``AsyncConnection`` in autocommit mode, or an
``AsyncConnectionPool``) and run one statement from ``sql/queries/queue.sql`` each: one round trip,
one transaction. Semantics (docs/design.md, "Job states"):

- one *active* (``pending``/``processing``) job per ``(source_type, source_page_id)``, enforced
  by the partial unique index ``sync_jobs_active_page``;
- an event pushes its page's pending job to ``now + debounce_seconds``, never past
  ``first_event_at + max_wait_seconds``; the job keeps the latest payload and counts events;
- an event for a ``processing`` job bumps its ``revision``; :func:`settle` then turns
  the row back to ``pending`` (a follow-up sync) instead of ``completed``, so no edit is lost
  however the event interleaves with :func:`claim` and :func:`settle`
  (row locks serialise them; the follow-up is decided inside the completing UPDATE, on the
  latest row version);
- an event id already seen for its source changes nothing (idempotency, ``seen_events``).

Every function accepts ``now`` (timezone-aware datetime, default: the database's ``now()``) so
tests control time without sleeping. Durations are seconds (float).
"""

from debounce.infra.retry import DEFAULT_BACKOFF_SECONDS, backoff_delay
from debounce.queue.checks import (
    MAX_BIGINT,
    MAX_ERROR_CHARS,
    MAX_KEY_BYTES,
    MAX_PAYLOAD_DEPTH,
    NOTIFY_CHANNEL,
    RESYNC_PRIORITY,
    check_payload,
    payload_text,
    unstorable,
    validate_event,
)
from debounce.queue.lifecycle import (
    Failure,
    claim,
    enqueue,
    release,
    repair_lines,
    requeue_expired,
    settle,
)
from debounce.queue.operations import (
    JOB_PARTITIONS_PER_RETENTION,
    PRUNE_LOCK_ID,
    JobConflict,
    JobNotFound,
    JobPage,
    cancel_removed,
    get,
    list_jobs,
    prune,
    resync,
    retry,
    seconds_until_due,
    stats,
)
from debounce.queue.wakeups import wake

__all__ = [
    "DEFAULT_BACKOFF_SECONDS",
    "MAX_BIGINT",
    "MAX_ERROR_CHARS",
    "MAX_KEY_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "NOTIFY_CHANNEL",
    "JOB_PARTITIONS_PER_RETENTION",
    "PRUNE_LOCK_ID",
    "RESYNC_PRIORITY",
    "Failure",
    "JobConflict",
    "JobNotFound",
    "JobPage",
    "backoff_delay",
    "check_payload",
    "claim",
    "enqueue",
    "get",
    "list_jobs",
    "payload_text",
    "prune",
    "repair_lines",
    "release",
    "requeue_expired",
    "resync",
    "retry",
    "cancel_removed",
    "seconds_until_due",
    "settle",
    "stats",
    "unstorable",
    "validate_event",
    "wake",
]
