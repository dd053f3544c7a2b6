"""Stopping the web process answers every follower long-polling the change feed at once (issue
30, point 6): under the Procfile's ``uvicorn debounce.web:app`` and under ``debounce web``,
SIGTERM ends a ``wait=60`` request with ``{"changes": [], "next": <its cursor>}`` and the
process exits, instead of holding on until the wait runs out."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from ports import free_port
from test_operations import ROOT, clean_env, wait_http

TOKEN = "read-token"


def metric(base: str, name: str) -> float:
    for line in httpx.get(f"{base}/metrics", timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not on /metrics")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["uvicorn", "debounce web"])
def test_sigterm_answers_a_waiting_follower_at_once(command: str, database_url: str, tmp_path: Path) -> None:
    port = free_port()
    args = (
        [sys.executable, "-m", "uvicorn", "debounce.web:app", "--host", "127.0.0.1", "--port", str(port)]
        if command == "uvicorn"
        else [sys.executable, "-m", "debounce", "web", "--host", "127.0.0.1", "--port", str(port)]
    )
    env = clean_env(DATABASE_URL=database_url, DEBOUNCE_READ_TOKEN=TOKEN)
    with open(tmp_path / "web.log", "w") as log:
        web = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            assert wait_http(f"{base}/readyz", until=200).status_code == 200
            headers = {"Authorization": f"Bearer {TOKEN}"}
            head = httpx.get(f"{base}/documents/changes", headers=headers).json()["next"]
            answer: dict[str, Any] = {}

            def follow() -> None:
                # A client timeout well below the 60 s wait: a hang fails the test.
                resp = httpx.get(
                    f"{base}/documents/changes",
                    headers=headers,
                    params={"after": head, "wait": "60"},
                    timeout=20,
                )
                answer["status"], answer["body"] = resp.status_code, resp.json()

            follower = threading.Thread(target=follow)
            follower.start()
            while metric(base, "debounce_feed_waiting_followers") < 1:
                assert follower.is_alive(), answer
            web.send_signal(signal.SIGTERM)
            follower.join(20)
            assert not follower.is_alive(), "the waiting follower was not answered"
            assert answer == {"status": 200, "body": {"changes": [], "next": head}}
            # uvicorn re-raises the signal it captured once it has shut down
            assert web.wait(20) in (0, -signal.SIGTERM)
        finally:
            if web.poll() is None:
                web.kill()
                web.wait()
    text = (tmp_path / "web.log").read_text()
    assert "Traceback" not in text, text
