"""The command line, configuration, migrations and logging."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from debounce.cli import EXAMPLES, build_parser, main
from debounce.config import Settings
from debounce.infra.logs import JsonFormatter
from debounce.infra.sql import migrations
from debounce.migrate import migrate
from debounce.web import create_app
from standins.server import BackgroundServer


async def test_concurrent_migrations_are_safe(pg_server_url: str) -> None:
    schema = "m_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'create schema "{schema}"')
    url = make_conninfo(pg_server_url, options=f"-c search_path={schema}")
    try:
        results = await asyncio.gather(*(migrate(url) for _ in range(4)))
        applied = [name for r in results for name in r]
        expected = [name for _, name, _ in migrations()]
        assert len(expected) >= 4 and sorted(applied) == expected  # each applied exactly once
        assert await migrate(url) == []
        with psycopg.connect(url) as conn:
            versions = conn.execute("select version from schema_migrations order by 1").fetchall()
            assert versions == [(v,) for v, _, _ in migrations()]
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'drop schema "{schema}" cascade')


def test_json_log_lines_carry_job_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("debounce.test-json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("synced", extra={"job_id": 7, "source": "notion", "page": "p1"})
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue())
    assert line["msg"] == "synced" and line["level"] == "warning"
    assert (line["job_id"], line["source"], line["page"]) == (7, "notion", "p1")
    assert line["ts"].endswith("+00:00")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NOTION_DEBOUNCE_SECONDS": "-1"}, "NOTION_DEBOUNCE_SECONDS"),
        ({"SLACK_MAX_WAIT_SECONDS": "soon"}, "SLACK_MAX_WAIT_SECONDS"),
        ({"DEBOUNCE_WORKER_CONCURRENCY": "0"}, "DEBOUNCE_WORKER_CONCURRENCY"),
        ({"DEBOUNCE_LOG_FORMAT": "xml"}, "DEBOUNCE_LOG_FORMAT"),
        ({"DEBOUNCE_BACKOFF_SECONDS": "1,x"}, "DEBOUNCE_BACKOFF_SECONDS"),
    ],
)
def test_bad_configuration_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env(env)


def test_configuration_defaults_and_overrides() -> None:
    s = Settings.from_env({"NOTION_DEBOUNCE_SECONDS": "60", "DEBOUNCE_BACKOFF_SECONDS": "1,2"})
    assert s.window("notion").debounce_seconds == 60
    assert s.window("notion").max_wait_seconds == 3600
    assert s.window("slack").debounce_seconds == 30
    assert s.backoff_seconds == (1.0, 2.0)
    assert s.database_url is None and s.admin_token is None


def test_help_explains_every_command() -> None:
    text = build_parser().format_help()
    for command in (
        "migrate",
        "web",
        "worker",
        "serve",
        "resync",
        "jobs",
        "stats",
        "retry",
        "prune",
        "send",
        "notion-token",
        "documents",
    ):
        assert command in text
    out = subprocess.run(
        [sys.executable, "-m", "debounce", "send", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--url" in out


def test_send_signs_and_posts_examples(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``debounce send`` against a real uvicorn on loopback, then ``debounce jobs``."""
    secret = "cli-test-secret"
    app = create_app(Settings(database_url=database_url, notion_webhook_secret=secret))
    monkeypatch.setenv("DATABASE_URL", database_url)
    with BackgroundServer(app, lifespan="on") as server:
        monkeypatch.setenv("NOTION_WEBHOOK_SECRET", secret)
        code = main(
            [
                "send",
                "notion",
                str(EXAMPLES / "notion" / "page.created.json"),
                str(EXAMPLES / "notion" / "page.content_updated.json"),
                "--url",
                server.url,
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert '"outcome":"created"' in out and '"outcome":"debounced"' in out
        # A wrong secret is refused by the service and reported as a failure.
        monkeypatch.setenv("NOTION_WEBHOOK_SECRET", "wrong")
        code = main(["send", "notion", str(EXAMPLES / "notion" / "page.created.json"), "--url", server.url])
        assert code == 1 and "401" in capsys.readouterr().out
    assert main(["jobs", "--status", "pending", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [j["event_count"] for j in listed["jobs"]] == [2]
    assert main(["resync", "slack", "C123"]) == 0
    assert json.loads(capsys.readouterr().out)["priority"] == 100


def test_examples_are_shipped_with_the_checkout() -> None:
    assert sorted(p.name for p in (Path(EXAMPLES) / "slack").glob("*.json"))
