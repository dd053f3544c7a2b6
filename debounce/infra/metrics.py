"""Prometheus metrics via ``prometheus-client``: the web process's (``GET /metrics``) and the
worker process's (``DEBOUNCE_METRICS_PORT``). No workspace or page id is a label (cardinality).

Each app gets its own ``CollectorRegistry`` so several apps (tests, ``debounce serve``) can
live in one process.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from debounce.contract.http import on_api_request

__all__ = ["WORKER", "WebMetrics", "WorkerMetrics", "count_api_request"]


class WebMetrics:
    """The web process's metrics.

    - ``debounce_webhooks_total{source, outcome}``: deliveries by outcome (``created``,
      ``debounced``, ``duplicate``, ``requeued_after_running``, ``workspace_removed``,
      ``ignored``, ``handshake``, or
      the error: ``invalid_signature``, ``malformed_body``, ``payload_too_large``,
      ``database_unavailable``, …);
    - ``debounce_webhook_warnings_total{source}``: deliveries the operator should hear about
      (a source saying it dropped events, for instance);
    - ``debounce_enqueue_seconds``: time to debounce one delivery's events (seconds);
    - ``debounce_jobs{source, state}`` and ``debounce_oldest_due_age_seconds``: queue depth
      and lag, read from the database at scrape time;
    - ``debounce_workers_alive`` and ``debounce_last_claim_age_seconds``: the worker processes
      whose heartbeat is recent, and how long ago any of them last claimed a job (read at
      scrape time; docs/deploying.md, "Alerts");
    - ``debounce_feed_lag_seconds``: how far the change feed's servable head lags the newest
      written change (the age of the oldest change committed but held back by an older open
      transaction; 0 when none), read at scrape time from the server the feed is read from;
    - ``debounce_replica_lag_seconds``: the replay lag of ``DATABASE_REPLICA_URL`` (0 when it
      has replayed all it received, and when no replica is set), read at scrape time;
    - ``debounce_feed_waiting_followers``: long-polls of the change feed waiting in this
      process right now.
    - ``debounce_workspace_sync_requests{source, workspace, lane}``,
      ``debounce_workspace_synced_pages{source, workspace, lane}`` and their ratio
      ``debounce_workspace_requests_per_page{source, workspace, lane}``: what syncs cost per
      workspace (``workspace``: its numeric id; ``lane``: ``live`` or ``bulk``), read from
      ``workspace_sync_costs`` at scrape time (``debounce.workspaces.sync_costs``). The one exception to
      "no workspace id is a label": workspaces are few (connected ones, not pages) and the
      budget this shows is per workspace.
    - ``debounce_subscription_lag_changes{subscription}`` and
      ``debounce_subscription_lag_seconds{subscription}``: the changes waiting for each push
      subscription (counted up to its limit, ``debounce.delivery.subscriptions``) and the age
      of the oldest, seconds; ``debounce_subscription_failed_attempts{subscription}``: the
      failed attempts of the batch in flight (0: the last one was answered 2xx);
      ``debounce_subscription_disabled{subscription}``: 1 when disabled (410, or failing for
      too long; the dashboard and ``debounce subscriptions list`` say why), else 0;
      ``debounce_subscription_delivered_changes{subscription}``: changes delivered since it was
      created. Read at scrape time; ``subscription`` is its numeric id (subscriptions are few,
      as workspaces are).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.webhooks = Counter(
            "debounce_webhooks",
            "Webhook deliveries received, by source and outcome.",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.warnings = Counter(
            "debounce_webhook_warnings",
            "Deliveries that carry a warning for the operator (e.g. the source dropped events).",
            ["source"],
            registry=self.registry,
        )
        #: ``webhooks``' children by (source, outcome), so counting one costs a dict lookup.
        self._webhook_children: dict[tuple[str, str], Any] = {}
        self.enqueue_seconds = Histogram(
            "debounce_enqueue_seconds",
            "Seconds to debounce one delivery's events into the queue (one statement).",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.jobs = Gauge(
            "debounce_jobs",
            "Jobs by source and state, active (sync_jobs) and finished (finished_jobs), read at scrape time.",
            ["source", "state"],
            registry=self.registry,
        )
        self.oldest_due_age = Gauge(
            "debounce_oldest_due_age_seconds",
            "Seconds the oldest due pending job has waited past its due time.",
            registry=self.registry,
        )
        self.workers_alive = Gauge(
            "debounce_workers_alive",
            "Worker processes whose heartbeat was seen within the last 15 s (read at scrape time).",
            registry=self.registry,
        )
        self.last_claim_age = Gauge(
            "debounce_last_claim_age_seconds",
            "Seconds since any worker last claimed a job (NaN: none has); with "
            "debounce_oldest_due_age_seconds, says that due jobs wait and nobody claims.",
            registry=self.registry,
        )
        self.feed_lag = Gauge(
            "debounce_feed_lag_seconds",
            "Seconds the change feed's servable head lags the newest written change "
            "(held back by open transactions).",
            registry=self.registry,
        )
        self.replica_lag = Gauge(
            "debounce_replica_lag_seconds",
            "Seconds the read replica (DATABASE_REPLICA_URL) lags the primary's commits "
            "(0 when it has replayed all it received, or no replica is set).",
            registry=self.registry,
        )
        self.feed_waiting = Gauge(
            "debounce_feed_waiting_followers",
            "Long-polls of the change feed waiting in this process.",
            registry=self.registry,
        )

        self.sync_requests = Gauge(
            "debounce_workspace_sync_requests",
            "Requests page syncs sent, per workspace and lane (live, bulk; read at scrape time).",
            ["source", "workspace", "lane"],
            registry=self.registry,
        )
        self.synced_pages = Gauge(
            "debounce_workspace_synced_pages",
            "Pages synced, per workspace and lane (read at scrape time).",
            ["source", "workspace", "lane"],
            registry=self.registry,
        )
        self.requests_per_page = Gauge(
            "debounce_workspace_requests_per_page",
            "Requests sent per page synced, per workspace and lane (read at scrape time).",
            ["source", "workspace", "lane"],
            registry=self.registry,
        )
        self.subscription_lag_changes = Gauge(
            "debounce_subscription_lag_changes",
            "Changes waiting for each push subscription (read at scrape time).",
            ["subscription"],
            registry=self.registry,
        )
        self.subscription_lag_seconds = Gauge(
            "debounce_subscription_lag_seconds",
            "Age of the oldest change waiting for each push subscription, seconds.",
            ["subscription"],
            registry=self.registry,
        )
        self.subscription_failed_attempts = Gauge(
            "debounce_subscription_failed_attempts",
            "Failed attempts of each push subscription's batch in flight (0: last one 2xx).",
            ["subscription"],
            registry=self.registry,
        )
        self.subscription_disabled = Gauge(
            "debounce_subscription_disabled",
            "1 when the push subscription is disabled, else 0.",
            ["subscription"],
            registry=self.registry,
        )
        self.subscription_delivered = Gauge(
            "debounce_subscription_delivered_changes",
            "Changes delivered to each push subscription since it was created.",
            ["subscription"],
            registry=self.registry,
        )

    def count_webhook(self, source: str, outcome: str, n: int = 1) -> None:
        """Add ``n`` to ``debounce_webhooks_total{source, outcome}``."""
        child = self._webhook_children.get((source, outcome))
        if child is None:
            child = self._webhook_children[(source, outcome)] = self.webhooks.labels(source, outcome)
        child.inc(n)


class WorkerMetrics:
    """The worker process's metrics (served on ``DEBOUNCE_METRICS_PORT`` when set):

    - ``debounce_sync_seconds{source, outcome}``: duration of each sync (seconds) by outcome
      (``completed``, ``retry``, ``rate_limited``, ``permanent``, ``lease_lost``);
    - ``debounce_api_requests_total{source, status}``: requests sent to a source's API, by
      HTTP status (``error`` when no answer came);
    - ``debounce_api_rate_limited_total{source}``: of which answered 429;
    - ``debounce_rate_limits_total{source, reason}``: rate limits that reached the queue (the
      job rescheduled, its workspace blocked for every worker), by the source's reason;
    - ``debounce_budget_yields_total{source}``: syncs that handed their slot back because their
      workspace's API budget ran dry mid-way (resumed later from their checkpoint);
    - ``debounce_jobs_claimed_total{source}``; ``debounce_lease_renewals_total``;
    - ``debounce_sync_lag_seconds{source}``: end-to-end lag of a completed sync, from the first
      event of the burst it synced (accepted by the web) to the document written (seconds).

    One instance per process (:data:`WORKER`); several workers in one process share it.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.sync_seconds = Histogram(
            "debounce_sync_seconds",
            "Duration of each sync, by source and outcome (seconds).",
            ["source", "outcome"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
        )
        self.api_requests = Counter(
            "debounce_api_requests",
            "Requests sent to a source's API, by HTTP status.",
            ["source", "status"],
            registry=self.registry,
        )
        self.api_rate_limited = Counter(
            "debounce_api_rate_limited",
            "Requests a source's API answered with 429.",
            ["source"],
            registry=self.registry,
        )
        self.rate_limits = Counter(
            "debounce_rate_limits",
            "Rate limits (429, 529) that blocked a workspace, by reason.",
            ["source", "reason"],
            registry=self.registry,
        )
        self.budget_yields = Counter(
            "debounce_budget_yields",
            "Syncs that yielded their slot to the workspace's budget.",
            ["source"],
            registry=self.registry,
        )
        self.jobs_claimed = Counter(
            "debounce_jobs_claimed",
            "Jobs claimed by this process, by source.",
            ["source"],
            registry=self.registry,
        )
        self.lease_renewals = Counter(
            "debounce_lease_renewals", "Leases of running syncs extended.", registry=self.registry
        )
        self.sync_lag = Histogram(
            "debounce_sync_lag_seconds",
            "First accepted event of a burst to its document written (seconds).",
            ["source"],
            registry=self.registry,
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200),
        )


#: The process's worker metrics.
WORKER = WorkerMetrics()


def count_api_request(source: str, status: int | str) -> None:
    """Count one request sent to ``source``'s API and its HTTP ``status`` (``"error"`` when
    none came back). The syncers call this at the one place each sends requests."""
    WORKER.api_requests.labels(source, str(status)).inc()
    if status == 429:
        WORKER.api_rate_limited.labels(source).inc()


on_api_request(count_api_request)
