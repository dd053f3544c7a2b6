"""The workspaces commands and the demo as a newcomer runs them (issue 20, items 4, 7, 8, 9,
11, 12): every command a subprocess (``python -m debounce``) in an environment without any
debounce setting, against a test schema and the sources' stand-ins."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ports import free_port
from psycopg_pool import AsyncConnectionPool

from debounce import workspaces
from debounce.infra.secrets import Keyring, SecretKeyError, new_key
from standins import notion_demo, slack_demo
from standins.notion_api import FakeNotion
from standins.server import BackgroundServer
from standins.slack_api import FakeSlack

ROOT = Path(__file__).resolve().parent.parent


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without any debounce, source or database setting, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBOUNCE_", "NOTION_", "SLACK_", "DATABASE_URL"))
    }
    return {**env, **extra}


def debounce(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debounce", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
    )


def one_line_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The one line a refused command printed on stderr (asserting its shape)."""
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def stored(database_url: str) -> dict[str, bytes]:
    """``{external id: encrypted credentials}`` of every workspace with stored credentials."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select external_id, credentials from workspaces "  # test-only SQL
            "where credentials is not null"
        ).fetchall()
    return {str(r[0]): bytes(r[1]) for r in rows}


def save(database_url: str, key: str, source_type: str, external_id: str, name: str) -> int:
    """A workspace stored as an install would (the test's setup, not what is tested)."""

    async def go() -> int:
        async with AsyncConnectionPool(database_url, kwargs={"autocommit": True}, open=False) as pool:
            row = await workspaces.save(
                pool,
                Keyring(key),
                source_type=source_type,
                external_id=external_id,
                name=name,
                credentials={"access_token": f"tok-{external_id}"},
            )
            return int(row["id"])

    return asyncio.run(go())


@pytest.fixture
def apis() -> Iterator[dict[str, str]]:
    """The Notion and Slack stand-ins with their demo content: the variables that point
    debounce at them (the first workspace's tokens not included)."""
    with (
        BackgroundServer(FakeNotion.demo().app()) as notion,
        BackgroundServer(FakeSlack.demo(token="xoxb-first").app()) as slack,
    ):
        yield {"NOTION_BASE_URL": notion.url, "SLACK_API_URL": slack.url + "/api/"}


# -- item 4: rotate-key ------------------------------------------------------------------------


@pytest.mark.slow
def test_rotate_key_re_encrypts_every_token_so_the_old_key_can_go(
    database_url: str, apis: dict[str, str]
) -> None:
    old, new = new_key(), new_key()
    env = clean_env(DATABASE_URL=database_url, DEBOUNCE_SECRET_KEY=old, **apis)
    for source, token in (("notion", notion_demo.DEMO_SECOND_TOKEN), ("slack", slack_demo.DEMO_SECOND_TOKEN)):
        added = debounce("workspaces", "add", source, "--token", token, env=env)
        assert added.returncode == 0, added.stderr
    before = stored(database_url)
    assert set(before) == {notion_demo.DEMO_SECOND_WORKSPACE_ID, slack_demo.DEMO_SECOND_TEAM_ID}

    rotated = debounce("workspaces", "rotate-key", env={**env, "DEBOUNCE_SECRET_KEY": f"{new},{old}"})
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.startswith(
        "re-encrypted 2 stored credentials with the first key of DEBOUNCE_SECRET_KEY (2 keys given)"
    ), rotated.stdout

    only_new = {**env, "DEBOUNCE_SECRET_KEY": new}
    listed = debounce("workspaces", "list", env=only_new)
    assert listed.returncode == 0 and "DEBOUNCE_SECRET_KEY" not in listed.stderr, listed.stderr
    assert slack_demo.DEMO_SECOND_TEAM_ID in listed.stdout
    after = stored(database_url)
    tokens = {ext: Keyring(new).decrypt(blob)["access_token"] for ext, blob in after.items()}
    assert tokens == {
        notion_demo.DEMO_SECOND_WORKSPACE_ID: notion_demo.DEMO_SECOND_TOKEN,
        slack_demo.DEMO_SECOND_TEAM_ID: slack_demo.DEMO_SECOND_TOKEN,
    }
    for blob in before.values():  # what was stored before needed the old key
        with pytest.raises(SecretKeyError):
            Keyring(new).decrypt(blob)
    for blob in after.values():  # and what is stored now no longer does
        with pytest.raises(SecretKeyError):
            Keyring(old).decrypt(blob)


@pytest.mark.slow
def test_rotate_key_with_a_key_that_decrypts_nothing_changes_nothing(database_url: str) -> None:
    key = new_key()
    save(database_url, key, "slack", "T1", "one")
    save(database_url, new_key(), "slack", "T2", "two")  # a key since lost
    before = stored(database_url)
    env = clean_env(DATABASE_URL=database_url)
    line = one_line_error(debounce("workspaces", "rotate-key", env=env), 2)
    assert line.startswith("configuration error: DEBOUNCE_SECRET_KEY is not set")
    wrong = debounce("workspaces", "rotate-key", env={**env, "DEBOUNCE_SECRET_KEY": f"{new_key()},{key}"})
    assert one_line_error(wrong, 2) == (
        "configuration error: a stored credential does not decrypt with any key of "
        "DEBOUNCE_SECRET_KEY (put the key that encrypted it after the new one): nothing "
        "re-encrypted"
    )
    assert stored(database_url) == before  # one transaction: T1 was not re-encrypted either


# -- item 7: the environment's own token -------------------------------------------------------


@pytest.mark.slow
def test_adding_the_environments_own_token_is_refused_and_stores_nothing(
    database_url: str, apis: dict[str, str]
) -> None:
    env = clean_env(
        DATABASE_URL=database_url, DEBOUNCE_SECRET_KEY=new_key(), NOTION_TOKEN=notion_demo.DEMO_TOKEN, **apis
    )
    refused = debounce("workspaces", "add", "notion", "--token", notion_demo.DEMO_TOKEN, env=env)
    assert one_line_error(refused, 1) == (
        "this token is NOTION_TOKEN: it already defines the environment's notion workspace 1 "
        "(`debounce workspaces list`); nothing stored"
    )
    # The same from a shell without NOTION_TOKEN (the web and worker have it): the workspace
    # it registered knows the token by its fingerprint.
    without = {k: v for k, v in env.items() if k != "NOTION_TOKEN"}
    again = debounce("workspaces", "add", "notion", "--token", notion_demo.DEMO_TOKEN, env=without)
    assert "it already defines the environment's notion workspace 1" in one_line_error(again, 1)
    assert stored(database_url) == {}
    listed = debounce("workspaces", "list", env=without)
    (row,) = [line for line in listed.stdout.splitlines() if line.lstrip().startswith("1 ")]
    assert " env " in row and " cli " not in row
    # Another workspace's token is still connected as before.
    other = debounce("workspaces", "add", "notion", "--token", notion_demo.DEMO_SECOND_TOKEN, env=without)
    assert other.returncode == 0 and other.stdout.startswith(
        "connected workspace 2: notion " + notion_demo.DEMO_SECOND_WORKSPACE_ID
    )


def test_backfill_registers_the_environments_workspace_before_any_worker_ran(database_url: str) -> None:
    """Issue 28: `debounce backfill notion` right after the first start answered "no active
    notion workspace" although NOTION_TOKEN was set: the command registers the environment's
    workspace as the worker and the web do when they start."""
    env = clean_env(DATABASE_URL=database_url)
    assert "no active notion workspace: set NOTION_TOKEN" in one_line_error(
        debounce("backfill", "notion", "--no-wait", env=env), 1
    )
    env["NOTION_TOKEN"] = notion_demo.DEMO_TOKEN
    done = debounce("backfill", "notion", "--no-wait", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "backfill of workspace 1 (notion (environment)): started\n"
    again = debounce("backfill", "notion", "--no-wait", env=env)
    assert again.stdout == "backfill of workspace 1 (notion (environment)): already running (backfill)\n"
    listed = debounce("workspaces", "list", env=env)
    (row,) = [line for line in listed.stdout.splitlines() if line.lstrip().startswith("1 ")]
    assert " env " in row


# -- item 8: keeping the key -------------------------------------------------------------------


def test_new_key_prints_the_key_and_says_to_keep_it(tmp_path: Path) -> None:
    done = debounce("workspaces", "new-key", env=clean_env(), cwd=tmp_path)
    assert done.returncode == 0
    Keyring(done.stdout.strip())  # one valid key, alone on stdout
    assert done.stderr.startswith("keep this key: only it decrypts the tokens stored with it")
    assert len(done.stderr.strip().splitlines()) == 1


def test_new_key_appends_to_a_file_refuses_a_second_key_and_rotates_on_request(tmp_path: Path) -> None:
    env, path = clean_env(), tmp_path / ".env"
    path.write_text("PORT=8000")  # the user's file, no final newline, world-readable
    path.chmod(0o644)
    done = debounce("workspaces", "new-key", "--append-to", ".env", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "DEBOUNCE_SECRET_KEY appended to .env (mode 0600). Keep that file: only this key "
        "decrypts the tokens stored with it.",
        "Restart web and worker with it (`honcho start` reads ./.env), and set it in this shell "
        "for `debounce workspaces add`: set -a && . ./.env && set +a",
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_text().splitlines()
    assert lines[0] == "PORT=8000" and lines[1].startswith("DEBOUNCE_SECRET_KEY=")
    first = lines[1].split("=", 1)[1]
    Keyring(first)
    sourced = subprocess.run(
        ["sh", "-c", 'set -a && . ./.env && set +a && printf %s "$DEBOUNCE_SECRET_KEY"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert sourced.stdout == first

    refused = debounce("workspaces", "new-key", "--append-to", ".env", env=env, cwd=tmp_path)
    assert one_line_error(refused, 1).startswith(
        ".env already has a DEBOUNCE_SECRET_KEY line (its key decrypts the tokens stored with "
        "it): nothing written"
    )
    assert path.read_text().splitlines() == lines

    rotated = debounce("workspaces", "new-key", "--append-to", ".env", "--rotate", env=env, cwd=tmp_path)
    assert rotated.returncode == 0, rotated.stderr
    assert "run `debounce workspaces rotate-key`" in rotated.stdout
    now = path.read_text().splitlines()
    assert now[0] == "PORT=8000" and len(now) == 2
    second, kept = now[1].split("=", 1)[1].split(",")
    assert kept == first and second != first
    Keyring(f"{second},{kept}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert one_line_error(debounce("workspaces", "new-key", "--rotate", env=env, cwd=tmp_path), 2).startswith(
        "--rotate needs --append-to FILE"
    )


# -- item 9: the demo's tokens and dashboard ---------------------------------------------------


@pytest.mark.slow
def test_standins_print_every_demo_workspaces_token_and_stay_sourceable(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "debounce", "standins"],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("# the stand-ins run until Ctrl-C"):
                break
        (tmp_path / "standins.env").write_text("".join(lines))
        sourced = subprocess.run(
            ["sh", "-c", '. ./standins.env && printf \'%s %s\' "$NOTION_TOKEN" "$SLACK_BOT_TOKEN"'],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=clean_env(),
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert sourced.returncode == 0 and sourced.stderr == "", sourced.stderr
    assert sourced.stdout.split() == [notion_demo.DEMO_TOKEN, "xoxb-debounce-demo"]
    text = "".join(lines)
    assert (
        f"# another notion workspace, Debounce Labs ({notion_demo.DEMO_SECOND_WORKSPACE_ID}): "
        f"debounce workspaces add notion --token {notion_demo.DEMO_SECOND_TOKEN}\n"
    ) in text
    assert (
        f"# another slack workspace, Debounce Labs ({slack_demo.DEMO_SECOND_TEAM_ID}): "
        f"debounce workspaces add slack --token {slack_demo.DEMO_SECOND_TOKEN}\n"
    ) in text


def serve_demo(database_url: str, data_dir: Path) -> str:
    """Run ``serve --demo`` until its tour's closing line, then stop it; its log."""
    env = clean_env(DATABASE_URL=database_url, DEBOUNCE_DATA_DIR=str(data_dir))
    proc = subprocess.Popen(
        [sys.executable, "-m", "debounce", "serve", "--demo", "--port", str(free_port())],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log: list[str] = []
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if "documents in the `documents` table" in line or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(log) + rest
    return "".join(log)


@pytest.mark.slow
def test_serve_demo_says_how_to_sign_in_and_a_second_run_syncs_again(
    database_url: str, tmp_path: Path
) -> None:
    first = serve_demo(database_url, tmp_path / "data")
    assert "documents in the `documents` table" in first, first
    (line,) = [x for x in first.splitlines() if "demo: dashboard at " in x]
    assert line.split("demo: ", 1)[1].startswith("dashboard at http://127.0.0.1:")
    assert line.endswith(
        "/admin/ — sign in with the admin token 'demo-admin-token' (the "
        "demo's; DEBOUNCE_ADMIN_TOKEN sets another)"
    )
    assert '"outcome":"created"' in first

    second = serve_demo(database_url, tmp_path / "data")
    assert "documents in the `documents` table" in second, second
    outcomes = [x for x in second.splitlines() if "demo: sent " in x]
    # (13: the canvas example, file_change.json, issue 39)
    assert len(outcomes) == 13 and not [x for x in outcomes if '"duplicate"' in x], outcomes
    (closing,) = [x for x in second.splitlines() if "documents in the `documents` table" in x]
    assert "demo: the examples' 8 jobs: 8 completed; " in closing, closing
    # the stand-ins start afresh: the first edit of this run writes again
    assert "demo: feed: upsert notion/153104cd-477e-809d-8dc4-ff2d96ae3090  'Hello world (edit 1, " in second
    assert "synced in" in second  # the worker synced them again (unchanged pages: not rewritten)


# -- item 11: ids ------------------------------------------------------------------------------


@pytest.mark.slow
def test_workspace_commands_take_the_id_or_the_sources_id(database_url: str) -> None:
    key = new_key()
    notion_id = save(database_url, key, "notion", notion_demo.DEMO_SECOND_WORKSPACE_ID, "Labs")
    slack_id = save(database_url, key, "slack", slack_demo.DEMO_SECOND_TEAM_ID, "Labs")
    env = clean_env(DATABASE_URL=database_url)

    done = debounce(
        "workspaces",
        "set-budget",
        slack_demo.DEMO_SECOND_TEAM_ID,
        "--per-minute",
        "30",
        "--burst",
        "5",
        env=env,
    )
    assert done.stdout == (
        f"workspace {slack_id} (slack {slack_demo.DEMO_SECOND_TEAM_ID}): "
        "budget 30/min +5 (set for this workspace)\n"
    ), done.stderr
    listed = debounce("workspaces", "list", env=env).stdout.splitlines()
    assert "30/min +5*" in next(x for x in listed if slack_demo.DEMO_SECOND_TEAM_ID in x)
    assert listed[-2:] == [
        "pause, resume, remove, set-budget and set-reconcile take the id or the workspace column",
        "budget *: set for this workspace (`set-budget ID --default`: the source's again)",
    ]
    done = debounce("workspaces", "set-budget", str(slack_id), "--default", env=env)
    assert done.stdout.endswith("budget 45/min +5 (the source's default)\n"), done.stderr

    undashed = notion_demo.DEMO_SECOND_WORKSPACE_ID.replace("-", "").upper()
    done = debounce("workspaces", "pause", undashed, env=env)
    assert done.stdout == (
        f"workspace {notion_id} (notion {notion_demo.DEMO_SECOND_WORKSPACE_ID}) is paused\n"
    ), done.stderr
    assert debounce("workspaces", "resume", str(notion_id), env=env).stdout.endswith("is active\n")
    done = debounce("workspaces", "set-reconcile", slack_demo.DEMO_SECOND_TEAM_ID, "on", env=env)
    assert done.stdout == (
        f"workspace {slack_id} (slack {slack_demo.DEMO_SECOND_TEAM_ID}): reconciliation on\n"
    ), done.stderr

    shared = [save(database_url, key, source, "SHARED1", source) for source in ("notion", "slack")]
    line = one_line_error(debounce("workspaces", "pause", "SHARED1", env=env), 1)
    assert line == (
        f"'SHARED1' is more than one workspace: {shared[0]} (notion notion), "
        f"{shared[1]} (slack slack); give the numeric id"
    )
    assert one_line_error(debounce("workspaces", "remove", "T0NOPE", env=env), 1) == (
        "no workspace 'T0NOPE' (`debounce workspaces list` shows the id and the workspace column)"
    )
    done = debounce("workspaces", "remove", slack_demo.DEMO_SECOND_TEAM_ID, env=env)
    assert done.stdout.startswith(f"removed workspace {slack_id} (slack "), done.stderr


@pytest.mark.slow
def test_documents_id_takes_the_page_id_or_the_numeric_id(database_url: str) -> None:
    page = notion_demo.DEMO_PAGE_ID

    def insert(source: str, document_id: str, title: str) -> Any:
        with psycopg.connect(database_url) as conn:
            row = conn.execute(  # test-only SQL: documents as a sync writes them
                "insert into documents (source_type, document_id, source_page_id, title, "
                "content, content_sha256) values (%s, %s, %s, %s, %s, 'x') returning id",
                (source, document_id, document_id, title, f"{title} body"),
            ).fetchone()
            assert row is not None
            return row[0]

    row_id = insert("notion", page, "Launch plan")
    env = clean_env(DATABASE_URL=database_url)
    listed = debounce("documents", env=env).stdout.splitlines()
    assert listed[0].split()[:3] == ["id", "source", "document"]
    assert listed[1].split()[:3] == [str(row_id), "notion", page]
    for ref in (str(row_id), page, page.replace("-", "")):
        done = debounce("documents", "--id", ref, env=env)
        assert done.returncode == 0 and done.stdout.startswith("# Launch plan\n"), (ref, done.stderr)
    other = insert("slack", str(row_id), "Numbered")  # a page id that is also a numeric id
    line = one_line_error(debounce("documents", "--id", str(row_id), env=env), 1)
    assert line == (
        f"'{row_id}' names more than one document: {row_id} (notion {page}), "
        f"{other} (slack {row_id}); name the one you mean by its other id"
    )
    assert one_line_error(debounce("documents", "--id", "999999", env=env), 1) == (
        "no document '999999' (`debounce documents` lists the ids)"
    )


def test_resync_of_a_page_never_synced_takes_the_workspace_named(database_url: str) -> None:
    """A page debounce has no document of: ``--workspace`` (the source's id) names whose token
    reads it; without it the job has no workspace (the environment's token)."""
    key = new_key()
    slack_id = save(database_url, key, "slack", slack_demo.DEMO_SECOND_TEAM_ID, "Labs")
    env = clean_env(DATABASE_URL=database_url)
    done = debounce("resync", "slack", "C0NEVERSEEN", "--workspace", slack_demo.DEMO_SECOND_TEAM_ID, env=env)
    assert done.returncode == 0, done.stderr
    assert '"workspace_id": ' + str(slack_id) in done.stdout
    done = debounce("resync", "slack", "C0OTHER", env=env)
    assert done.returncode == 0 and '"workspace_id": null' in done.stdout, done.stderr
    assert one_line_error(
        debounce(
            "resync",
            "notion",
            "59833787-2cf9-4fdf-8782-e53db20768a5",
            "--workspace",
            slack_demo.DEMO_SECOND_TEAM_ID,
            env=env,
        ),
        1,
    ) == (
        f"no notion workspace {slack_demo.DEMO_SECOND_TEAM_ID} (`debounce workspaces list` shows "
        "the id and the workspace column)"
    )
    assert one_line_error(debounce("resync", "notion", "../../etc", env=env), 2) == (
        "page_id '../../etc' is not a notion page id: one is a UUID, with or without dashes "
        "(e.g. 59833787-2cf9-4fdf-8782-e53db20768a5)"
    )


def test_workspaces_list_shows_the_scopes_a_token_lacks_until_a_reinstall(database_url: str) -> None:
    key = new_key()
    slack_id = save(database_url, key, "slack", slack_demo.DEMO_SECOND_TEAM_ID, "Labs")

    async def mark() -> None:
        async with AsyncConnectionPool(database_url, kwargs={"autocommit": True}, open=False) as pool:
            await workspaces.add_missing_scope(pool, slack_id, "canvases:read")

    asyncio.run(mark())
    env = clean_env(DATABASE_URL=database_url)
    listed = debounce("workspaces", "list", env=env).stdout
    assert (
        "      missing scopes: canvases:read (add them to the app and reinstall it; what needs them "
        "fails until then)\n"
    ) in listed
    save(database_url, key, "slack", slack_demo.DEMO_SECOND_TEAM_ID, "Labs")  # the re-install
    assert "missing scopes" not in debounce("workspaces", "list", env=env).stdout
