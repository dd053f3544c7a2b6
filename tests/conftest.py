"""Test database: a real Postgres for every test, each test in a clean schema.

``TEST_DATABASE_URL`` when set; otherwise an embedded throwaway Postgres (``pgserver``) started
once per session, so no test ever skips for lack of a database. ``DATABASE_URL`` is never used:
it may well point at production (the README's own "Running it for real" exports it), and the
tests create and drop schemas.
Each test gets its own schema (``search_path`` set in the connection string), migrated from
``sql/``; subprocesses receive the same string as ``DATABASE_URL``.

The dashboard's browser tests (marked ``browser``) need Debian's Chromium: ``pytest`` deselects
them, ``pytest -m browser`` runs them (see :func:`pytest_collection_modifyitems`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from chromium import missing_line
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from debounce.migrate import migrate


def _named_on_the_command_line(config: pytest.Config) -> set[Path]:
    """The test files the command line names itself (``tests/test_x.py``,
    ``tests/test_x.py::test_y``), not through a directory."""
    here = config.invocation_params.dir
    named = set()
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path.is_file():
            named.add(path)
    return named


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``browser`` tests unless the ``-m`` expression names ``browser`` (``pytest
    -m browser``: then ``-m`` decides) or their file is named on the command line (``pytest
    tests/test_dashboard_browser.py``). When browser tests remain selected on a machine without
    Chromium, stop the session before any test with one line saying what to install."""
    if not re.search(r"\bbrowser\b", config.getoption("markexpr") or ""):
        named = _named_on_the_command_line(config)
        dropped = [i for i in items if i.get_closest_marker("browser") and i.path not in named]
        if dropped:
            items[:] = [i for i in items if i not in dropped]
            config.hook.pytest_deselected(items=dropped)
    if any(i.get_closest_marker("browser") for i in items):
        missing = missing_line()
        if missing:
            raise pytest.UsageError(missing)


def server_url_for_tests(env: Mapping[str, str]) -> str | None:
    """The server the tests may use: ``TEST_DATABASE_URL`` only, never ``DATABASE_URL``."""
    return env.get("TEST_DATABASE_URL") or None


@pytest.fixture(autouse=True, scope="session")
def _no_production_database() -> Iterator[None]:
    """Subprocesses started by tests inherit the environment: drop ``DATABASE_URL`` so a test
    that forgets to pass its own cannot reach a database that was not given for tests."""
    saved = {name: os.environ.pop(name, None) for name in ("DATABASE_URL", "DATABASE_REPLICA_URL")}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is not None:
                os.environ[name] = value


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of the Postgres server the session uses."""
    url = server_url_for_tests(os.environ)
    if url:
        yield url
        return
    import pgserver  # embedded fallback

    with tempfile.TemporaryDirectory(prefix="debounce-test-pg-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


@pytest.fixture
def schema_name() -> str:
    return "t_" + uuid.uuid4().hex[:16]


@contextlib.contextmanager
def fresh_schema(pg_server_url: str, schema_name: str) -> Iterator[str]:
    """A connection string whose ``search_path`` is schema ``schema_name``, created empty
    here and dropped (with everything in it) on the way out."""
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'create schema "{schema_name}"')  # name is ours: <letter>_<hex>
    try:
        yield make_conninfo(pg_server_url, options=f"-c search_path={schema_name}")
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema_name}" cascade')


@pytest.fixture
def database_url(pg_server_url: str, schema_name: str) -> Iterator[str]:
    """A connection string whose ``search_path`` is a fresh, migrated schema."""
    with fresh_schema(pg_server_url, schema_name) as url:
        asyncio.run(migrate(url))
        yield url


@pytest.fixture
def empty_database(pg_server_url: str) -> Iterator[str]:
    """A connection string to a fresh, *unmigrated* schema (another than ``database_url``'s)."""
    with fresh_schema(pg_server_url, "e_" + uuid.uuid4().hex[:12]) as url:
        yield url


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection to the test schema."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        yield c


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[AsyncConnectionPool[Any]]:
    """A pool over the test schema, as the web and worker processes use."""
    p: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database_url, min_size=1, max_size=12, open=False, kwargs={"autocommit": True}, timeout=10
    )
    await p.open(wait=True)
    try:
        yield p
    finally:
        await p.close()
