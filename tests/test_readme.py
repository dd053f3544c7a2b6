"""The "Running it for real" walkthrough, run as written (issue 15; it moved from the README to
docs/deploying.md in issue 28): its shell block is taken from docs/deploying.md itself, with
only the database (a fresh schema of the test server instead of ``createdb``), the port and the
install line adapted to the test machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parent.parent
WALKTHROUGH = ROOT / "docs" / "deploying.md"


def walkthrough() -> list[str]:
    text = WALKTHROUGH.read_text()
    section = text[text.index("## Running it for real") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no shell block in 'Running it for real' of docs/deploying.md"
    return block.group(1).strip().splitlines()


def test_the_walkthrough_is_the_deploying_page_and_the_readme_links_it() -> None:
    lines = walkthrough()
    assert any(line.startswith("honcho start web worker") for line in lines), lines
    assert any("debounce documents" in line for line in lines), lines
    assert "docs/deploying.md" in (ROOT / "README.md").read_text()


def as_url(conninfo: str) -> str:
    """``conninfo`` as a postgresql:// URL (``export DATABASE_URL=…`` takes one word).

    A host that is a directory (the embedded Postgres's socket, as the tests use without
    ``TEST_DATABASE_URL``) goes into the query string: it cannot stand in the URL's host part."""
    from urllib.parse import quote

    params = conninfo_to_dict(conninfo)
    host = str(params.pop("host", "127.0.0.1"))
    port = params.pop("port", "5432")
    user = params.pop("user", "postgres")
    dbname = params.pop("dbname", "postgres")
    password = params.pop("password", "")
    userinfo = f"{quote(str(user), safe='')}" + (f":{quote(str(password), safe='')}" if password else "")
    if host.startswith("/"):
        params["host"] = host
        netloc = f"{userinfo}@:{port}"
    else:
        netloc = f"{userinfo}@{host}:{port}"
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://{netloc}/{dbname}" + (f"?{query}" if query else "")


def test_as_url_keeps_a_socket_directory_and_options() -> None:
    url = as_url("user=postgres dbname=postgres host=/tmp/pg-x options='-c search_path=r_1'")
    assert url == "postgresql://postgres@:5432/postgres?options=-c%20search_path%3Dr_1&host=%2Ftmp%2Fpg-x"
    params = conninfo_to_dict(url)
    assert (params["host"], params["options"], params["dbname"]) == (
        "/tmp/pg-x",
        "-c search_path=r_1",
        "postgres",
    )
    assert as_url("host=127.0.0.1 port=5433 user=u dbname=d") == "postgresql://u@127.0.0.1:5433/d"


@pytest.mark.slow
def test_running_it_for_real_reaches_a_synced_document(empty_database: str, tmp_path: Path) -> None:
    port = free_port()
    lines = []
    for line in walkthrough():
        command = line.split("  #")[0].strip()
        if command.startswith("pip install"):
            continue  # installed already, with the dev extras (honcho among them)
        if command.startswith("createdb"):
            continue  # the fixture made a fresh schema
        command = re.sub(
            r"export DATABASE_URL=\S+", f"export DATABASE_URL='{as_url(empty_database)}'", command
        )
        command = command.replace("PORT=8000", f"PORT={port}")
        lines.append(command)
    script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + "\n".join(lines) + "\n"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBOUNCE_", "NOTION_", "SLACK_", "DATABASE_URL", "PORT"))
    }
    # The walkthrough's commands (`debounce`, `honcho`, `uvicorn`) are the ones installed beside
    # the interpreter running the tests, as in an activated venv, whether or not it is activated.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for name in ("examples", "Procfile"):  # what the walkthrough uses of a checkout
        (tmp_path / name).symlink_to(ROOT / name)
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    listed = [line for line in done.stdout.splitlines() if line.split()[1:2] == ["notion"]]
    assert any("Launch plan" in line for line in listed), done.stdout[-3000:]
