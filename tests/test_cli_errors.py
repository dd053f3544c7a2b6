"""The CLI's errors as a newcomer meets them (issue 20, items 2, 3, 5 and 13), each through
``python -m debounce`` in a subprocess with an environment built here:

- every command (enumerated from the parser) ends a bad argument or a bad environment with one
  line on stderr and a non-zero exit, never a traceback;
- the Procfile's processes stop at once without ``DATABASE_URL`` (no embedded Postgres);
- the commands a person runs by hand never migrate: they say the schema is behind and how to
  migrate;
- ``serve`` (``--demo`` too) and ``web`` with their port taken say so in one line naming
  ``PORT`` before anything starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from ports import free_port

from debounce.cli import build_parser
from debounce.infra.secrets import new_key
from debounce.infra.sql import migrations
from debounce.migrate import migrate
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer

ROOT = Path(__file__).resolve().parent.parent
DEBOUNCE = [sys.executable, "-m", "debounce"]
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"
REQUIRED = max(v for v, _, _ in migrations())


def leaf_commands() -> list[str]:
    """Every command of the parser, subcommands spelled out (``workspaces add``)."""

    def walk(parser: argparse.ArgumentParser, prefix: str) -> Iterator[str]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield prefix
            return
        for name, child in subs[0].choices.items():
            yield from walk(child, f"{prefix} {name}".strip())

    return sorted(walk(build_parser(), ""))


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Our environment without any debounce, source or database setting, the embedded
    database's directory pointed at ``data_dir`` (empty unless a test fills it), a free
    ``PORT`` (a service on 8000 — the README's first line running in another terminal — must
    not change what a command answers here), plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("DEBOUNCE_", "NOTION_", "SLACK_", "DATABASE_URL", "DATABASE_REPLICA_URL", "PORT")
        )
    }
    return {**env, "DEBOUNCE_DATA_DIR": str(data_dir), "PORT": str(free_port()), **extra}


def run(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DEBOUNCE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single line ``done`` printed on stderr, after checking it failed without a
    traceback."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select table_name from information_schema.tables where table_schema = current_schema()"
        ).fetchall()
    return sorted(r[0] for r in rows)


# Each command with a bad argument or a bad environment: (arguments, environment, what the
# line says). Environments: "none" (no database variable, no embedded database), "migrated",
# "unmigrated", "unreachable"; "notion" is a migrated database and a running Notion stand-in.
CASES: dict[str, tuple[list[str], str, str]] = {
    "migrate": (["migrate"], "none", "DATABASE_URL is not set"),
    "worker": (["worker"], "none", "DATABASE_URL is not set"),
    "web": (["web"], "none", "DATABASE_URL is not set"),
    "serve": (["serve", "--port", "eighty"], "none", "argument --port: invalid int value"),
    "standins": (["standins", "--bogus"], "none", "unrecognized arguments: --bogus"),
    "send": (
        ["send", "nosuch", "examples/notion/page.created.json"],
        "none",
        "argument source: invalid choice: 'nosuch'",
    ),
    "resync": (["resync", "nosuch", "p1"], "migrated", "unknown source 'nosuch'"),
    "jobs": (["jobs", "--limit", "many"], "migrated", "argument --limit: invalid int value"),
    "stats": (["stats"], "unreachable", "database error:"),
    "retry": (["retry", "999"], "unmigrated", "not migrated"),
    "prune": (["prune", "--older-than", "soon"], "migrated", "argument --older-than"),
    "notion-token": (["notion-token"], "none", "no embedded database"),
    "documents": (["documents", "--id", "nosuch"], "migrated", "no document 'nosuch'"),
    "backfill": (["backfill", "notion"], "unmigrated", "not migrated"),
    "deletions": (["deletions", "apply", "999"], "migrated", "no open hold 999"),
    "workspaces list": (["workspaces", "list"], "unmigrated", "not migrated"),
    "workspaces add": (
        ["workspaces", "add", "notion", "--token", "wrong"],
        "notion",
        "Notion refused the token",
    ),
    "workspaces pause": (["workspaces", "pause", "1"], "unmigrated", "not migrated"),
    "workspaces resume": (["workspaces", "resume", "1"], "unreachable", "database error:"),
    "workspaces remove": (["workspaces", "remove"], "migrated", "the following arguments are required"),
    "workspaces set-budget": (
        ["workspaces", "set-budget", "1", "--per-minute", "fast"],
        "migrated",
        "argument --per-minute: invalid float value",
    ),
    "workspaces set-reconcile": (
        ["workspaces", "set-reconcile", "1", "sideways"],
        "migrated",
        "invalid choice: 'sideways'",
    ),
    "workspaces new-key": (["workspaces", "new-key", "extra"], "none", "unrecognized arguments: extra"),
    "workspaces rotate-key": (["workspaces", "rotate-key"], "unmigrated", "not migrated"),
    "subscriptions add": (
        ["subscriptions", "add", "ftp://nowhere"],
        "migrated",
        "url must be an absolute http(s) URL",
    ),
    "subscriptions list": (["subscriptions", "list"], "unmigrated", "not migrated"),
    "subscriptions show": (["subscriptions", "show", "7"], "migrated", "no subscription 7"),
    "subscriptions rotate": (
        ["subscriptions", "rotate", "7", "--overlap-seconds", "-1"],
        "migrated",
        "overlap must be between 0 and 604800 seconds",
    ),
    "subscriptions disable": (
        ["subscriptions", "disable", "x"],
        "migrated",
        "argument id: invalid int value",
    ),
    "subscriptions enable": (["subscriptions", "enable", "7"], "unreachable", "database error:"),
    "subscriptions replay": (
        ["subscriptions", "replay", "7", "--from", "nonsense"],
        "migrated",
        "start must be 'head', 'oldest' or a feed cursor",
    ),
    "subscriptions remove": (["subscriptions", "remove", "7"], "migrated", "no subscription 7"),
}


def test_the_cases_cover_every_command() -> None:
    assert sorted(CASES) == leaf_commands()


@pytest.mark.slow
def test_every_command_fails_with_one_line_and_no_traceback(
    database_url: str, empty_database: str, tmp_path: Path
) -> None:
    notion = FakeNotion.demo()
    with BackgroundServer(notion.app()) as server:
        envs = {
            "none": clean_env(tmp_path),
            "migrated": clean_env(tmp_path, DATABASE_URL=database_url),
            "unmigrated": clean_env(tmp_path, DATABASE_URL=empty_database),
            "unreachable": clean_env(tmp_path, DATABASE_URL=UNREACHABLE),
            "notion": clean_env(
                tmp_path, DATABASE_URL=database_url, NOTION_BASE_URL=server.url, DEBOUNCE_SECRET_KEY=new_key()
            ),
        }
        with ThreadPoolExecutor(4) as pool:
            done = dict(
                zip(
                    CASES,
                    pool.map(lambda case: run(case[0], envs[case[1]], ROOT), CASES.values()),
                    strict=True,
                )
            )
    failures = []
    for name, (_, _, expected) in CASES.items():
        try:
            line = one_line(done[name])
            assert expected in line, line
        except AssertionError as exc:
            failures.append(f"debounce {name}: {exc}")
    assert not failures, "\n".join(failures)
    # the refused token: the source's answer once, not the SDK's warning on top
    assert "notion_client" not in done["workspaces add"].stderr
    assert tables(empty_database) == []  # nothing migrated it
    assert not (tmp_path / "pgdata").exists()  # no embedded Postgres was started


@pytest.mark.slow
def test_the_procfile_processes_stop_at_once_without_database_url(tmp_path: Path) -> None:
    # A directory where the demo ran: an embedded database and the demo's key.
    (tmp_path / "pgdata").mkdir()
    (tmp_path / "pgdata" / "PG_VERSION").write_text("16\n")
    (tmp_path / "demo-secret.key").write_text(new_key() + "\n")
    env = clean_env(tmp_path)
    commands = [
        [*DEBOUNCE, "worker"],
        [*DEBOUNCE, "migrate"],
        [*DEBOUNCE, "web"],
        [sys.executable, "-m", "uvicorn", "debounce.web:app", "--port", "9"],
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda cmd: subprocess.run(
                    cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30
                ),
                commands,
            )
        )
    for command, done in zip(commands, results, strict=True):
        line = one_line(done)
        assert done.returncode == 2 and line.startswith("configuration error: DATABASE_URL is not set"), (
            command,
            line,
        )
        assert "DEBOUNCE_SECRET_KEY" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "pgdata").iterdir()) == ["PG_VERSION"]


@pytest.mark.slow
def test_commands_run_by_hand_never_migrate(empty_database: str, tmp_path: Path) -> None:
    env = clean_env(tmp_path, DATABASE_URL=empty_database)
    commands = [
        ["jobs"],
        ["stats"],
        ["documents"],
        ["workspaces", "list"],
        ["backfill", "slack", "--no-wait"],
        ["resync", "notion", "p1"],
        ["retry", "1"],
        ["prune"],
        ["notion-token"],
        ["workspaces", "set-reconcile", "1", "on"],
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: run(args, env, tmp_path), commands))
    for args, done in zip(commands, results, strict=True):
        line = one_line(done)
        assert line == (
            f"database schema is not migrated (at version 0 of {REQUIRED}): run `debounce migrate`"
        ), (args, line)
    assert tables(empty_database) == []
    migrated = run(["migrate"], env, tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert run(["jobs"], env, tmp_path).returncode == 0


@pytest.mark.slow
def test_commands_run_by_hand_use_the_embedded_database_serve_made(tmp_path: Path) -> None:
    import pgserver

    env = clean_env(tmp_path)
    assert one_line(run(["documents"], env, tmp_path)) == (
        f"configuration error: DATABASE_URL is not set and there is no embedded database in "
        f"{tmp_path}/ (`debounce serve` creates it; or set DATABASE_URL)"
    )
    server = pgserver.get_server(str(tmp_path / "pgdata"), cleanup_mode="stop")
    try:
        behind = one_line(run(["documents"], env, tmp_path))
        assert behind == (
            f"database schema is not migrated (at version 0 of {REQUIRED}): run "
            f"`debounce serve` (it migrates the embedded database in {tmp_path}/)"
        )
        asyncio.run(migrate(server.get_uri()))
        listed = run(["documents"], env, tmp_path)
        assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    finally:
        server.cleanup()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        yield int(holder.stdout.readline())
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_port_in_use_is_one_line_naming_port_before_anything_starts(
    taken_port: int, database_url: str, tmp_path: Path
) -> None:
    expected = f"port {taken_port} is in use: set PORT or --port"
    runs = [
        (["serve", "--demo", "--port", str(taken_port)], clean_env(tmp_path)),
        (["serve"], clean_env(tmp_path, PORT=str(taken_port))),
        (["web", "--port", str(taken_port)], clean_env(tmp_path, DATABASE_URL=database_url)),
    ]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda r: run(r[0], r[1], tmp_path, timeout=30), runs))
    for (args, _), done in zip(runs, results, strict=True):
        assert one_line(done) == expected, args
        assert done.returncode == 1 and "serving" not in done.stdout + done.stderr
    assert not (tmp_path / "pgdata").exists()  # nothing was started


def test_a_reader_that_goes_away_ends_the_output_quietly(empty_database: str, tmp_path: Path) -> None:
    """``debounce jobs | head -1``: the reader closes the pipe before the command writes; the
    command ends with exit 0 and says nothing (it printed ``error: [Errno 32] Broken pipe``)."""
    asyncio.run(migrate(empty_database))
    env = clean_env(tmp_path, DATABASE_URL=empty_database)
    proc = subprocess.Popen(
        [*DEBOUNCE, "jobs"], env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the command's first line
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, stderr
    assert stderr == ""


@pytest.mark.slow
def test_errors_in_the_users_words(database_url: str, tmp_path: Path) -> None:
    """Issue 42, point 7: the setting named, not libpq's or the SDK's words."""
    notaurl = run(["migrate"], clean_env(tmp_path, DATABASE_URL="notaurl"), tmp_path)
    assert notaurl.returncode == 2
    assert one_line(notaurl).startswith(
        "configuration error: DATABASE_URL is not a Postgres URL "
        "(postgresql://user:password@host:5432/database): "
    )
    refused = run(["migrate"], clean_env(tmp_path, DATABASE_URL=UNREACHABLE), tmp_path)
    assert one_line(refused).startswith(
        "database error: cannot connect to the database at DATABASE_URL: connection to server "
        'at "127.0.0.1", port 1 failed: Connection refused'
    )
    nothing = run(["backfill", "notion"], clean_env(tmp_path, DATABASE_URL=database_url), tmp_path)
    assert one_line(nothing) == (
        "no active notion workspace: set NOTION_TOKEN (its token is the environment's notion "
        "workspace: enough for one), or connect one (debounce workspaces add notion --token …, "
        "or an install flow)"
    )
    missing = run(["send", "notion", "nonexistent.json"], clean_env(tmp_path), tmp_path)
    assert one_line(missing) == "nonexistent.json: cannot read: No such file or directory"
    assert missing.returncode == 1  # said before the unset NOTION_WEBHOOK_SECRET


@pytest.mark.slow
def test_a_worker_that_cannot_reach_the_database_says_so_in_one_line(tmp_path: Path) -> None:
    """docs/deploying.md's alerts table: `worker cannot start: …` naming the cause (libpq's
    reason, not a PoolTimeout), and psycopg's own warnings on one line each."""
    worker = subprocess.Popen(
        [*DEBOUNCE, "worker"],
        env=clean_env(tmp_path, DATABASE_URL=UNREACHABLE),
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert worker.stderr is not None
        for line in worker.stderr:
            lines.append(line)
            if "worker cannot start" in line:
                break
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=30)
    said = [line for line in lines if "worker cannot start" in line]
    assert said, "".join(lines)
    assert (
        said[0]
        .split("ERROR   debounce.worker: ", 1)[1]
        .startswith(
            "worker cannot start: cannot connect to the database at DATABASE_URL: connection to "
            'server at "127.0.0.1", port 1 failed: Connection refused'
        )
    )
    everything = "".join(lines)
    assert "PoolTimeout" not in everything and "\\n" not in everything
    assert "Traceback" not in everything
    assert worker.returncode == 0
