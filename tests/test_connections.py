"""Connection budgeting (issue 42, point 3): what each process may open (the formula of
docs/deploying.md, "Connections"), and the warning at start when that exceeds what the real
server leaves (max_connections − reserved − the connections in use)."""

from __future__ import annotations

import logging

import psycopg
import pytest
from starlette.applications import Starlette

from debounce.config import Settings
from debounce.infra.db import check_connection_budget, connection_limit
from debounce.web import create_app


def test_each_process_counts_its_pools_as_the_formula_does() -> None:
    s = Settings()
    assert s.connections("web")[0] == 10
    assert s.connections("worker")[0] == 8 + 4 + 1
    assert s.connections("serve")[0] == 10 + 4 + 1
    tuned = Settings(pool_max_size=3, worker_concurrency=2, worker_pool_max_size=5)
    assert [tuned.connections(p)[0] for p in ("web", "worker", "serve")] == [3, 6, 8]
    assert "DEBOUNCE_WORKER_POOL_MAX_SIZE" in tuned.connections("worker")[1]
    with pytest.raises(ValueError, match="unknown process"):
        s.connections("cron")


async def test_the_limit_is_the_servers(pg_server_url: str) -> None:
    limit = await connection_limit(pg_server_url)
    with psycopg.connect(pg_server_url) as conn:
        shown = conn.execute("show max_connections").fetchone()
        reserved = conn.execute("show superuser_reserved_connections").fetchone()
    assert shown is not None and reserved is not None
    assert limit.max_connections == int(shown[0])
    assert limit.reserved >= int(reserved[0])
    assert limit.available == limit.max_connections - limit.reserved
    assert 1 <= limit.in_use <= limit.max_connections


async def test_a_process_whose_pools_could_exceed_the_limit_says_so(
    pg_server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    limit = await connection_limit(pg_server_url)
    with caplog.at_level(logging.WARNING, logger="debounce.db"):
        await check_connection_budget(pg_server_url, "worker", 2, "a pool of 1 + 1 LISTEN")
        assert caplog.records == []
        await check_connection_budget(pg_server_url, "worker", limit.available + 1, "a pool of N + 1 LISTEN")
    [record] = caplog.records
    said = record.getMessage()
    assert said.startswith(
        f"this worker may open {limit.available + 1} database connections "
        f"(a pool of N + 1 LISTEN), but the server allows {limit.available} "
        f"(max_connections {limit.max_connections} - {limit.reserved} reserved)"
    )
    assert 'docs/deploying.md, "Connections"' in said
    # an unreachable server is the start's own business: no warning, no error
    caplog.clear()
    assert await check_connection_budget("postgresql://x@127.0.0.1:1/x", "web", 10**6, "") is None
    assert caplog.records == []


async def test_the_procfile_web_warns_at_start(database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The web's own pool (the Procfile's `uvicorn debounce.web:app`), sized past the server's
    limit: its lifespan says so before it opens the pool."""
    app: Starlette = create_app(Settings(database_url=database_url, pool_max_size=100_000))
    with caplog.at_level(logging.WARNING, logger="debounce.db"):
        async with app.router.lifespan_context(app):
            pass
    assert any(
        r.getMessage().startswith(
            "this web may open 100000 database connections (DEBOUNCE_POOL_MAX_SIZE 100000)"
        )
        for r in caplog.records
    ), caplog.text
