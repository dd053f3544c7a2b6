"""Schema migrations: ``sql/NNN_*.sql`` applied in order, each in its own transaction.

Applied versions are recorded in ``schema_migrations``. A session-level advisory lock makes it
safe to run from several processes at once (a Heroku ``release`` phase racing a ``debounce
serve``): the second waits, then finds nothing left to do. Once the schema is current, the
change feed's epoch is checked (:func:`debounce.documents.feed.reset_epoch`: a log restored from another
cluster is emptied here, where writing is allowed, not by a read).
"""

from __future__ import annotations

import logging
from typing import Any, LiteralString

import psycopg

from debounce.documents import feed
from debounce.infra.sql import migrations

__all__ = ["MIGRATION_LOCK_ID", "SchemaStatus", "applied_versions", "migrate", "schema_status"]

log = logging.getLogger("debounce.migrate")

#: Advisory lock key taken while migrating (an arbitrary constant: "debounce" in ASCII, folded).
MIGRATION_LOCK_ID = 0x6465626F756E6365 & 0x7FFFFFFFFFFFFFFF

_CREATE: LiteralString = """
create table if not exists schema_migrations (
    version    integer primary key,
    name       text        not null,
    applied_at timestamptz not null default now()
)
"""


async def applied_versions(conn: psycopg.AsyncConnection[Any]) -> set[int]:
    """Versions recorded in ``schema_migrations`` (empty if the table does not exist)."""
    cur = await conn.execute("select to_regclass('schema_migrations') is not null")
    row = await cur.fetchone()
    if not row or not row[0]:
        return set()
    cur = await conn.execute("select version from schema_migrations")
    return {int(r[0]) for r in await cur.fetchall()}


class SchemaStatus:
    """Where the database's schema stands against this release's migrations: ``current`` is
    the highest version applied (0 for an empty database), ``required`` the highest version
    this release ships; ``missing`` the versions not applied."""

    def __init__(self, applied: set[int]) -> None:
        shipped = [version for version, _, _ in migrations()]
        self.current = max(applied, default=0)
        self.required = max(shipped, default=0)
        self.missing = [v for v in shipped if v not in applied]

    @property
    def ok(self) -> bool:
        """Every migration of this release is applied."""
        return not self.missing

    def problem(self) -> str:
        """One line for the operator (empty when :attr:`ok`)."""
        if self.ok:
            return ""
        return (
            f"database schema is at version {self.current}, this release needs "
            f"{self.required}: run `debounce migrate` (the Procfile's release phase)"
        )


async def schema_status(conn: psycopg.AsyncConnection[Any]) -> SchemaStatus:
    """The :class:`SchemaStatus` of the database ``conn`` is connected to.

    Raises:
        psycopg.Error: the database is unavailable.
    """
    return SchemaStatus(await applied_versions(conn))


async def migrate(conninfo: str) -> list[str]:
    """Apply every pending migration to the database at ``conninfo``.

    Returns the file names applied by this call (empty when already up to date).

    Raises:
        psycopg.Error: a migration failed; its transaction is rolled back, earlier ones stay.
    """
    applied_now: list[str] = []
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute("select pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
        try:
            await conn.execute(_CREATE)
            done = await applied_versions(conn)
            for version, name, text in migrations():
                if version in done:
                    continue
                async with conn.transaction():
                    # A migration file is reviewed SQL from the repository, run as a script.
                    await conn.execute(text.encode())
                    await conn.execute(
                        "insert into schema_migrations (version, name) values (%s, %s)",
                        (version, name),
                    )
                log.info("applied migration %s", name)
                applied_now.append(name)
            purged = await feed.reset_epoch(conn)
            if purged is not None:
                log.info("change feed: a log of another cluster emptied (%d changes)", purged)
        finally:
            await conn.execute("select pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied_now
