"""The worker's side of push delivery: one :class:`Deliverer` per subscription at a time,
across every worker process, and the :class:`DeliveryRunner` of a process that leases
subscriptions and runs their deliverers with its own connections and slots (a sync never
waits for a delivery, nor the reverse).

A deliverer holds its subscription by a lease in Postgres (``sql/queries/delivery.sql``
``lease``/``renew``): a token that every write of the deliverer must present (the cursor
moves only for the lease holder), renewed at each step. Before each attempt the lease is
renewed to :attr:`DeliverySettings.lease_seconds`, at least twice the HTTP timeout, so an
attempt ends before its lease can: a worker that dies leaves no attempt in flight when another
takes the subscription over (after the lease runs out), and that one sends the batch in flight
again under the same ``webhook-id``.

One step: with no batch in flight, read the feed after the subscription's position
(:func:`debounce.documents.feed.read_changes`, the gap-free read), keep the changes its kinds
ask for, stage them as the batch in flight (its exact body and id stored) and make its first
attempt; with one, when it is due, POST it. Each attempt's answer is recorded: a 2xx moves the
position past the batch (FIFO: the next batch only after a 2xx), anything else schedules a
retry (:mod:`.schedule`) or disables the subscription (410; failing for
:attr:`DeliverySettings.disable_after_seconds`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from debounce.config import Settings
from debounce.delivery import payload, schedule, signing
from debounce.documents import feed
from debounce.documents.feed_listen import BEHIND_RECHECK_SECONDS, ChangeSignal
from debounce.infra.db import Db, fetch_all, fetch_one, open_pool
from debounce.infra.retry import Backoff
from debounce.infra.sql import queries

__all__ = ["DeliverySettings", "Deliverer", "DeliveryRunner", "Next", "Stopped", "lease"]

log = logging.getLogger("debounce.delivery")
_Q = queries("delivery")

#: Changes read from the feed per batch (a body then keeps those that fit 20 kB).
BATCH_CHANGES = 100
#: Characters of an endpoint's answer kept as the last error.
ERROR_CHARS = 300


@dataclass(frozen=True)
class DeliverySettings:
    """A worker's delivery settings (``DEBOUNCE_DELIVERY_*``, docs/configuration.md):
    ``concurrency`` subscriptions delivered at once per process, ``timeout_seconds`` of one
    attempt, ``lease_seconds`` of a deliverer's hold (raised to twice the timeout),
    ``disable_after_seconds`` of failing before a subscription is disabled, and
    ``poll_seconds`` between looks for subscriptions no deliverer holds."""

    concurrency: int = 4
    timeout_seconds: float = 15.0
    lease_seconds: float = 60.0
    disable_after_seconds: float = 5 * 86400.0
    poll_seconds: float = 2.0

    @classmethod
    def of(cls, settings: Settings) -> DeliverySettings:
        """The delivery settings of the service's ``settings`` (``DEBOUNCE_DELIVERY_*``; the
        look for subscriptions to take every ``DEBOUNCE_POLL_INTERVAL_SECONDS``)."""
        return cls(
            concurrency=settings.delivery_concurrency,
            timeout_seconds=settings.delivery_timeout_seconds,
            lease_seconds=settings.delivery_lease_seconds,
            disable_after_seconds=settings.delivery_disable_after_seconds,
            poll_seconds=settings.poll_interval_seconds,
        )

    @property
    def lease(self) -> float:
        """The lease actually taken: at least twice the timeout (see the module docstring)."""
        return max(self.lease_seconds, 2 * self.timeout_seconds)


class Stopped(Exception):
    """The deliverer lost its subscription: the lease ran out (another holds it), or the
    subscription was disabled or removed."""


@dataclass(frozen=True)
class Next:
    """When to step again: after ``seconds``, or earlier when the feed moves past generation
    ``feed_since`` of the process's :class:`ChangeSignal` (``None``: do not wake on it);
    ``idle``: everything up to the feed's head is delivered."""

    seconds: float
    feed_since: int | None = None
    idle: bool = False


async def lease(
    db: Db, worker_id: str, limit: int, lease_seconds: float, *, now: datetime | None = None
) -> list[tuple[int, str]]:
    """Take up to ``limit`` active subscriptions no deliverer holds (leases run out before
    ``now``, default the database's clock) for ``lease_seconds``: ``[(id, token)]``."""
    rows = await fetch_all(
        db,
        _Q["lease"],
        {"worker_id": worker_id, "limit": limit, "lease_seconds": float(lease_seconds), "now": now},
    )
    return [(int(r["id"]), str(r["lease_token"])) for r in rows]


class Deliverer:
    """Subscription ``subscription_id`` held by lease ``token``: :meth:`step` does one step
    (see the module docstring). ``http``: the session the POSTs go through; ``signal``: the
    process's feed watcher (``None``: none, a :class:`Next` then carries no generation)."""

    def __init__(
        self,
        db: Db,
        http: aiohttp.ClientSession,
        settings: DeliverySettings,
        subscription_id: int,
        token: str,
        signal: ChangeSignal | None = None,
    ) -> None:
        self.db = db
        self.http = http
        self.settings = settings
        self.id = subscription_id
        self.token = token
        self.signal = signal

    def _key(self) -> dict[str, Any]:
        return {"id": self.id, "token": self.token}

    async def release(self) -> None:
        """Give the lease back (another deliverer may take the subscription at once)."""
        await fetch_one(self.db, _Q["release"], self._key())

    async def step(self, *, now: datetime | None = None) -> Next:
        """One step at ``now`` (default: the clock; UTC). Returns when to step again.

        Raises:
            Stopped: the lease is gone, or the subscription is disabled (then the lease is
                given back) or removed.
        """
        row = await fetch_one(
            self.db, _Q["renew"], {**self._key(), "lease_seconds": self.settings.lease, "now": now}
        )
        if row is None:
            raise Stopped(f"subscription {self.id}: lease lost, or removed")
        if row["status"] != "active":
            await self.release()
            raise Stopped(f"subscription {self.id} is {row['status']}")
        at = now or datetime.now(UTC)
        if row["batch_id"] is None:
            return await self._stage(row, at, now)
        due = row["next_attempt_at"]
        if due > at:
            return Next((due - at).total_seconds())
        return await self._attempt(row, at, now)

    async def _stage(self, row: Any, at: datetime, now: datetime | None) -> Next:
        """Read the changes after the position and make them the batch in flight."""
        after = (
            feed.Cursor(row["epoch"], int(row["after_xid"]), int(row["after_seq"]))
            if row["after_xid"] is not None
            else None
        )
        since = self.signal.mark() if self.signal is not None else None
        try:
            page = await feed.read_changes(
                self.db,
                after,
                BATCH_CHANGES,
                source_type=row["source_type"],
                workspace_id=row["workspace_id"],
            )
        except feed.CursorGone as exc:
            await fetch_one(
                self.db,
                _Q["disable"],
                {
                    "id": self.id,
                    "now": now,
                    "reason": f"its position cannot be followed: {exc.explain()}; replay it from "
                    f"a cursor (`debounce subscriptions replay {self.id} --from head`)",
                },
            )
            await self.release()
            raise Stopped(f"subscription {self.id}: cursor gone ({exc.reason})") from None
        if page.behind:
            return Next(BEHIND_RECHECK_SECONDS)
        kinds = set(row["kinds"])  # kinds of change (op)
        document_kinds = set(row["document_kinds"])
        changes = [
            c
            for c in page.changes
            if (not kinds or c.op in kinds) and (not document_kinds or c.kind in document_kinds)
        ]
        moved = {
            "from_xid": row["after_xid"],
            "from_seq": row["after_seq"],
            "epoch": page.next.epoch,
            "to_xid": str(page.next.xid),
            "to_seq": page.next.seq,
        }
        if not changes:
            if after != page.next:
                await fetch_one(self.db, _Q["advance"], {**self._key(), **moved})
            return Next(self.settings.lease / 3, since, idle=True) if page.at_head else Next(0.0)
        documents = await self._documents(changes) if row["full_content"] else None
        batch = payload.build(changes, page.next, at, documents)
        batch_id = signing.new_message_id()
        staged = await fetch_one(
            self.db,
            _Q["stage"],
            {
                **self._key(),
                **moved,
                "to_xid": str(batch.cursor.xid),
                "to_seq": batch.cursor.seq,
                "batch_id": batch_id,
                "body": batch.body,
                "changes": batch.count,
                "now": now,
            },
        )
        if staged is None:  # an operator moved the position meanwhile: read again
            return Next(0.0)
        # Its first attempt at once, under the lease renewed at the start of this step.
        return await self._attempt(
            {**row, "batch_id": batch_id, "batch_body": batch.body, "attempts": 0}, at, now
        )

    async def _documents(self, changes: list[feed.Change]) -> dict[tuple[str, str], Any]:
        rows = await fetch_all(
            self.db,
            _Q["documents"],
            {"source_types": [c.source for c in changes], "document_ids": [c.document_id for c in changes]},
        )
        return {(r["source_type"], r["document_id"]): r for r in rows}

    async def _attempt(self, row: Any, at: datetime, now: datetime | None) -> Next:
        """POST the batch in flight and record the answer."""
        secrets = [row["secret"]] + ([row["previous_secret"]] if row["previous_secret"] else [])
        # The header carries the attempt's wall-clock time (receivers allow ±5 minutes).
        headers = signing.headers(secrets, row["batch_id"], row["batch_body"], datetime.now(UTC))
        status, error, wait = await self._post(row["url"], row["batch_body"], headers, at)
        attempts = int(row["attempts"]) + 1
        v = schedule.verdict(status, attempts, wait)
        key = {**self._key(), "batch_id": row["batch_id"], "status": status, "now": now}
        if v.delivered:
            if await fetch_one(self.db, _Q["delivered"], key) is None:
                raise Stopped(f"subscription {self.id}: lease lost during the attempt")
            log.debug("subscription %d: batch %s delivered (%s)", self.id, row["batch_id"], status)
            return Next(0.0)
        failing_since = row["failing_since"] or at
        disable, reason = False, None
        if v.gone:
            disable, reason = True, "the endpoint answered 410 Gone"
        elif at - failing_since >= timedelta(seconds=self.settings.disable_after_seconds):
            disable = True
            reason = (
                f"failing since {failing_since.isoformat()} ({attempts} attempts of "
                f"batch {row['batch_id']}; last: {error})"
            )
        done = await fetch_one(
            self.db,
            _Q["failed"],
            {**key, "error": error, "retry_seconds": v.retry_seconds, "disable": disable, "reason": reason},
        )
        if done is None:
            raise Stopped(f"subscription {self.id}: lease lost during the attempt")
        if disable:
            log.warning("subscription %d disabled: %s", self.id, reason)
            await self.release()
            raise Stopped(f"subscription {self.id} disabled")
        log.info(
            "subscription %d: attempt %d of batch %s failed (%s); again in %.0f s",
            self.id,
            attempts,
            row["batch_id"],
            error,
            v.retry_seconds,
        )
        return Next(v.retry_seconds)

    async def _post(
        self, url: str, body: str, headers: dict[str, str], at: datetime
    ) -> tuple[int | None, str, float | None]:
        """``(status, error, retry_after)`` of one POST: ``status`` ``None`` when no answer
        came (``error`` says why), ``error`` the status and the start of the answer's body,
        ``retry_after`` the seconds its ``Retry-After`` asks (``None``: none)."""
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        try:
            async with self.http.post(
                url, data=body.encode(), headers=headers, allow_redirects=False, timeout=timeout
            ) as answer:
                text = (await answer.content.read(ERROR_CHARS)).decode("utf-8", "replace")
                wait = schedule.retry_after(answer.headers.get("retry-after"), at)
                return answer.status, f"HTTP {answer.status}: {text}".strip(), wait
        except TimeoutError:
            return None, f"no answer within {self.settings.timeout_seconds:g} s", None
        except aiohttp.ClientError as exc:
            return None, f"{exc.__class__.__name__}: {exc}"[:ERROR_CHARS], None


class DeliveryRunner:
    """The deliverers of one worker process: every ``poll_seconds`` it leases subscriptions
    no deliverer holds, up to ``concurrency``, and follows each in a task of its own, over a
    pool of its own (``conninfo``: the primary) and one HTTP session. While every slot is taken
    and other subscriptions wait for one (:attr:`crowded`), a deliverer that has delivered
    everything gives its subscription back, to be taken again after those waiting longer."""

    def __init__(self, settings: DeliverySettings, conninfo: str, worker_id: str) -> None:
        self.settings = settings
        self.conninfo = conninfo
        self.worker_id = worker_id
        self.tasks: dict[int, asyncio.Task[None]] = {}
        #: Every slot is taken and subscriptions no deliverer holds wait.
        self.crowded = False

    async def run(self, stopping: asyncio.Event) -> None:
        """Deliver until ``stopping`` is set, then give every lease back."""
        pool = open_pool(self.conninfo, min_size=1, max_size=self.settings.concurrency + 1, name="delivery")
        await pool.open()
        signal = ChangeSignal(pool)
        backoff = Backoff()
        try:
            async with aiohttp.ClientSession() as http:
                while not stopping.is_set():
                    try:
                        await self._lease_more(pool, http, signal)
                        backoff.reset()
                        wait = self.settings.poll_seconds
                    except Exception as exc:
                        wait = backoff.next()
                        log.warning(
                            "delivery: cannot lease subscriptions (%s: %s); again in %.1f s",
                            exc.__class__.__name__,
                            exc,
                            wait,
                        )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), wait)
                await self._stop_all()
        finally:
            await self._stop_all()
            signal.stop()
            await signal.close()
            await pool.close()

    async def _lease_more(self, pool: Db, http: aiohttp.ClientSession, signal: ChangeSignal) -> None:
        for sub_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[sub_id]
        free = self.settings.concurrency - len(self.tasks)
        if free <= 0:
            row = await fetch_one(pool, _Q["waiting"], {})
            self.crowded = row is not None and int(row["waiting"]) > 0
            return
        self.crowded = False
        for sub_id, token in await lease(pool, self.worker_id, free, self.settings.lease):
            deliverer = Deliverer(pool, http, self.settings, sub_id, token, signal)
            self.tasks[sub_id] = asyncio.create_task(self._follow(deliverer), name=f"deliver-{sub_id}")

    async def _stop_all(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        for task in self.tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks.clear()

    async def _follow(self, deliverer: Deliverer) -> None:
        """Step ``deliverer`` until it stops; gives its lease back when cancelled."""
        backoff = Backoff()
        renew_every = self.settings.lease / 3
        try:
            while True:
                try:
                    nxt = await deliverer.step()
                    backoff.reset()
                except Stopped as exc:
                    log.info("delivery: %s", exc)
                    return
                except Exception as exc:
                    nxt = Next(backoff.next())
                    log.warning(
                        "delivery of subscription %d: %s: %s; again in %.1f s",
                        deliverer.id,
                        exc.__class__.__name__,
                        exc,
                        nxt.seconds,
                    )
                if nxt.idle and self.crowded:
                    log.debug("delivery: subscription %d given back (others wait)", deliverer.id)
                    return  # the lease is given back below
                if nxt.seconds <= 0:
                    continue
                wait = min(nxt.seconds, renew_every)
                if nxt.feed_since is not None and deliverer.signal is not None:
                    await deliverer.signal.wait(nxt.feed_since, wait)
                else:
                    await asyncio.sleep(wait)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(deliverer.release())
