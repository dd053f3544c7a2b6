"""The edit stream of the freshness benchmark and its webhooks.

A :class:`Plan` per workspace says how it is edited: ``steady`` pages each edited every
``period`` seconds (phases spread), and a ``burst`` every ``burst_every`` seconds on a random
other page (``burst_edits`` edits ``burst_gap`` seconds apart, inside the debounce window).
:func:`schedule` turns the plans into one time-ordered list (seeded: every run of a mode
edits the same pages at the same offsets). :class:`Poster` carries each edit out — the
stand-in page first, then its signed webhook to the web process — and records the
acceptance time of each 2xx (epoch seconds on this machine's clock, which is Postgres's).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp

from bench.freshness_figures import Edit
from bench.freshness_world import NOTION_SECRET, SLACK_SECRET, Space, World
from debounce.cli import sign_request

__all__ = ["Plan", "Poster", "schedule"]


@dataclass(frozen=True)
class Plan:
    """How one workspace is edited during a run (module docstring)."""

    steady: int = 0
    period: float = 6.0
    burst_every: float = 0.0
    burst_edits: int = 4
    burst_gap: float = 0.3
    start: float = 0.0

    def edits_per_second(self) -> float:
        """Syncs this plan asks for per second (a burst is one)."""
        return self.steady / self.period + (1 / self.burst_every if self.burst_every else 0.0)


def schedule(
    plans: dict[str, Plan], spaces: dict[str, Space], seconds: float, seed: int = 12
) -> list[tuple[float, str]]:
    """``(offset seconds, page)`` of every edit, in time order."""
    rng = random.Random(seed)
    out: list[tuple[float, str]] = []
    for key, plan in plans.items():
        pages = spaces[key].pages
        steady, others = pages[: plan.steady], pages[plan.steady :] or pages
        for i, page in enumerate(steady):
            t = plan.start + plan.period * i / max(1, len(steady))
            while t < seconds:
                out.append((t, page))
                t += plan.period
        if plan.burst_every:
            t = plan.start + rng.uniform(0, plan.burst_every)
            while t < seconds:
                page = rng.choice(others)
                out += [
                    (t + k * plan.burst_gap, page)
                    for k in range(plan.burst_edits)
                    if t + k * plan.burst_gap < seconds
                ]
                t += plan.burst_every
    out.sort()
    return out


class Poster:
    """Makes edits and posts their webhooks to ``web_url`` (at most ``concurrency`` in
    flight); ``edits`` collects the accepted ones, ``statuses`` every answer."""

    def __init__(self, world: World, web_url: str, concurrency: int = 16) -> None:
        self.world = world
        self.web_url = web_url
        self.edits: list[Edit] = []
        self.statuses: Counter[str] = Counter()
        self._sem = asyncio.Semaphore(concurrency)
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Poster:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64), timeout=aiohttp.ClientTimeout(total=10)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.settle()
        if self._session is not None:
            await self._session.close()

    async def settle(self) -> None:
        """Wait for every webhook in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _post(self, page: str, rev: int) -> None:
        assert self._session is not None
        source, body = self.world.webhook(page)
        secret = NOTION_SECRET if source == "notion" else SLACK_SECRET
        headers = sign_request(source, body, secret)
        async with self._sem:
            try:
                async with self._session.post(
                    f"{self.web_url}/webhooks/{source}", data=body, headers=headers
                ) as resp:
                    await resp.read()
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.statuses[type(exc).__name__] += 1
                return
        self.statuses[str(status)] += 1
        if 200 <= status < 300:
            self.edits.append(Edit(page, rev, time.time()))

    def edit(self, page: str) -> None:
        """Edit ``page`` now and post its webhook in the background."""
        rev = self.world.edit(page)
        task = asyncio.create_task(self._post(page, rev))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def play(self, plan: Sequence[tuple[float, str]], started: float) -> None:
        """Carry out ``plan`` (offsets from ``started``, ``time.monotonic()``)."""
        for offset, page in plan:
            delay = started + offset - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.edit(page)

    async def flood(self, pages: Sequence[str], per_second: float) -> None:
        """An edit of each page, paced at ``per_second``."""
        started = time.monotonic()
        for i, page in enumerate(pages):
            delay = started + i / per_second - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(self._tasks) > 256:
                await asyncio.sleep(0.005)
            self.edit(page)
