"""Prometheus metrics of the web process (``GET /metrics``), via ``prometheus-client``.

Each app gets its own ``CollectorRegistry`` so several apps (tests, ``debounce serve``) can
live in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["WebMetrics"]


class WebMetrics:
    """The web process's metrics.

    - ``debounce_webhooks_total{source, outcome}``: deliveries by outcome (``created``,
      ``debounced``, ``duplicate``, ``requeued_after_running``, ``ignored``, ``handshake``, or
      the error: ``invalid_signature``, ``malformed_body``, ``payload_too_large``,
      ``database_unavailable``, …);
    - ``debounce_webhook_warnings_total{source}``: deliveries the operator should hear about
      (a source saying it dropped events, for instance);
    - ``debounce_enqueue_seconds``: time to debounce one delivery's events (seconds);
    - ``debounce_jobs{source, state}`` and ``debounce_oldest_due_age_seconds``: queue depth
      and lag, read from the database at scrape time.
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
        self.enqueue_seconds = Histogram(
            "debounce_enqueue_seconds",
            "Seconds to debounce one delivery's events into the queue (one statement).",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.jobs = Gauge(
            "debounce_jobs",
            "Jobs in sync_jobs by source and state (read at scrape time).",
            ["source", "state"],
            registry=self.registry,
        )
        self.oldest_due_age = Gauge(
            "debounce_oldest_due_age_seconds",
            "Seconds the oldest due pending job has waited past its due time.",
            registry=self.registry,
        )
