"""Database access shared by the queue and the document store.

Functions in ``queue`` and ``documents`` accept either an open ``AsyncConnection`` (tests, one
transaction the caller controls) or an ``AsyncConnectionPool`` (the web and worker processes).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString, TypeAlias

import psycopg
from psycopg import AsyncConnection, AsyncCursor, pq
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from debounce.infra.sql import queries

__all__ = [
    "ConnectionLimit",
    "Db",
    "TRANSIENT_SQLSTATE_CLASSES",
    "TRANSIENT_SQLSTATES",
    "check_connection_budget",
    "connection",
    "connection_limit",
    "execute",
    "fetch_all",
    "fetch_one",
    "is_transient",
    "open_pool",
    "unreachable_reason",
    "why_unreachable",
]

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


def _returns_rows(cur: AsyncCursor[Any]) -> bool:
    """Whether the statement just run returned a row set (even an empty one). Read from the
    result's status: ``cursor.description`` would build a ``Column`` per column first (about
    5 % of a draining worker's CPU, py-spy; bench/HISTORY.md section 13)."""
    res = cur.pgresult
    return res is not None and res.status == pq.ExecStatus.TUPLES_OK


async def fetch_all(db: Db, query: LiteralString, params: Mapping[str, Any]) -> list[DictRow]:
    """Run ``query`` with ``params`` in one round trip; all rows as dicts."""
    async with connection(db) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall() if _returns_rows(cur) else []


async def fetch_one(db: Db, query: LiteralString, params: Mapping[str, Any]) -> DictRow | None:
    """Run ``query`` with ``params`` in one round trip; the first row or ``None``."""
    async with connection(db) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone() if _returns_rows(cur) else None


async def execute(db: Db, query: LiteralString, params: Mapping[str, Any]) -> int:
    """Run ``query`` with ``params``; the number of rows affected."""
    async with connection(db) as conn, conn.cursor() as cur:
        await cur.execute(query, params)
        return cur.rowcount


#: SQLSTATE classes that mean "the database is not available right now" (PostgreSQL manual,
#: Appendix A "PostgreSQL Error Codes"): 08 connection exception, 53 insufficient resources
#: (too many connections, out of memory or disk), 57P operator intervention (admin/crash
#: shutdown, cannot connect now), 58 system error (I/O).
TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57P", "58")
#: Single SQLSTATEs that are transient too: 25006 read-only transaction (a managed failover
#: promotes a replica, or the primary is demoted), 40001 serialization failure, 40P01 deadlock,
#: 57014 statement cancelled (our ``statement_timeout``), 55P03 lock not available,
#: 25P03 idle-in-transaction timeout.
TRANSIENT_SQLSTATES = frozenset({"25006", "40001", "40P01", "57014", "55P03", "25P03"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means the database is unavailable *for now* (back off and go on; the
    web answers 503 so the sender redelivers) rather than a problem with what was sent.

    True for pool timeouts, lost or refused connections (``psycopg.OperationalError`` without
    a SQLSTATE, ``InterfaceError``, ``OSError``, ``TimeoutError``) and the SQLSTATEs in
    :data:`TRANSIENT_SQLSTATE_CLASSES` / :data:`TRANSIENT_SQLSTATES`. False for everything
    else, notably ``ProgramLimitExceeded`` (54000, an ``OperationalError`` subclass: a value
    too large for an index) and ``DataError`` (22xxx): retrying those cannot help.
    """
    if isinstance(exc, PoolTimeout | OSError | TimeoutError | psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        if state is None:
            return isinstance(exc, psycopg.OperationalError)
        return state in TRANSIENT_SQLSTATES or state.startswith(TRANSIENT_SQLSTATE_CLASSES)
    return False


#: TCP keepalives on every pooled connection (libpq parameters): a connection whose peer
#: vanished (failover, partition) is detected within about 10 + 3 × 5 s instead of the
#: kernel's two hours.
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def open_pool(
    conninfo: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 3.0,
    name: str = "debounce",
    statement_timeout: float | None = None,
) -> AsyncConnectionPool[Any]:
    """An (unopened) ``AsyncConnectionPool``; ``await pool.open()`` or use ``async with``.

    ``timeout`` (seconds) bounds how long a caller waits for a connection, so a database that
    is down turns into a quick ``PoolTimeout`` (answered 503) instead of a hang. Connections
    have TCP keepalives (:data:`KEEPALIVES`) and a ``connect_timeout`` of ``timeout``;
    ``statement_timeout`` (seconds), when given, is the server-side limit of every statement
    (a cancelled statement rolls back whole: nothing half-written).
    """
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(1, int(timeout + 0.999)),
        **KEEPALIVES,
    }
    configure = None
    if statement_timeout is not None:
        milliseconds = str(max(1, int(statement_timeout * 1000)))

        async def configure(conn: AsyncConnection[Any]) -> None:
            await conn.execute(queries("session")["set_statement_timeout"], {"milliseconds": milliseconds})

    return AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        name=name,
        open=False,
        kwargs=kwargs,
        configure=configure,
        reconnect_timeout=3600.0,
    )


@dataclass(frozen=True)
class ConnectionLimit:
    """The server's connection limit (``SHOW max_connections``): ``max_connections``, the
    slots ``reserved`` for superusers (``superuser_reserved_connections``, plus Postgres 16's
    ``reserved_connections``), and the client connections ``in_use`` when it was read."""

    max_connections: int
    reserved: int
    in_use: int

    @property
    def available(self) -> int:
        """The connections an ordinary role may open in all: ``max_connections`` − reserved."""
        return self.max_connections - self.reserved


async def connection_limit(conninfo: str, *, connect_timeout: int = 3) -> ConnectionLimit:
    """Read the connection limit of the server at ``conninfo`` over a connection of its own
    (counted in ``in_use``); ``connect_timeout``: seconds to connect.

    Raises:
        psycopg.Error: the server is unreachable or refused the connection.
    """
    async with await psycopg.AsyncConnection.connect(
        conninfo, autocommit=True, connect_timeout=connect_timeout
    ) as conn:
        cur = await conn.execute(queries("session")["connection_limit"])
        row = await cur.fetchone()
    assert row is not None
    return ConnectionLimit(int(row[0]), int(row[1]), int(row[2]))


_budget_log = logging.getLogger("debounce.db")


async def check_connection_budget(
    conninfo: str, process: str, wanted: int, how: str
) -> ConnectionLimit | None:
    """At a process's start: warn (one line, logger ``debounce.db``) when ``wanted``, the
    connections its pools may open (``how``: the settings that size them), exceeds what the
    server at ``conninfo`` leaves: ``max_connections`` − reserved − the connections other
    clients hold now. Best effort: an unreachable server is the start's own business (its
    pools say so); returns the limit read, or ``None`` then."""
    try:
        limit = await connection_limit(conninfo)
    except (psycopg.Error, OSError):
        return None
    others = max(0, limit.in_use - 1)  # our own reading connection is gone by now
    if wanted > limit.available - others:
        _budget_log.warning(
            "this %s may open %d database connections (%s), but the server allows %d "
            "(max_connections %d - %d reserved) and %d are in use: at its busiest it will be "
            "refused connections; lower them or raise the plan's limit (docs/deploying.md, "
            '"Connections")',
            process,
            wanted,
            how,
            limit.available,
            limit.max_connections,
            limit.reserved,
            others,
        )
    return limit


def unreachable_reason(exc: BaseException) -> str | None:
    """Why a connection could not be made, in libpq's words on one line (``connection to
    server at "10.0.0.5", port 5432 failed: Connection refused``), when ``exc`` is such a
    failure (an ``OperationalError`` without a SQLSTATE: libpq's own); else ``None``."""
    if (
        not isinstance(exc, psycopg.OperationalError)
        or isinstance(exc, PoolTimeout)
        or exc.sqlstate is not None
    ):
        return None  # a PoolTimeout is an OperationalError that does not say why
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines).removeprefix("connection failed: ") or exc.__class__.__name__


async def why_unreachable(conninfo: str, connect_timeout: int = 3) -> str | None:
    """Connect to ``conninfo`` once, outside any pool, to learn why a pool gets no connection
    (a ``PoolTimeout`` does not say): :func:`unreachable_reason` of the failure, or ``None``
    when the connection succeeds (the pool was busy, not the database away)."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, connect_timeout=connect_timeout
        )
    except psycopg.Error as exc:
        return unreachable_reason(exc) or f"{exc.__class__.__name__}: {exc}".splitlines()[0]
    except OSError as exc:
        return str(exc) or exc.__class__.__name__
    await conn.close()
    return None
