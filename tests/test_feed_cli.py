"""``debounce documents changes`` in a subprocess: lines, resuming, filters, errors as one
line, ``--follow`` until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from feed_wait import servable
from psycopg_pool import AsyncConnectionPool
from test_cli_errors import DEBOUNCE, ROOT, clean_env, one_line, run

from debounce import workspaces
from debounce.documents import feed
from debounce.documents.store import Document, DocumentStore
from debounce.infra.secrets import Keyring, new_key

THREAD = "C0123ABCD/1732450000.000100"


def doc(document_id: str, content: str, source: str = "notion") -> Document:
    return Document(
        source_type=source,
        document_id=document_id,
        source_page_id=document_id.split("/")[0],
        title="T",
        url=None,
        content=content,
    )


async def test_changes_print_one_line_each_and_the_cursor_to_resume_from(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    store = DocumentStore(pool)
    await store.upsert(doc("page-a", "a"))
    await store.upsert(doc(THREAD, "t", source="slack"))
    await store.mark_deleted("notion", ["page-a"])
    await servable(pool)
    env = clean_env(tmp_path, DATABASE_URL=database_url)
    done = await asyncio.to_thread(run, ["documents", "changes"], env, ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:3] for line in lines[:3]] == [
        ["upsert", "notion", "page-a"],
        ["upsert", "slack", THREAD],
        ["delete", "notion", "page-a"],
    ]
    assert lines[3].startswith("next: debounce documents changes --after ")
    cursor = lines[3].split()[-1]
    await store.upsert(doc("page-b", "b"))
    await servable(pool)
    resumed = await asyncio.to_thread(run, ["documents", "changes", "--after", cursor], env, ROOT)
    assert [line.split()[:3] for line in resumed.stdout.splitlines()[:-1]] == [["upsert", "notion", "page-b"]]
    slack = await asyncio.to_thread(run, ["documents", "changes", "--source", "slack"], env, ROOT)
    assert [line.split()[2] for line in slack.stdout.splitlines()[:-1]] == [THREAD]


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--after", "not-a-cursor"], "malformed cursor", 2),
        (["--after", feed.Cursor("1", 5, 5).encode()], "re-read the documents", 1),
        (["--limit", "0"], "--limit must be between 1 and 1000", 2),
    ],
)
async def test_a_bad_cursor_is_one_line_and_a_non_zero_exit(
    database_url: str, tmp_path: Path, args: list[str], expected: str, code: int
) -> None:
    env = clean_env(tmp_path, DATABASE_URL=database_url)
    done = await asyncio.to_thread(run, ["documents", "changes", *args], env, ROOT)
    assert done.returncode == code
    assert expected in one_line(done)


@pytest.mark.parametrize(
    "args",
    [
        ["documents", "--source", "jira"],
        ["documents", "changes", "--source", "jira"],
        ["documents", "changes", "--follow", "--source", "jira"],
        ["jobs", "--source", "jira"],
    ],
)
async def test_a_source_filter_naming_no_source_is_one_line_naming_the_known_ones(
    database_url: str, tmp_path: Path, args: list[str]
) -> None:
    """Issue 28: the filter matched nothing, so the command printed nothing and exited 0."""
    env = clean_env(tmp_path, DATABASE_URL=database_url)
    done = await asyncio.to_thread(run, args, env, ROOT)
    assert done.returncode == 2
    assert "unknown source 'jira' (known: notion, slack)" in one_line(done)
    assert done.stdout == ""


async def test_a_workspace_filter_naming_no_workspace_is_one_line(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    """Issue 28: ``--workspace 99`` printed nothing and exited 0; a workspace of another source
    than ``--source`` matches nothing either. A removed workspace's changes can still be read."""
    keyring = Keyring(new_key())
    slack = await workspaces.save(
        pool,
        keyring,
        source_type="slack",
        external_id="T0FEED",
        name="Feed team",
        credentials={"access_token": "xoxb-feed"},
    )
    store = DocumentStore(pool)
    await store.upsert(doc(THREAD, "t", source="slack"))
    async with pool.connection() as conn:  # an unfenced store writes no workspace
        await conn.execute(
            "update documents set workspace_id = %s where document_id = %s", (slack["id"], THREAD)
        )  # test-only SQL
    await servable(pool)
    env = clean_env(tmp_path, DATABASE_URL=database_url)
    for args, expected in (
        (["--workspace", "99"], "error: no workspace 99 (`debounce workspaces list` shows the ids)"),
        (["--workspace", "99", "--follow"], "error: no workspace 99"),
        (
            ["--workspace", str(slack["id"]), "--source", "notion"],
            f"error: workspace {slack['id']} is a slack workspace, not notion",
        ),
    ):
        done = await asyncio.to_thread(run, ["documents", "changes", *args], env, ROOT)
        assert done.returncode == 1, (args, done.stderr)
        assert one_line(done).startswith(expected), args
        assert done.stdout == ""
    for filters in (
        ["--workspace", str(slack["id"])],
        ["--workspace", str(slack["id"]), "--source", "slack"],
    ):
        done = await asyncio.to_thread(run, ["documents", "changes", *filters], env, ROOT)
        assert done.returncode == 0, done.stderr
        assert [line.split()[2] for line in done.stdout.splitlines()[:-1]] == [THREAD]
    await workspaces.remove(pool, int(slack["id"]))
    done = await asyncio.to_thread(run, ["documents", "changes", "--workspace", str(slack["id"])], env, ROOT)
    assert done.returncode == 0, done.stderr
    assert [line.split()[2] for line in done.stdout.splitlines()[:-1]] == [THREAD]


async def test_follow_prints_new_changes_until_interrupted(
    pool: AsyncConnectionPool[Any], database_url: str, tmp_path: Path
) -> None:
    store = DocumentStore(pool)
    await store.upsert(doc("first", "1"))
    await servable(pool)
    env = clean_env(tmp_path, DATABASE_URL=database_url)
    proc = await asyncio.create_subprocess_exec(
        *DEBOUNCE,
        "documents",
        "changes",
        "--follow",
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert first.split()[:3] == ["upsert", "notion", "first"]
        await store.upsert(doc("second", "2"))
        second = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert second.split()[:3] == ["upsert", "notion", "second"]
        proc.send_signal(signal.SIGINT)
        err = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
        assert await asyncio.wait_for(proc.wait(), 30) == 130
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "Traceback" not in err
    cursor = err.strip().split()[-1]
    assert feed.Cursor.decode(cursor) == feed.Cursor.decode(second.split("cursor=")[1].strip())
