"""What a platform builds and runs (issue 42): the lock files agree with pyproject.toml
(scripts/lock.py, CI's scripts/check-lock), the Python pin, the Dockerfile (no container
runtime here: parsed, its user and commands checked against the Procfile), and the Procfile's
web trusting a router's forwarded headers from a second loopback address."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from ports import free_port
from test_operations import ROOT, clean_env, wait_http

ADMIN = "deploy-admin-token"


def lock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock", ROOT / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def test_the_committed_lock_files_agree_with_pyproject() -> None:
    lock = lock_module()
    assert lock.problems(ROOT) == []
    result = subprocess.run(
        [str(ROOT / "scripts" / "check-lock")], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "packages pinned" in result.stdout


def _copy(tmp_path: Path) -> Path:
    for name in ("pyproject.toml", "requirements.lock", "requirements.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_a_dependency_added_without_relocking_is_named(tmp_path: Path) -> None:
    lock = lock_module()
    root = _copy(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('"tqdm>=4.66",', '"tqdm>=4.66",\n    "rich>=13",'))
    found = lock.problems(root)
    assert any("not compiled from pyproject.toml" in p for p in found), found
    assert any("does not pin rich" in p for p in found), found


def test_a_version_outside_the_range_an_unhashed_pin_and_a_stale_txt_are_named(tmp_path: Path) -> None:
    lock = lock_module()
    root = _copy(tmp_path)
    text = (root / "requirements.lock").read_text()
    pinned = lock.pins(text)["orjson"]
    text = text.replace(f"orjson=={pinned}", "orjson==3.0")
    # the first pin's hashes dropped
    first = text.index("\n", text.index("==")) + 1
    end = text.index("\n", text.index("# via", first))
    text = text[: text.index("==")].rsplit("\n", 1)[0] + "\nsix==1.0\n" + text[end + 1 :]
    (root / "requirements.lock").write_text(text)
    found = lock.problems(root)
    assert any("orjson==3.0, outside" in p for p in found), found
    assert any("six==1.0 without a hash" in p for p in found), found
    assert any("requirements.txt is not derived" in p for p in found), found


def test_the_python_pin_is_the_lock_s() -> None:
    assert (ROOT / ".python-version").read_text().strip() == lock_module().PYTHON
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_the_dockerfile_builds_from_the_lock_and_runs_the_procfile_as_a_non_root_user() -> None:
    """No container runtime runs here: the Dockerfile's instructions, checked."""
    instructions = []
    for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            instructions.append((word.upper(), rest.strip()))
    stages = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    assert len(stages) == 2, "a build stage and a runtime stage"
    build, final = instructions[stages[0] : stages[1]], instructions[stages[1] :]
    python = lock_module().PYTHON
    assert all(rest.startswith(f"python:{python}-") for word, rest in instructions if word == "FROM")
    runs = " ".join(rest for word, rest in build if word == "RUN")
    assert "--require-hashes --no-deps -r requirements.lock" in runs
    assert "pip install --no-deps ." in runs
    # what the wheel carries (pyproject's force-include) is copied in before it is built
    copied = " ".join(rest for word, rest in build if word == "COPY")
    for path in ("debounce", "integrations", "standins", "sql", "examples", "README.md"):
        assert path in copied
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(word == "RUN" and "useradd" in rest and users[-1] in rest for word, rest in final)
    cmd = [rest for word, rest in final if word == "CMD"][-1]
    import json

    argv = json.loads(cmd)
    assert argv[:2] == ["sh", "-c"]
    assert argv[2] == "exec " + procfile()["web"]
    header = (ROOT / "Dockerfile").read_text()
    for process in ("worker", "release"):
        assert f"docker run IMAGE {procfile()[process]}" in header
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".debounce" in ignored


def _get(base: str, path: str, **headers: str) -> httpx.Response:
    # From 127.0.0.2: not the loopback address uvicorn trusts by default, as a router is not.
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.get(base + path, headers=headers)


def _start_web(database_url: str, port: int, log: Path, **extra: str) -> subprocess.Popen[bytes]:
    env = clean_env(DATABASE_URL=database_url, DEBOUNCE_ADMIN_TOKEN=ADMIN, PORT=str(port), **extra)
    if "FORWARDED_ALLOW_IPS" not in extra:
        env.pop("FORWARDED_ALLOW_IPS", None)
    with log.open("w") as out:
        return subprocess.Popen(
            ["bash", "-c", procfile()["web"]],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=20)


@pytest.mark.slow
def test_the_procfile_web_trusts_the_routers_forwarded_https(database_url: str, tmp_path: Path) -> None:
    """The Procfile's web line, word for word under bash as a platform runs it: a request the
    router forwarded over HTTPS is redirected to https:// and gets a Secure session cookie;
    with FORWARDED_ALLOW_IPS naming another address, the same request is plain HTTP."""
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    port = free_port()
    web = _start_web(database_url, port, tmp_path / "web.log")
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_http(f"{base}/readyz", until=200).status_code == 200
        redirect = _get(base, "/admin/", **forwarded)
        assert redirect.status_code == 303
        assert redirect.headers["location"].startswith(f"https://127.0.0.1:{port}/admin/login")
        form = _get(base, "/admin/login", **forwarded)
        assert form.status_code == 200
        cookie = form.headers["set-cookie"]
        assert "secure" in cookie.lower()
        # the same request straight from a client (no router): plain HTTP
        plain = _get(base, "/admin/")
        assert plain.headers["location"].startswith("http://")
        assert "secure" not in _get(base, "/admin/login").headers["set-cookie"].lower()
    finally:
        _stop(web)

    port = free_port()
    web = _start_web(database_url, port, tmp_path / "web2.log", FORWARDED_ALLOW_IPS="10.0.0.1")
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_http(f"{base}/readyz", until=200).status_code == 200
        untrusted = _get(base, "/admin/", **forwarded)
        assert untrusted.headers["location"].startswith("http://")
        assert "secure" not in _get(base, "/admin/login", **forwarded).headers["set-cookie"].lower()
    finally:
        _stop(web)


def test_the_procfile_command_line_parses() -> None:
    processes = procfile()
    assert set(processes) == {"web", "worker", "release"}
    words = shlex.split(processes["web"])
    assert words[:2] == ["uvicorn", "debounce.web:app"]
    assert "--proxy-headers" in words
    assert words[words.index("--forwarded-allow-ips") + 1] == "${FORWARDED_ALLOW_IPS:-*}"
