"""The worker's side of the environment's workspaces (``debounce.workspaces.environment``):
their rows exist before the first claim (:func:`ensure`), and the source's id of each is
learned after its first sync (:class:`Learner`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from debounce import registry, workspaces
from debounce.config import Settings
from debounce.contract import BudgetExhausted, Meter
from debounce.types import ClaimedWorkspace

__all__ = ["Learner", "ensure"]

log = logging.getLogger("debounce.worker")


async def ensure(pool: AsyncConnectionPool[Any], settings: Settings) -> None:
    """Create (or keep current) the environment's workspace of each source whose token
    ``settings`` sets.

    Raises:
        Exception: the database's error (the worker's start retries it).
    """
    for source_type, token in workspaces.env_tokens(settings).items():
        await workspaces.ensure_env_workspace(pool, source_type, token)


class Learner:
    """Learns the source's id of the environment's workspaces, once per workspace in this
    process (``settings``: the source's token and configuration; ``pool``: where the id is
    recorded; ``meter_for(workspace id, source type)``: a fresh meter of the workspace's
    budget, for a question asked later because the budget was spent)."""

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[Any],
        meter_for: Callable[[int, str], Meter | None] | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.meter_for = meter_for
        self._learned: set[int] = set()
        self._later: dict[int, asyncio.Task[None]] = {}

    async def close(self) -> None:
        """Cancel the questions waiting for a budget (the worker stops)."""
        tasks = list(self._later.values())
        self._later.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _ask_later(self, workspace: ClaimedWorkspace, source_type: str, seconds: float) -> None:
        """Ask again once the budget holds a request (``seconds``), with a meter of its own:
        a sync's meter ends with its sync, and the workspace may have no sync left to come
        (the demo's Slack workspace spends its small budget on its few syncs)."""
        if self.meter_for is None or workspace.id in self._later:
            return

        async def later() -> None:
            await asyncio.sleep(seconds + 0.01)
            self._later.pop(workspace.id, None)
            assert self.meter_for is not None
            await self.learn(workspace, source_type, self.meter_for(workspace.id, source_type))

        self._later[workspace.id] = asyncio.create_task(later(), name=f"learn-{workspace.id}")

    async def learn(self, workspace: ClaimedWorkspace, source_type: str, meter: Meter | None) -> None:
        """After a sync of ``workspace`` (of ``source_type``), when it is the environment's
        and its id is not known yet (:attr:`ClaimedWorkspace.unlearned`): ask the source who
        the token is (``users.me``, ``auth.test``) and record it. Best effort, never raises.
        The request is charged to ``meter`` (the sync's: the workspace's budget) first; with
        none left, it is asked after a later sync or once the budget refills, whichever comes
        first."""
        if not workspace.unlearned or workspace.id in self._learned:
            return
        self._learned.add(workspace.id)
        source = registry.sources().get(source_type)
        token = source.token(self.settings) if source else None
        if source is None or source.identify is None or not token:
            return
        try:
            if meter is not None:
                await meter.take()
            identity = await source.identify(source.configure(self.settings), str(token))
        except BudgetExhausted as spent:
            self._learned.discard(workspace.id)  # after a later sync, or once it refills
            self._ask_later(workspace, source_type, spent.retry_after)
            return
        except Exception as exc:
            log.warning(
                "could not learn the id of the environment's %s workspace (%s)",
                source_type,
                exc.__class__.__name__,
            )
            return
        if identity.external_id:
            await workspaces.learn_external_id(
                self.pool, workspace.id, identity.external_id, identity.name, identity.bot_user_id
            )
            log.info(
                "the environment's %s workspace is %s (%s)", source_type, identity.external_id, identity.name
            )
