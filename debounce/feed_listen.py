"""One ``LISTEN`` connection per process that wakes every follower of the change feed.

The triggers of migration 013 notify :data:`debounce.feed.NOTIFY_CHANNEL` once per transaction
that wrote a change. :class:`ChangeSignal` holds the one listening connection of a process (the
web's long-polls, the CLI's ``--follow``) and counts notifications in :attr:`generation`; a
follower notes the generation before it reads, and when the read came back empty waits for a
newer one (:meth:`ChangeSignal.wait`). A (re)connection counts as a notification, since any
sent while disconnected are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg

from debounce.db import Db
from debounce.feed import NOTIFY_CHANNEL, Cursor, FeedPage, follow, read_changes
from debounce.retry import Backoff

__all__ = ["FOLLOW_SECONDS", "PENDING_RECHECK_SECONDS", "ChangeSignal", "read_waiting"]

#: How long one request of a waiting follower keeps the writers notifying (seconds); renewed
#: by the waiters when half of it is gone.
FOLLOW_SECONDS = 60.0

log = logging.getLogger("debounce.feed")


class ChangeSignal:
    """Notifications of the change feed on ``conninfo``, shared by every waiter. The
    listening task starts on the first :meth:`mark` and ends with :meth:`close`."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.generation = 0
        #: Waiters parked in :meth:`wait` right now.
        self.waiting = 0
        #: Set once the connection listens (tests wait on it before writing).
        self.listening = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._following_until = 0.0

    def mark(self) -> int:
        """The current generation (note it before reading the feed); starts listening."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="feed-listen")
        return self.generation

    async def wait(self, since: int, seconds: float) -> bool:
        """Wait up to ``seconds`` for a notification newer than generation ``since``
        (returns at once if one came already); ``True`` if one came."""
        self.mark()
        if self.generation > since:
            return True
        changed = self._changed
        self.waiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(seconds, 0.0)):
                    await changed.wait()
        finally:
            self.waiting -= 1
        return self.generation > since

    async def follow(self, db: Db) -> bool:
        """Keep the writers notifying while this process has waiters (``feed.follow``, at
        most once per half of :data:`FOLLOW_SECONDS`). ``True`` when the request may have
        lapsed before: a writer that began before it may commit without notifying, so the
        first wait should be short."""
        now = asyncio.get_running_loop().time()
        if now < self._following_until - FOLLOW_SECONDS / 2:
            return False
        lapsed = now >= self._following_until
        await follow(db, FOLLOW_SECONDS)
        self._following_until = now + FOLLOW_SECONDS
        return lapsed

    def _bump(self) -> None:
        self.generation += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def _listen(self) -> None:
        backoff = Backoff()
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo,
                                                                 autocommit=True) as conn:
                    await conn.execute(f"listen {NOTIFY_CHANNEL}")  # a constant name
                    backoff.reset()
                    self.listening.set()
                    self._bump()
                    async for _ in conn.notifies():
                        self._bump()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                delay = backoff.next()
                log.warning("change feed: LISTEN connection lost (%s), again in %.1f s",
                            exc.__class__.__name__, delay)
                await asyncio.sleep(delay)

    async def close(self) -> None:
        """Stop listening (waiters then time out)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.listening.clear()


#: Seconds between re-reads while committed changes wait behind an open transaction (its end
#: sends no notification).
PENDING_RECHECK_SECONDS = 1.0


async def read_waiting(
    db: Db,
    signal: ChangeSignal,
    after: Cursor | None,
    limit: int,
    wait: float,
    *,
    source_type: str | None = None,
    workspace_id: int | None = None,
) -> FeedPage:
    """:func:`~debounce.feed.read_changes`, waiting up to ``wait`` seconds for a change when
    there is none yet: woken by ``signal`` (writers notify while a follower asked them to:
    :meth:`ChangeSignal.follow`), and every :data:`PENDING_RECHECK_SECONDS` while changes wait
    behind an open transaction or just after the request to notify. Answers the last (empty)
    page at the deadline.

    Raises:
        ValueError, CursorGone: as :func:`~debounce.feed.read_changes`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(wait, 0.0)
    while True:
        since = signal.mark()
        lapsed = await signal.follow(db) if wait > 0 else False
        page = await read_changes(db, after, limit, source_type=source_type,
                                  workspace_id=workspace_id)
        remaining = deadline - loop.time()
        if page.changes or remaining <= 0:
            return page
        after = page.next
        if page.at_head:
            await signal.wait(since, min(remaining, PENDING_RECHECK_SECONDS)
                              if page.pending or lapsed else remaining)
