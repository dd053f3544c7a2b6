"""The demo's edits (issue 28, point 7): the stand-ins apply the edit an example webhook
describes (``standins.demo_edits``), ``serve --demo`` shows one edit per source travel to the
documents and the change feed, and ``debounce send … --demo`` edits again and prints the new
change; each edit is new text, so each one writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from ports import free_port

from debounce.cli.send import DEMO_STATE_FILE
from standins.demo_edits import EDIT_PATH, EditCounter, with_edits
from standins.notion_api import DEMO_PAGE_ID, FakeNotion
from standins.notion_demo import DEMO_DATA_SOURCE_ID, DEMO_EDITED_BLOCK_ID, NotionDemoEdits
from standins.slack_api import FakeSlack
from standins.slack_demo import SlackDemoEdits

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CHANNEL = "C2147483705"  # the channel of examples/slack
ROOT_TS = "1763682934.000200"  # the "Hello world" message that message_changed.json edits
SLACK_DOC = f"{CHANNEL}/{ROOT_TS}"
WHEN = datetime(2026, 11, 27, 16, 4, 12, tzinfo=UTC)
HHMMSS = f"{WHEN.astimezone():%H:%M:%S}"  # the edit text shows the local time of day


def example(source: str, name: str) -> bytes:
    return (EXAMPLES / source / name).read_bytes()


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://standin")


async def test_notion_stand_in_edits_the_page_the_example_names() -> None:
    fake = FakeNotion.demo()
    app = with_edits(fake.app(), NotionDemoEdits(fake, EditCounter(lambda: WHEN)).apply)
    auth = {"Authorization": f"Bearer {fake.token}"}
    body = example("notion", "page.content_updated.json")
    async with client_for(app) as standin:
        before = (await standin.get(f"/v1/pages/{DEMO_PAGE_ID}/markdown", headers=auth)).json()
        assert "Hello world\n" in before["markdown"]
        first = await standin.post(EDIT_PATH, content=body)
        assert first.status_code == 200, first.text
        answer = first.json()
        assert answer["text"] == f"Hello world (edit 1, {HHMMSS})"
        assert answer["edited"] == (
            f"edited page 'Launch plan' ({DEMO_PAGE_ID}): 'Hello world' → 'Hello world (edit 1, {HHMMSS})'"
        )
        markdown = (await standin.get(f"/v1/pages/{DEMO_PAGE_ID}/markdown", headers=auth)).json()
        assert f"Hello world (edit 1, {HHMMSS})\n" in markdown["markdown"]
        block = (await standin.get(f"/v1/blocks/{DEMO_EDITED_BLOCK_ID}", headers=auth)).json()
        assert block["paragraph"]["rich_text"][0]["plain_text"] == answer["text"]
        page = (await standin.get(f"/v1/pages/{DEMO_PAGE_ID}", headers=auth)).json()
        assert page["last_edited_time"] == block["last_edited_time"] == "2026-11-27T16:04:12.000Z"
        # The webhook Notion sends for the edit: a new event id, ids and types only.
        webhook, sent = answer["webhook"], json.loads(body)
        assert webhook["id"] != sent["id"] and webhook["timestamp"] == "2026-11-27T16:04:12.000Z"
        assert {k: v for k, v in webhook.items() if k not in ("id", "timestamp", "data")} == {
            k: v for k, v in sent.items() if k not in ("id", "timestamp", "data")
        }
        assert webhook["data"]["updated_blocks"] == [{"id": DEMO_EDITED_BLOCK_ID, "type": "block"}]
        second = (await standin.post(EDIT_PATH, content=body)).json()
        assert second["text"] == f"Hello world (edit 2, {HHMMSS})"
        assert second["webhook"]["id"] not in (sent["id"], webhook["id"])
        created = await standin.post(EDIT_PATH, content=example("notion", "page.created.json"))
        assert created.status_code == 404 and created.json()["error"] == "not_an_edit"
        elsewhere = dict(sent, entity={"id": "0" * 32, "type": "page"})
        missing = await standin.post(EDIT_PATH, json=elsewhere)
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert (await standin.post(EDIT_PATH, content=b"[1]")).status_code == 400
        # The API itself is unchanged behind the edit route.
        assert (await standin.get("/v1/users/me", headers=auth)).json()["object"] == "user"


async def test_slack_stand_in_edits_the_message_the_example_names() -> None:
    fake = FakeSlack.demo(token="xoxb-demo")
    app = with_edits(fake.app(), SlackDemoEdits(fake, EditCounter(lambda: WHEN)).apply)
    body = example("slack", "message_changed.json")
    async with client_for(app) as standin:
        first = await standin.post(EDIT_PATH, content=body)
        assert first.status_code == 200, first.text
        answer = first.json()
        assert answer["text"] == f"Hello world (edit 1, {HHMMSS})"
        replies = (
            await standin.get(
                "/api/conversations.replies", params={"channel": CHANNEL, "ts": ROOT_TS, "token": "xoxb-demo"}
            )
        ).json()
        root = replies["messages"][0]
        assert root["text"] == answer["text"] and root["edited"]["user"] == "U2147483697"
        # The message_changed event Slack sends for the edit.
        webhook, sent = answer["webhook"], json.loads(body)
        assert webhook["event_id"] != sent["event_id"] and webhook["type"] == "event_callback"
        event = webhook["event"]
        assert (event["subtype"], event["channel"]) == ("message_changed", CHANNEL)
        assert event["message"]["text"] == answer["text"]
        assert event["message"]["ts"] == ROOT_TS
        assert event["message"]["edited"] == root["edited"] and event["ts"] == root["edited"]["ts"]
        assert event["previous_message"]["text"] == "Hello world"
        assert webhook["event_time"] == int(root["edited"]["ts"].split(".")[0])
        second = (await standin.post(EDIT_PATH, content=body)).json()
        assert second["text"] == f"Hello world (edit 2, {HHMMSS})"
        assert second["webhook"]["event"]["previous_message"]["text"] == answer["text"]
        plain = await standin.post(EDIT_PATH, content=example("slack", "message.json"))
        assert plain.status_code == 404 and plain.json()["error"] == "not_an_edit"


# -- the demo, end to end ------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without any debounce, source or database setting, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBOUNCE_", "NOTION_", "SLACK_", "DATABASE_URL", "PORT"))
    }
    return {**env, **extra}


@pytest.fixture
def running_demo(database_url: str, tmp_path: Path) -> Iterator[tuple[dict[str, str], list[str]]]:
    """``debounce serve --demo`` running until its tour's last line; its environment (for
    ``debounce`` commands that find it) and its log so far. Stopped at the end."""
    env = clean_env(
        DATABASE_URL=database_url, DEBOUNCE_DATA_DIR=str(tmp_path / "data"), PORT=str(free_port())
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "debounce", "serve", "--demo"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the tour bounds each of its waits (60 s)
            log.append(line)
            if "demo: edit the page again" in line:
                break
        assert (tmp_path / "data" / DEMO_STATE_FILE).exists(), "".join(log)
        yield env, log
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert not (tmp_path / "data" / DEMO_STATE_FILE).exists()  # removed when the demo stops


def debounce(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "debounce", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )


@pytest.mark.slow
def test_demo_edits_reach_the_documents_and_the_feed_and_every_edit_writes(
    running_demo: tuple[dict[str, str], list[str]],
) -> None:
    env, lines = running_demo
    log = "".join(lines)
    # The tour: each source's example edit is made in its stand-in, sent, synced, and seen in
    # the feed with the edited line of its document.
    assert (
        f"demo: the notion stand-in edited page 'Launch plan' ({DEMO_PAGE_ID}): "
        "'Hello world' → 'Hello world (edit 1, "
    ) in log, log
    assert (
        f"demo: the slack stand-in edited message {ROOT_TS} in {CHANNEL}: 'Hello world' → "
        "'Hello world (edit 1, "
    ) in log, log
    assert f"demo: feed: upsert notion/{DEMO_PAGE_ID}  'Hello world (edit 1, " in log, log
    assert f"demo: feed: upsert slack/{SLACK_DOC}  'Hello world (edit 1, " in log, log
    # The data source's table, a row renamed (data_source.content_updated.json), in the feed.
    assert (
        "demo: the notion stand-in renamed row 'Ship webhook debouncing' → 'Ship webhook debouncing (edit 1, "
    ) in log, log
    assert (
        f"demo: feed: upsert notion/{DEMO_DATA_SOURCE_ID}  '| [Ship webhook debouncing (edit 1, "
    ) in log, log
    assert "demo: the examples' 8 jobs: 8 completed; " in log, log
    # The first run says what it does (issue 42, point 6): the README's claimed line, the
    # synced line naming the document it wrote, every sent line naming what it sent.
    assert "claimed job " in log and f"(notion {DEMO_PAGE_ID}: 5 events, its window ended)" in log, log
    assert "synced in " in log and f"(1 written: 'Launch plan' (notion/{DEMO_PAGE_ID}), 0 unchanged" in log, (
        log
    )
    posted = [x.split("demo: sent ", 1)[1].split(" → ")[0] for x in lines if "demo: sent " in x]
    assert posted and all(
        x.startswith("examples/") or "built by the stand-in, no file" in x for x in posted
    ), posted
    assert "examples/notion/page.created.json" in posted
    assert (
        "a slack message event of the second workspace, Debounce Labs (T07LABS42; built by "
        "the stand-in, no file)"
    ) in posted
    assert "did not reach the feed" not in log
    port = env["PORT"]
    assert (
        f"demo: consumers read the documents and the change feed with the read token "
        f"'demo-read-token' (the demo's; DEBOUNCE_READ_TOKEN sets another): curl -H "
        f"'Authorization: Bearer demo-read-token' http://127.0.0.1:{port}/documents/changes"
    ) in log, log
    assert (
        lines[-1]
        .rstrip()
        .endswith(
            "demo: edit the page again and see the change arrive: `debounce send notion "
            "examples/notion/page.content_updated.json --demo` (with DEBOUNCE_DATA_DIR="
            f"{env['DEBOUNCE_DATA_DIR']}); then `debounce documents changes` lists the feed"
        )
    )

    # the environment's Slack workspace learned its source id, though its budget ran out
    # (before anything else syncs it: asked again once the budget refills)
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        deadline = time.monotonic() + 30
        while True:
            row = conn.execute(
                "select external_id from workspaces where origin = 'env' and source_type = 'slack'"
            ).fetchone()
            if (row is not None and row[0] is not None) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert row is not None and row[0] is not None, "the Slack environment workspace is unlearned"

    # `debounce send … --demo` finds the demo (no --url, no secret), edits, waits, prints.
    sent: dict[str, str] = {}
    for source, name, document in (
        ("notion", "page.content_updated.json", DEMO_PAGE_ID),
        ("slack", "message_changed.json", SLACK_DOC),
    ):
        for count in (2, 3):  # every edit is new text, so every one writes
            done = debounce("send", source, f"examples/{source}/{name}", "--demo", env=env)
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert f"'Hello world (edit {count - 1}, " in done.stdout, done.stdout
            assert '"outcome":"created"' in done.stdout, done.stdout
            (change,) = [x for x in done.stdout.splitlines() if x.startswith("feed: ")]
            assert change.startswith(f"feed: upsert {source}/{document}  'Hello world (edit {count}, "), (
                done.stdout
            )
            sent[source] = change.split("'")[1]
    reader = {"Authorization": "Bearer demo-read-token"}
    base = f"http://127.0.0.1:{port}"
    # The demo page's PDF and spreadsheet (made at start by pypdf and openpyxl, served as
    # Notion-hosted files): documents of their text, hanging off the page (issue 39).
    for document, title, first in (
        ("file:/s3/demo/launch-brief.pdf", "launch-brief.pdf", "Launch brief"),
        ("file:/s3/demo/launch-budget.xlsx", "launch-budget.xlsx", "## Budget"),
    ):
        assert (
            f"demo: file document notion/{document} '{title}' (extracted, from notion/{DEMO_PAGE_ID}): "
            f"'{first}'"
        ) in log, log
    pdf = httpx.get(f"{base}/documents/notion/file:/s3/demo/launch-brief.pdf", headers=reader, timeout=10)
    assert "Public launch on 2026-12-03." in pdf.json()["document"]["content"], pdf.text
    sheet = httpx.get(f"{base}/documents/notion/file:/s3/demo/launch-budget.xlsx", headers=reader, timeout=10)
    assert "| Launch event | 3500 |" in sheet.json()["document"]["content"], sheet.text
    for source, document in (("notion", DEMO_PAGE_ID), ("slack", SLACK_DOC)):
        got = httpx.get(f"{base}/documents/{source}/{document}", headers=reader, timeout=10)
        assert sent[source] in got.json()["document"]["content"], got.text
    refused = httpx.get(f"{base}/documents/changes", timeout=10)
    assert refused.status_code == 401 and refused.json()["detail"] == (
        "missing or wrong token: reads take the read token (DEBOUNCE_READ_TOKEN) or the admin "
        "token (DEBOUNCE_ADMIN_TOKEN) as 'Authorization: Bearer <token>'"
    )
    changes = debounce("documents", "changes", env=env)
    assert changes.returncode == 0, changes.stderr
    ours = [
        x
        for x in changes.stdout.splitlines()
        if x.startswith("upsert") and (DEMO_PAGE_ID in x or SLACK_DOC in x)
    ]
    # each source: its first sync, the tour's edit and the two edits sent here, at least
    assert sum(DEMO_PAGE_ID in x for x in ours) >= 4 and sum(SLACK_DOC in x for x in ours) >= 4


@pytest.mark.slow
def test_a_second_demo_in_the_same_directory_refuses_and_its_hint_works(
    running_demo: tuple[dict[str, str], list[str]], tmp_path: Path
) -> None:
    """Issue 42, point 5: one demo per data directory. The second says so in one line, before
    it binds or writes anything, and leaves the first's state alone; the command its hint
    gives starts a demo of its own."""
    env, _ = running_demo
    state = Path(env["DEBOUNCE_DATA_DIR"]) / DEMO_STATE_FILE
    before = state.read_text()
    second = debounce("serve", "--demo", env={**env, "PORT": str(free_port())})
    assert second.returncode == 1 and "Traceback" not in second.stderr
    (line,) = [x for x in second.stderr.splitlines() if x.strip()]
    first_url = f"http://127.0.0.1:{env['PORT']}"
    prefix = (
        f"a demo is already running in {env['DEBOUNCE_DATA_DIR']}/ at {first_url}: use it, "
        "stop it, or start another with its own data: "
    )
    assert line.startswith(prefix), line
    hint = line.removeprefix(prefix)
    assert hint.startswith(f"env -u DATABASE_URL DEBOUNCE_DATA_DIR={env['DEBOUNCE_DATA_DIR']}-2 PORT="), hint
    assert hint.endswith(" debounce serve --demo")
    assert state.read_text() == before  # the first's state, untouched
    assert httpx.get(f"{first_url}/readyz", timeout=10).status_code == 200
    # the hint, as a person would paste it (in a shell whose PATH has the venv's debounce)
    path = f"{Path(sys.executable).parent}:{env['PATH']}"
    other = subprocess.Popen(
        ["bash", "-c", hint],
        env={**env, "PATH": path},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said: list[str] = []
    try:
        assert other.stdout is not None
        for out in other.stdout:
            said.append(out)
            if "demo: dashboard at" in out:
                break
    finally:
        other.send_signal(signal.SIGTERM)
        other.communicate(timeout=60)
    port = hint.split("PORT=")[1].split()[0]
    assert f"demo: dashboard at http://127.0.0.1:{port}/admin/" in "".join(said), "".join(said)
    assert f"{env['DEBOUNCE_DATA_DIR']}-2/pgdata" in "".join(said)  # its own embedded database
    assert state.read_text() == before


async def test_a_demo_stopped_early_does_not_say_an_edit_timed_out(
    pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 42, point 6: Ctrl-C during the tour's wait for the feed is said as such, not as
    'did not reach the feed within 60 s' (which it said after about 20 s)."""
    import logging
    from types import SimpleNamespace

    from debounce.cli.demo import DEMO_WAIT_SECONDS, _log_edits_in_feed
    from debounce.documents import feed

    stopped = SimpleNamespace(should_exit=True)
    with caplog.at_level(logging.INFO, logger="debounce.cli"):
        await _log_edits_in_feed(pool, stopped, await feed.head(pool), [("notion", "edit 1")])  # type: ignore[arg-type]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["demo: stopped before the notion edit 'edit 1' reached the feed"]
    assert DEMO_WAIT_SECONDS == 60
