"""Database access shared by the queue and the document store.

Functions in ``queue`` and ``documents`` accept either an open ``AsyncConnection`` (tests, one
transaction the caller controls) or an ``AsyncConnectionPool`` (the web and worker processes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, LiteralString, TypeAlias

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

__all__ = ["Db", "connection", "execute", "fetch_all", "fetch_one", "open_pool"]

Db: TypeAlias = "AsyncConnection[Any] | AsyncConnectionPool[Any]"


@asynccontextmanager
async def connection(db: Db) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection from ``db``: the connection itself, or one borrowed from the pool.

    A borrowed connection commits when the block exits normally and rolls back on error
    (psycopg_pool semantics).

    Raises:
        psycopg_pool.PoolTimeout: no connection within the pool's timeout.
    """
    if isinstance(db, AsyncConnectionPool):
        async with db.connection() as conn:
            yield conn
    else:
        yield db


async def fetch_all(db: Db, query: LiteralString, params: Mapping[str, Any]) -> list[DictRow]:
    """Run ``query`` with ``params`` in one round trip; all rows as dicts."""
    async with connection(db) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall() if cur.description else []


async def fetch_one(db: Db, query: LiteralString, params: Mapping[str, Any]) -> DictRow | None:
    """Run ``query`` with ``params`` in one round trip; the first row or ``None``."""
    async with connection(db) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone() if cur.description else None


async def execute(db: Db, query: LiteralString, params: Mapping[str, Any]) -> int:
    """Run ``query`` with ``params``; the number of rows affected."""
    async with connection(db) as conn, conn.cursor() as cur:
        await cur.execute(query, params)
        return cur.rowcount


def open_pool(
    conninfo: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 3.0,
    name: str = "debounce",
) -> AsyncConnectionPool[Any]:
    """An (unopened) ``AsyncConnectionPool``; ``await pool.open()`` or use ``async with``.

    ``timeout`` (seconds) bounds how long a caller waits for a connection, so a database that
    is down turns into a quick ``PoolTimeout`` (answered 503) instead of a hang.
    """
    return AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        name=name,
        open=False,
        kwargs={"autocommit": True},
        reconnect_timeout=3600.0,
    )
