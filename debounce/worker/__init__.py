"""The worker: claims due jobs and runs their syncer's ``sync``.

One asyncio process (``debounce worker``, the Procfile's ``worker``) that

- claims due jobs (``queue.claim``, ``FOR UPDATE SKIP LOCKED``) and runs up to
  ``DEBOUNCE_WORKER_CONCURRENCY`` syncs at once, at most ``worker_source_concurrency`` of one
  source (default: three quarters of the slots), and none of a source that just answered 429
  until its ``Retry-After`` passed — one source's backlog or rate limit cannot starve another;
- sleeps until the earliest pending ``scheduled_at`` (bounded by ``poll_interval_seconds``) and
  wakes at once on ``LISTEN debounce_jobs`` (jobs that become due *now*: manual re-syncs,
  retries due now, released jobs; and, sent by the web after its batch committed, jobs due
  within the poll interval) and whenever a slot frees;
- extends the lease of every running sync every ``lease_seconds / 3`` and periodically returns
  expired leases of dead workers (``queue.requeue_expired``);
- maps what ``sync`` raises: ``RateLimited`` → rescheduled at ``Retry-After`` without spending an
  attempt; ``PermanentError`` → failed at once; anything else → retried with backoff, the
  exception's type and message in ``last_error``;
- on SIGTERM/SIGINT stops claiming, lets running syncs finish within
  ``shutdown_grace_seconds`` (25 s, inside Heroku's 30 s), releases the rest untouched and
  returns;
- survives the database going away: logs, backs off, and goes on once the pool reconnects.

Several worker processes against one database are safe: that is how it scales out.

Modules: :mod:`.loop` (the :class:`Worker`: claim loop, running syncs, shutdown),
:mod:`.ahead` (the local queue: jobs claimed ahead of a free slot),
:mod:`.completions` (the flush buffer: outcomes and lease renewals, one statement a flush),
:mod:`.outcomes` (the words of its log lines), :mod:`.notifier`
(``LISTEN``), :mod:`.maintenance` (lease keeper, expired-lease reaper, the wait for the schema,
the shutdown's drain),
:mod:`.errors` (how a loop reports a database error),
:mod:`.checkpoints` (a yielded sync's checkpoint across claims), :mod:`.verdict` (the one mapping from
what a sync or a backfill page raised to what happens to its job), :mod:`.failures` (acts on
it for a failed sync), :mod:`.heartbeat` (this
worker's row in ``workers``: alive, when it last claimed), :mod:`.backfiller` (backfills and
reconciliations, one worker at a time per workspace); the workspaces' side, one concern
each: :mod:`.decrypter` (a sync's credentials), :mod:`.key_check` (this worker's key against
the stored tokens: the ``credentials_error`` marks), :mod:`.workspace_state` (a 429 blocks a
workspace, a revoked token revokes it), :mod:`.env_workspaces` (the environment's workspaces:
created at start, their ids learned).
"""

from debounce.worker.loop import Worker, default_worker_id

__all__ = ["Worker", "default_worker_id"]
