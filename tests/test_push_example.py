"""Issue 40's "done when" for push delivery: a subscription created from the CLI receives
every change of the demo (``debounce serve --demo``) in feed order, verified by the example
receiver (examples/push_receiver.py, run here in a thread on loopback)."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from ports import free_port
from psycopg_pool import AsyncConnectionPool
from test_demo_edits import clean_env, debounce

from debounce.delivery import signing
from debounce.documents import feed

ROOT = Path(__file__).resolve().parent.parent


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "push_receiver_example", ROOT / "examples" / "push_receiver.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def feed_cursors(url: str) -> list[str]:
    async with AsyncConnectionPool(
        url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}
    ) as pool:
        out: list[str] = []
        after = None
        while True:
            page = await feed.read_changes(pool, after, feed.MAX_LIMIT)
            out += [c.cursor.encode() for c in page.changes]
            after = page.next
            if page.at_head:
                return out


def test_example_receiver_refuses_a_wrong_signature_and_applies_a_batch_once() -> None:
    module = example()
    secret = signing.new_secret()
    receiver = module.Receiver(secret)
    body = (
        '{"type":"documents.changed","timestamp":"2026-01-01T00:00:00+00:00","data":'
        '{"changes":[{"op":"upsert","source":"notion","document_id":"d","content_sha256":'
        '"00","cursor":"c1"}],"cursor":"c1"}}'
    )
    headers = signing.headers([secret], "msg_1", body, datetime.now(UTC))
    assert receiver.receive(headers, body.encode()) == 200
    assert receiver.receive(headers, body.encode()) == 200  # a redelivery, applied once
    assert [c["cursor"] for c in receiver.changes] == ["c1"] and receiver.cursor == "c1"
    forged = signing.headers([signing.new_secret()], "msg_2", body, datetime.now(UTC))
    assert receiver.receive(forged, body.encode()) == 401
    assert len(receiver.changes) == 1


@pytest.mark.slow
def test_a_subscription_from_the_cli_receives_every_change_of_the_demo_in_order(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = clean_env(
        DATABASE_URL=database_url, DEBOUNCE_DATA_DIR=str(tmp_path / "data"), PORT=str(free_port())
    )
    added = debounce("subscriptions", "add", f"http://127.0.0.1:{port}/", "--from", "oldest", env=env)
    assert added.returncode == 0, added.stderr
    (secret,) = [line.split(": ", 1)[1] for line in added.stdout.splitlines() if line.startswith("secret: ")]
    module = example()
    receiver = module.Receiver(secret)
    http = module.server(receiver, port)
    threading.Thread(target=http.serve_forever, daemon=True).start()
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
        expected = asyncio.run(feed_cursors(database_url))
        assert len(expected) >= 6, "".join(log)
        deadline = time.monotonic() + 60
        while len(receiver.changes) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.05)  # a real worker delivering over a real socket
        assert [c["cursor"] for c in receiver.changes] == expected
        assert receiver.cursor == expected[-1]
        listed = debounce("subscriptions", "list", env=env)
        assert listed.returncode == 0, listed.stderr
        assert f"lag 0 changes, 0.0 s  delivered {len(expected)}  last answer 200" in listed.stdout, (
            listed.stdout
        )
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
        http.shutdown()
    assert proc.returncode == 0
