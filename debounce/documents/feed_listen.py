"""One watcher per process that wakes every follower of the change feed.

Writers do not notify (migration 017: a ``NOTIFY`` inside the writing transaction takes a
global lock at commit, and a follower is always waiting). Instead :class:`ChangeSignal` polls
the feed's frontier (:func:`debounce.documents.feed.frontier`: the newest servable change, one backward
index step) every :data:`POLL_SECONDS` while at least one follower of the process waits, and
counts its moves in :attr:`ChangeSignal.generation`. A follower notes the generation before it
reads and, when the read came back empty, waits for a newer one (:meth:`ChangeSignal.wait`).
The cost is bounded per process, not per follower, and it is the same on a hot standby, where
``LISTEN`` does not work: the frontier moves there as the standby replays the primary's commits.
:meth:`ChangeSignal.stop` answers every waiter at once (a process shutting down).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from debounce.documents.feed import Cursor, FeedPage, frontier, read_changes
from debounce.infra.db import Db
from debounce.infra.retry import Backoff

__all__ = ["BEHIND_RECHECK_SECONDS", "POLL_SECONDS", "ChangeSignal", "read_waiting"]

#: Seconds between two polls of the frontier while followers wait (the added latency of a
#: change, at most; docs/benchmarks.md, feed_latency).
POLL_SECONDS = 0.02
#: Seconds between re-reads while the server has not replayed a follower's cursor yet (a
#: standby behind the server that gave the cursor) or the log awaits its epoch reset.
BEHIND_RECHECK_SECONDS = 0.25

log = logging.getLogger("debounce.feed")


class ChangeSignal:
    """The feed's frontier on ``db`` (the database the process reads the feed from: the
    primary or a replica), polled every ``poll_seconds`` while a waiter waits. The polling task
    starts on the first :meth:`mark` and ends with :meth:`close`."""

    def __init__(self, db: Db, poll_seconds: float = POLL_SECONDS) -> None:
        self.db = db
        self.poll_seconds = poll_seconds
        self.generation = 0
        #: Waiters parked in :meth:`wait` right now.
        self.waiting = 0
        #: Polls of the frontier so far (tests and metrics).
        self.polls = 0
        #: Set once the frontier has been read (tests wait on it before writing).
        self.listening = asyncio.Event()
        #: Set by :meth:`stop`: waits return at once, for good.
        self.stopping = False
        self._changed = asyncio.Event()
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._seen: str | None = None

    def mark(self) -> int:
        """The current generation (note it before reading the feed); starts the watcher."""
        if self._task is None and not self.stopping:
            self._task = asyncio.create_task(self._watch(), name="feed-watch")
        return self.generation

    async def wait(self, since: int, seconds: float) -> bool:
        """Wait up to ``seconds`` for the frontier to move past generation ``since`` (returns
        at once if it did already, or once :meth:`stop` was called); ``True`` if it moved."""
        self.mark()
        if self.generation > since or self.stopping:
            return self.generation > since
        changed = self._changed
        self.waiting += 1
        self._wanted.set()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(seconds, 0.0)):
                    await changed.wait()
        finally:
            self.waiting -= 1
            if self.waiting == 0:
                self._wanted.clear()
        return self.generation > since

    def _bump(self) -> None:
        self.generation += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def _watch(self) -> None:
        backoff = Backoff()
        while True:
            try:
                _, position = await frontier(self.db)
                self.polls += 1
                backoff.reset()
                if position != self._seen or not self.listening.is_set():
                    self._seen = position
                    self.listening.set()
                    self._bump()
                await asyncio.sleep(self.poll_seconds)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next()
                log.warning(
                    "change feed: cannot read the frontier (%s), again in %.1f s",
                    exc.__class__.__name__,
                    delay,
                )
                await asyncio.sleep(delay)
            await self._wanted.wait()

    def stop(self) -> None:
        """Answer every waiter now and from now on (the process is shutting down); the
        watcher stops polling."""
        self.stopping = True
        self._bump()
        if self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        """Stop polling (waiters then time out)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.listening.clear()


async def read_waiting(
    db: Db,
    signal: ChangeSignal,
    after: Cursor | None,
    limit: int,
    wait: float,
    *,
    source_type: str | None = None,
    workspace_id: int | None = None,
    document_kind: str | None = None,
    primary: Db | None = None,
) -> FeedPage:
    """:func:`~debounce.documents.feed.read_changes`, waiting up to ``wait`` seconds for a change when
    there is none yet: woken when ``signal`` sees the frontier move, and every
    :data:`BEHIND_RECHECK_SECONDS` while the server has not replayed ``after`` yet. Answers
    the last (empty) page at the deadline, or at once when ``signal`` stops.

    Raises:
        ValueError, CursorGone: as :func:`~debounce.documents.feed.read_changes`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(wait, 0.0)
    while True:
        since = signal.mark()
        page = await read_changes(
            db,
            after,
            limit,
            source_type=source_type,
            workspace_id=workspace_id,
            document_kind=document_kind,
            primary=primary,
        )
        remaining = deadline - loop.time()
        if page.changes or remaining <= 0 or signal.stopping:
            return page
        after = page.next
        if page.at_head:
            await signal.wait(since, min(remaining, BEHIND_RECHECK_SECONDS) if page.behind else remaining)
