"""Running debounce for real (issue 15): the Procfile's processes against a fresh or wrong
database, configuration errors, the CLI's errors, and the tests' own database rule."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import one_job
import psycopg
import pytest
from conftest import server_url_for_tests
from ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_the_tests_never_use_database_url() -> None:
    assert server_url_for_tests({"DATABASE_URL": "postgresql://prod/db"}) is None
    assert (
        server_url_for_tests(
            {"DATABASE_URL": "postgresql://prod/db", "TEST_DATABASE_URL": "postgresql://t/t"}
        )
        == "postgresql://t/t"
    )
    assert "DATABASE_URL" not in os.environ  # nor can a subprocess a test starts inherit it


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess: ours without any debounce setting, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBOUNCE_", "NOTION_", "SLACK_", "DATABASE_URL", "DATABASE_REPLICA_URL"))
    }
    return {**env, **extra}


def run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


UVICORN = [sys.executable, "-m", "uvicorn", "debounce.web:app", "--host", "127.0.0.1"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "DATABASE_URL is not set"),
        (
            {"DATABASE_URL": "postgresql://x@127.0.0.1/x", "NOTION_DEBOUNCE_SECONDS": "abc"},
            "NOTION_DEBOUNCE_SECONDS must be a number of seconds",
        ),
    ],
)
def test_the_procfile_web_line_exits_on_a_configuration_error_before_binding(
    env: dict[str, str], message: str
) -> None:
    port = free_port()
    done = run([*UVICORN, "--port", str(port)], clean_env(**env), timeout=30)
    assert done.returncode == 2, done.stderr
    assert f"configuration error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and "Uvicorn running" not in done.stderr
    with socket.socket() as s:  # nothing was left listening
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_an_unmigrated_database_is_named_by_every_process_until_migrated(
    empty_database: str, tmp_path: Path
) -> None:
    env = clean_env(
        DATABASE_URL=empty_database, NOTION_WEBHOOK_SECRET="s3cret", DEBOUNCE_POLL_INTERVAL_SECONDS="0.2"
    )
    port = free_port()
    web_log = open(tmp_path / "web.log", "w")
    worker_log = open(tmp_path / "worker.log", "w")
    web = subprocess.Popen(
        [*UVICORN, "--port", str(port)], env=env, cwd=ROOT, stdout=web_log, stderr=subprocess.STDOUT
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "debounce", "worker"],
        env=env,
        cwd=ROOT,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        ready = wait_http(f"{base}/readyz")
        assert ready.status_code == 503 and ready.json()["error"] == "schema_not_migrated"
        assert "run `debounce migrate`" in ready.json()["detail"]
        from debounce.cli import sign_request

        body = (ROOT / "examples" / "notion" / "page.created.json").read_bytes()
        hook = httpx.post(
            f"{base}/webhooks/notion", content=body, headers=sign_request("notion", body, "s3cret")
        )
        assert hook.status_code == 503 and hook.json()["error"] == "schema_not_migrated"
        wait_for_text(tmp_path / "worker.log", "this release needs")
        assert worker.poll() is None, "the worker exited instead of waiting"
        migrated = run([sys.executable, "-m", "debounce", "migrate"], env)
        assert migrated.returncode == 0, migrated.stderr
        assert wait_http(f"{base}/readyz", until=200).status_code == 200
        wait_for_text(tmp_path / "worker.log", "schema is current")
    finally:
        for proc in (web, worker):
            proc.terminate()
            proc.wait(20)
        web_log.close()
        worker_log.close()
    text = (tmp_path / "worker.log").read_text()
    assert "Traceback" not in text and text.count("this release needs") == 1


def wait_http(url: str, until: int | None = None, timeout: float = 30) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            resp = httpx.get(url, timeout=5)
            if until is None or resp.status_code == until:
                return resp
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer"
        time.sleep(0.2)


def wait_for_text(path: Path, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"{text!r} not in {path.name}: {path.read_text()[-2000:]}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["jobs"], {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}, 1, "database error:"),
        (["stats"], {"DEBOUNCE_LOG_LEVEL": "verbose"}, 2, "DEBOUNCE_LOG_LEVEL must be one of"),
        (
            ["send", "notion", "missing.json", "--secret", "x", "--url", "http://127.0.0.1:9"],
            {},
            1,
            "missing.json: cannot read: No such file or directory",
        ),
        (["send", "notion", "examples/notion/page.created.json"], {}, 2, "NOTION_WEBHOOK_SECRET is not set"),
    ],
)
def test_cli_errors_are_one_line_and_a_nonzero_exit(
    args: list[str], env: dict[str, str], code: int, message: str
) -> None:
    done = run([sys.executable, "-m", "debounce", *args], clean_env(**env))
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("signing with")]
    assert len(lines) == 1 and message in lines[0], done.stderr


@pytest.mark.slow
def test_cli_retry_of_a_missing_job_and_a_demo_signed_send(database_url: str) -> None:
    env = clean_env(DATABASE_URL=database_url)
    done = run([sys.executable, "-m", "debounce", "retry", "999"], env)
    assert done.returncode == 1 and done.stderr.strip() == "cannot retry: no job 999"
    sent = run(
        [
            sys.executable,
            "-m",
            "debounce",
            "send",
            "notion",
            "--demo",
            "--url",
            "http://127.0.0.1:9",
            "examples/notion/page.created.json",
        ],
        env,
    )
    assert "signing with the demo secret of `debounce serve --demo`" in sent.stderr
    assert sent.returncode == 1 and "cannot reach" in sent.stderr  # nothing listens on :9


def test_every_command_explains_itself() -> None:
    import argparse

    from debounce.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        assert command.description, f"`debounce {name} --help` has no description"


async def test_documents_by_undashed_notion_id_and_jobs_as_a_table(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from debounce.cli import main
    from debounce.documents.store import Document, DocumentStore

    page = "153104cd-477e-809d-8dc4-ff2d96ae3090"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await DocumentStore(conn).upsert(Document("notion", page, page, "Launch plan", "# Hi\n"))
        await one_job.enqueue(
            conn,
            "notion",
            page,
            payload={"secret": "payload-text"},
            event_id="e1",
            debounce_seconds=30,
            max_wait_seconds=300,
        )
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert await asyncio.to_thread(main, ["documents", "--id", page.replace("-", "")]) == 0
    assert "# Launch plan" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["jobs"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["id", "source", "page"]
    assert page in out and "payload-text" not in out


async def test_debounce_documents_lists_newest_first_as_the_dashboard_and_says_so(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42: `debounce documents` and the dashboard's Documents page in one order (by id,
    newest first), said by both; a document synced again does not move."""
    import asyncio

    from debounce.cli import main
    from debounce.documents.store import Document, DocumentStore

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        store = DocumentStore(conn)
        for name in ("first", "second", "third"):
            await store.upsert(Document("notion", name, name, name.title(), f"# {name}\n"))
        await store.upsert(Document("notion", "first", "first", "First", "# edited\n"))
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert await asyncio.to_thread(main, ["documents"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split()[2] for line in lines[1:-1]]
    assert listed == ["third", "second", "first"]
    assert lines[-1].startswith("newest first, as the dashboard's Documents page lists them")
