"""``sql/schema.sql``: the schema the migrations produce, in one file a reader can follow.

``python -m debounce.devtools.schema_dump > sql/schema.sql`` migrates a scratch schema from ``sql/`` and
prints ``pg_dump --schema-only`` of it, normalised (no ownership, privileges, ``SET`` lines or
version banner; the scratch schema's name removed), so the file changes only when the
migrations do. With no ``--database-url`` it starts a throwaway embedded Postgres (``pgserver``):
a machine with Python and nothing else regenerates it. ``pg_dump`` is pgserver's own
(``pgserver/pginstall/bin``), whichever server is dumped, so one binary decides the format.
``tests/test_schema_file.py`` fails when the file and the migrations disagree.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from debounce.migrate import migrate

__all__ = ["REGENERATE", "dump", "normalise", "pg_dump_path"]

#: The command that rewrites the file (quoted by the test that checks it).
REGENERATE = "python -m debounce.devtools.schema_dump > sql/schema.sql"

_HEADER = """\
-- The schema the migrations sql/NNN_*.sql produce, as pg_dump prints it (normalised).
-- Generated: do not edit. After adding a migration, regenerate it with
--   {command}
-- (tests/test_schema_file.py fails until the two agree).
"""

_DROPPED = re.compile(
    r"^(SET |SELECT pg_catalog\.set_config|-- Dumped (from|by) |\\restrict |\\unrestrict )"
    r"|SET \(pg_attver="
)  # an attribute option some patched servers report


def pg_dump_path() -> Path:
    """pgserver's ``pg_dump``.

    Raises:
        FileNotFoundError: the ``pgserver`` package has no ``pg_dump``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pgserver
    path = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"
    if not path.is_file():
        raise FileNotFoundError(f"no pg_dump at {path}")
    return path


def normalise(text: str, schema: str) -> str:
    """``pg_dump``'s output without what depends on the run: ``SET`` lines, the version
    banner, the scratch schema's ``CREATE SCHEMA`` and its name as a qualifier, the bounds of
    range partitions (transaction ids: migration 028); runs of blank lines become one."""
    qualifier = re.compile(rf'(?<![\w"]){re.escape(schema)}\.')
    bounds = re.compile(r"FOR VALUES FROM \('\d+'\) TO \('\d+'\)")
    kept: list[str] = []
    for line in text.splitlines():
        if _DROPPED.search(line) or line.startswith("-- PostgreSQL database dump"):
            continue
        line = qualifier.sub("", line).rstrip()
        # a range partition of the change log ends at the transaction ids of its migration
        line = bounds.sub("FOR VALUES FROM ('...') TO ('...')", line)
        line = line.replace(f"; Schema: {schema}; Owner: -", "").replace("; Owner: -", "")
        if schema in line:  # the scratch schema's own CREATE SCHEMA and its heading
            continue
        kept.append(line)
    # pg_dump heads each object with three lines ("--", "-- Name: ...", "--"): keep the
    # middle one after a blank line; no runs of blank lines
    out: list[str] = []
    for line in kept:
        if line == "--":
            continue
        if line.startswith("-- Name: ") or not line:
            if out and out[-1]:
                out.append("")
            if not line:
                continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return _HEADER.format(command=REGENERATE) + "\n" + "\n".join(out) + "\n"


def dump(server_url: str) -> str:
    """Migrate a scratch schema on the server at ``server_url`` and return its normalised
    dump; the scratch schema is dropped afterwards.

    Raises:
        psycopg.Error: the server refused (connection, permissions, a migration failed).
        subprocess.CalledProcessError: ``pg_dump`` failed.
    """
    schema = "schema_dump_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("create schema {}").format(sql.Identifier(schema)))
    try:
        asyncio.run(migrate(make_conninfo(server_url, options=f"-c search_path={schema}")))
        done = subprocess.run(
            [
                str(pg_dump_path()),
                "--schema-only",
                "--no-owner",
                "--no-privileges",
                f"--schema={schema}",
                "--dbname",
                server_url,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return normalise(done.stdout, schema)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))


@contextmanager
def embedded_server() -> Iterator[str]:
    """A throwaway embedded Postgres (pgserver) in a temporary directory; yields its URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    with tempfile.TemporaryDirectory(prefix="debounce-schema-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m debounce.devtools.schema_dump",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--database-url",
        help="a server to migrate a scratch schema on (default: a throwaway embedded Postgres)",
    )
    args = parser.parse_args(argv)
    if args.database_url:
        text = dump(args.database_url)
    else:
        with embedded_server() as url:
            text = dump(url)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
