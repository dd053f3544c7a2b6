"""What the endpoints share, kept on ``request.app.state`` by the app factory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request

from debounce.config import Settings
from debounce.contract import WebhookParser
from debounce.documents.feed_listen import ChangeSignal
from debounce.infra.metrics import WebMetrics
from debounce.queue.batcher import EnqueueBatcher
from debounce.workspaces import Directory

__all__ = ["WebState", "web_state"]


@dataclass
class WebState:
    """The web process's services: ``settings``; ``parsers`` (the sources' webhook parsers
    by source type: the web builds no syncer); ``audience_sources`` (those whose documents
    carry per-user audiences, ``Source.audiences``: what ``visible_to`` may filter);
    ``metrics``; and, while the lifespan runs, the
    database ``pool`` (the primary), the ``replica`` pool (``DATABASE_REPLICA_URL``, ``None``
    when unset), the enqueue ``batcher``, the workspace ``directory`` and the change feed's
    ``signal``."""

    settings: Settings
    parsers: dict[str, WebhookParser]
    audience_sources: frozenset[str] = frozenset()
    metrics: WebMetrics = field(default_factory=WebMetrics)
    pool: AsyncConnectionPool[Any] | None = None
    replica: AsyncConnectionPool[Any] | None = None
    batcher: EnqueueBatcher | None = None
    directory: Directory | None = None
    #: The one LISTEN connection of the change feed's long-polls (made on first use).
    signal: ChangeSignal | None = None
    #: Set when the process shuts down (:meth:`stop_waiting`).
    stopping: bool = False

    @property
    def db(self) -> AsyncConnectionPool[Any]:
        """The open pool.

        Raises:
            RuntimeError: the app's lifespan has not started.
        """
        if self.pool is None:
            raise RuntimeError("the app's lifespan has not started")
        return self.pool

    @property
    def read_db(self) -> AsyncConnectionPool[Any]:
        """Where the read-only routes read: the replica when ``DATABASE_REPLICA_URL`` is set,
        else the primary.

        Raises:
            RuntimeError: the app's lifespan has not started.
        """
        return self.replica if self.replica is not None else self.db

    @property
    def primary_if_replica(self) -> AsyncConnectionPool[Any] | None:
        """The primary when reads go to a replica (the feed asks it whether a cursor the
        replica has not reached is lag or a restore), else ``None``."""
        return self.db if self.replica is not None else None

    def feed_signal(self) -> ChangeSignal:
        """The process's :class:`~debounce.documents.feed_listen.ChangeSignal` on :attr:`read_db`
        (made on first use, closed by the lifespan).

        Raises:
            RuntimeError: the app's lifespan has not started.
        """
        if self.signal is None:
            self.signal = ChangeSignal(self.read_db)
            if self.stopping:
                self.signal.stop()
        return self.signal

    def stop_waiting(self) -> None:
        """The process is shutting down: answer every follower waiting on the feed now, and
        every later one at once."""
        self.stopping = True
        if self.signal is not None:
            self.signal.stop()


def web_state(request: Request) -> WebState:
    """The :class:`WebState` of the app serving ``request``."""
    state: WebState = request.app.state.web
    return state
