"""A statement the deadlock detector cancels is run again where it is a transaction of its own
(``debounce.db.fetch_all_retrying``, used by the queue's statements that change jobs), and
raised inside a caller's transaction. The deadlock is made on purpose: the retried side waits
first and has the shorter ``deadlock_timeout``, so it is the one Postgres cancels."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from debounce.db import fetch_all_retrying

Conn = psycopg.AsyncConnection[Any]
LOCK_BOTH_DESCENDING = "select id from deadlock_rows order by id desc for update"  # test-only SQL


async def setup_rows(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        await c.execute("create table deadlock_rows (id int primary key)")  # test-only SQL
        await c.execute("insert into deadlock_rows values (1), (2)")  # test-only SQL


async def waiting_on_a_lock(watcher: Conn, pid: int) -> None:
    """Until backend ``pid`` waits on a lock (polled: no timing assumed)."""
    while True:
        cur = await watcher.execute(  # test-only SQL
            "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", (pid,))
        row = await cur.fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(0.01)


async def deadlock_against(database_url: str, victim: Conn) -> tuple[Any, list[int]]:
    """Holder locks row 1; ``victim`` runs LOCK_BOTH_DESCENDING (takes 2, waits on 1); holder
    then asks for row 2: a deadlock that Postgres resolves by cancelling ``victim`` (its
    deadlock_timeout is 50 ms, the holder's 10 s). Returns the victim's outcome (rows or the
    exception) and the rows the holder locked."""
    async with await psycopg.AsyncConnection.connect(database_url) as holder, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watcher:
        await holder.execute("set deadlock_timeout = '10s'")  # test-only SQL
        await holder.execute("select id from deadlock_rows where id = 1 for update")  # test-only
        ran = asyncio.create_task(fetch_all_retrying(victim, LOCK_BOTH_DESCENDING, {}))
        await waiting_on_a_lock(watcher, victim.info.backend_pid)
        cur = await holder.execute("select id from deadlock_rows where id = 2 for update")  # test
        held = [int(r[0]) for r in await cur.fetchall()]
        await holder.commit()
        try:
            outcome: Any = await ran
        except psycopg.Error as exc:
            outcome = exc
        return outcome, held


async def test_a_statement_of_its_own_is_run_again_after_a_deadlock(database_url: str) -> None:
    await setup_rows(database_url)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as victim:
        await victim.execute("set deadlock_timeout = '50ms'")  # test-only SQL
        outcome, held = await deadlock_against(database_url, victim)
    # The holder got row 2 (the victim's first attempt was rolled back), and the victim's
    # second attempt, after the holder's commit, locked both rows.
    assert held == [2]
    assert [r["id"] for r in outcome] == [2, 1]


async def test_inside_a_callers_transaction_the_deadlock_is_raised(database_url: str) -> None:
    await setup_rows(database_url)
    async with await psycopg.AsyncConnection.connect(database_url) as victim:
        await victim.execute("set deadlock_timeout = '50ms'")  # test-only SQL
        outcome, held = await deadlock_against(database_url, victim)
        assert held == [2]
        assert isinstance(outcome, psycopg.errors.DeadlockDetected)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            await victim.execute("select 1")  # test-only SQL: the caller's transaction is aborted
