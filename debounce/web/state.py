"""What the endpoints share, kept on ``request.app.state`` by the app factory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request

from debounce.batcher import EnqueueBatcher
from debounce.config import Settings
from debounce.contract import WebhookParser
from debounce.feed_listen import ChangeSignal
from debounce.metrics import WebMetrics
from debounce.workspaces import Directory

__all__ = ["WebState", "web_state"]


@dataclass
class WebState:
    """The web process's services: ``settings``; ``sources`` (the sources' webhook parsers
    by source type: the web builds no syncer); ``audience_sources`` (those whose documents
    carry per-user audiences, ``Source.audiences``: what ``visible_to`` may filter);
    ``metrics``; and, while the lifespan runs, the
    database ``pool``, the enqueue ``batcher``, the workspace ``directory`` and the change feed's
    ``signal``."""

    settings: Settings
    sources: dict[str, WebhookParser]
    audience_sources: frozenset[str] = frozenset()
    metrics: WebMetrics = field(default_factory=WebMetrics)
    pool: AsyncConnectionPool[Any] | None = None
    batcher: EnqueueBatcher | None = None
    directory: Directory | None = None
    #: The one LISTEN connection of the change feed's long-polls (made on first use).
    signal: ChangeSignal | None = None

    @property
    def db(self) -> AsyncConnectionPool[Any]:
        """The open pool.

        Raises:
            RuntimeError: the app's lifespan has not started.
        """
        if self.pool is None:
            raise RuntimeError("the app's lifespan has not started")
        return self.pool

    def feed_signal(self) -> ChangeSignal:
        """The process's :class:`~debounce.feed_listen.ChangeSignal` on the pool's database
        (made on first use, closed by the lifespan).

        Raises:
            RuntimeError: the app's lifespan has not started.
        """
        if self.signal is None:
            conninfo = self.db.conninfo
            assert isinstance(conninfo, str)
            self.signal = ChangeSignal(conninfo)
        return self.signal


def web_state(request: Request) -> WebState:
    """The :class:`WebState` of the app serving ``request``."""
    state: WebState = request.app.state.web
    return state
