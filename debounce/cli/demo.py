"""``debounce serve --demo``: every source's local stand-in, and a tour that posts the example
webhooks to the running service and reports the documents the worker wrote.

The one production module that loads the stand-ins (``standins.demos``, imported when a demo
starts): the sources know nothing of their fakes, and the import contract in
``pyproject.toml`` allows this import only."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn

from debounce import queue, registry, workspaces
from debounce.cli.errors import CliError
from debounce.cli.send import (
    DEMO_STATE_FILE,
    DemoService,
    demo_edit,
    fresh_event_id,
    secret_for,
    sign_request,
)
from debounce.config import Settings
from debounce.contract import Source
from debounce.documents import feed, reads
from debounce.infra.secrets import Keyring, new_key

if TYPE_CHECKING:
    from standins.demos import DemoSetup, DemoWorkspace

__all__ = [
    "DEMO_ADMIN_TOKEN",
    "DEMO_LOCK_FILE",
    "DEMO_READ_TOKEN",
    "EXAMPLES",
    "Demo",
    "connect_demo_workspaces",
    "demo_setups",
    "demo_tour",
    "fresh_event_id",
    "hold_demo_lock",
    "start_demo",
]

log = logging.getLogger("debounce.cli")

DEMO_ADMIN_TOKEN = "demo-admin-token"
#: The read token of the demo's read API (``DEBOUNCE_READ_TOKEN`` sets another).
DEMO_READ_TOKEN = "demo-read-token"
#: The command that edits a demo page and shows the change arriving (the tour's last line).
EDIT_COMMAND = "debounce send notion examples/notion/page.content_updated.json --demo"
_HERE = Path(__file__).resolve().parent.parent
#: Example webhook bodies: the checkout's examples/, or the copy a wheel carries.
EXAMPLES = _HERE / "_examples" if (_HERE / "_examples").is_dir() else _HERE.parent / "examples"


@dataclass
class Demo:
    """What ``serve --demo`` started: the example webhook files the tour posts, the further
    workspaces to connect (by source) with the webhook body of each, the examples that
    describe an edit (posted last, each once its stand-in made the edit real) and the
    stand-ins' edit routes by source, where the running demo says so for ``debounce send
    --demo`` (:data:`~debounce.cli.send.DEMO_STATE_FILE`), and the file documents (source,
    document id) the demo's attached files become."""

    files: list[Path] = field(default_factory=list)
    workspaces: list[tuple[str, DemoWorkspace]] = field(default_factory=list)
    edits: list[Path] = field(default_factory=list)
    edit_urls: dict[str, str] = field(default_factory=dict)
    state_file: Path | None = None
    file_documents: list[tuple[str, str]] = field(default_factory=list)


#: The longest the tour waits for the queue to drain, and for its edits to reach the feed.
DEMO_WAIT_SECONDS = 60.0
#: The file under the data directory whose lock a running demo holds (one demo per directory).
DEMO_LOCK_FILE = "demo.lock"


def _free_port(host: str, after: int) -> int:
    """The first port above ``after`` nothing listens on at ``host`` now (for a hint)."""
    for port in range(after + 1, min(after + 100, 65535)):
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    return after + 1


def _free_data_dir(data_dir: str) -> str:
    """``<data_dir>-2`` (or -3, …): a data directory no demo has used yet (for a hint)."""
    n = 2
    while Path(f"{data_dir.rstrip('/')}-{n}").exists():
        n += 1
    return f"{data_dir.rstrip('/')}-{n}"


def hold_demo_lock(settings: Settings, host: str, port: int) -> int:
    """Take the data directory's demo lock (``<DEBOUNCE_DATA_DIR>/demo.lock``, an exclusive
    ``flock``), held until the process exits; returns its file descriptor. Two demos of one
    directory would share its database, their stand-ins overwriting each other's pages, and
    the second's exit would remove the first's ``demo.json``: the second refuses instead,
    before it binds, starts or writes anything.

    Raises:
        CliError: another demo holds the lock: one line naming it, and a command that starts
            a second demo with its own data directory (and database) and a free port.
    """
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / DEMO_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        running = DemoService.load(data_dir)
        where = f" at {running.url}" if running else ""
        unset = "env -u DATABASE_URL " if settings.database_url else ""
        raise CliError(
            f"a demo is already running in {settings.data_dir}/{where}: use it, stop it, or "
            f"start another with its own data: {unset}DEBOUNCE_DATA_DIR="
            f"{_free_data_dir(settings.data_dir)} PORT={_free_port(host, port)} debounce serve "
            "--demo",
            1,
        ) from None
    os.set_inheritable(fd, False)
    return fd


def demo_setups(stack: contextlib.ExitStack | contextlib.AsyncExitStack) -> list[tuple[Source, DemoSetup]]:
    """Start the stand-in of every registered source that has one (``standins.demos``),
    stopped by ``stack``; returns each source with its :class:`~standins.demos.DemoSetup`."""
    from standins.demos import DEMOS

    started = []
    for source in registry.sources().values():
        demo = DEMOS.get(source.source_type)
        if demo is None:
            continue
        setup = demo()
        stack.callback(setup.stop)
        started.append((source, setup))
    return started


def start_demo(settings: Settings, stack: contextlib.AsyncExitStack) -> tuple[Settings, Demo]:
    """Start every source's stand-in with demo content (stopped by ``stack``) and point
    ``settings`` at them; unset signing secrets, the admin token and the read token get demo
    values, the windows are short (so the tour is quick), and without ``DEBOUNCE_SECRET_KEY``
    a demo key is kept in the data directory (it encrypts the demo workspaces' tokens).
    Returns the settings and what the tour needs (:class:`Demo`); the file the tour writes
    for ``debounce send --demo`` is removed when ``stack`` closes."""
    changes: dict[str, Any] = {}
    demo_run = Demo()
    files = demo_run.files
    windows = dict(settings.windows)
    for source, setup in demo_setups(stack):
        log.info("demo: local %s API stand-in at %s", source.source_type, setup.url)
        changes.update(setup.settings)
        windows[source.source_type] = setup.window
        if source.secret_setting and not source.signing_secret(settings):
            changes[source.secret_setting] = source.demo_secret
        for pattern in setup.examples:
            for path in sorted((EXAMPLES / source.source_type).glob(pattern)):
                (demo_run.edits if path.name in setup.edits else files).append(path)
        demo_run.workspaces.extend((source.source_type, w) for w in setup.workspaces)
        if setup.edit_url:
            demo_run.edit_urls[source.source_type] = setup.edit_url
        demo_run.file_documents.extend((source.source_type, d) for d in setup.file_documents)
    if not settings.secret_key:
        changes["secret_key"] = _demo_key(Path(settings.data_dir))
    demo_run.state_file = Path(settings.data_dir) / DEMO_STATE_FILE
    stack.callback(demo_run.state_file.unlink, missing_ok=True)
    demo = settings.with_(
        admin_token=settings.admin_token or DEMO_ADMIN_TOKEN,
        read_token=settings.read_token or DEMO_READ_TOKEN,
        windows=windows,
        **changes,
    )
    return demo, demo_run


def _demo_key(data_dir: Path) -> str:
    """The demo's secret key, kept in ``<data dir>/demo-secret.key`` so a later demo run can
    read what an earlier one stored."""
    path = data_dir / "demo-secret.key"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = new_key()
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


async def connect_demo_workspaces(settings: Settings, pool: Any, demo_run: Demo) -> None:
    """Connect the stand-ins' further workspaces (the environment's token defines the first
    of each source), as ``debounce workspaces add`` would."""
    keyring = Keyring(settings.secret_key)
    for source_type, workspace in demo_run.workspaces:
        await workspaces.save(
            pool,
            keyring,
            source_type=source_type,
            external_id=workspace.external_id,
            name=workspace.name,
            credentials={"access_token": workspace.token},
            origin="cli",
        )
        log.info("demo: connected %s workspace %s (%s)", source_type, workspace.name, workspace.external_id)


async def demo_tour(settings: Settings, base: str, server: uvicorn.Server, pool: Any, demo_run: Demo) -> None:
    """Once the server is up, log where the dashboard is and how to sign in and read, say where
    the demo is (:class:`~debounce.cli.send.DemoService`, for ``debounce send --demo``), post
    the example webhooks to ourselves (with event ids fresh to this run:
    :func:`fresh_event_id`) and wait for the queue to drain; then make each example edit real
    in its stand-in, post its webhook, and log the edit's change when the feed serves it
    (:func:`debounce.documents.feed.read_changes`). Ends with what became of the examples' jobs, how
    many documents the worker wrote and the command that edits a page again (60 s at most
    per wait)."""
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.05)
    how = (
        f"the admin token {DEMO_ADMIN_TOKEN!r} (the demo's; DEBOUNCE_ADMIN_TOKEN sets another)"
        if settings.admin_token == DEMO_ADMIN_TOKEN
        else "DEBOUNCE_ADMIN_TOKEN"
    )
    log.info("demo: dashboard at %s/admin/ — sign in with %s", base, how)
    read_token = settings.read_token or DEMO_READ_TOKEN
    demo_token = read_token == DEMO_READ_TOKEN
    log.info(
        "demo: consumers read the documents and the change feed with %s: curl -H "
        "'Authorization: Bearer %s' %s/documents/changes",
        f"the read token {DEMO_READ_TOKEN!r} (the demo's; DEBOUNCE_READ_TOKEN sets another)"
        if demo_token
        else "DEBOUNCE_READ_TOKEN",
        DEMO_READ_TOKEN if demo_token else "$DEBOUNCE_READ_TOKEN",
        base,
    )
    local = base.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:")
    if demo_run.state_file is not None:
        DemoService(local, read_token, demo_run.edit_urls).save(demo_run.state_file.parent)
    run = "run" + secrets.token_hex(4)
    job_ids: set[int] = set()
    async with httpx.AsyncClient(timeout=10) as client:
        bodies = [(p.parent.name, _label(p), p.read_bytes()) for p in demo_run.files]
        bodies += [
            (source, _workspace_label(source, w), json.dumps(w.event).encode())
            for source, w in demo_run.workspaces
        ]
        for source, name, body in bodies:
            job_ids.update(await _post(client, settings, base, source, name, fresh_event_id(body, run)))
        await _drain(pool, server)
        await _log_file_documents(pool, demo_run)
        after = await feed.head(pool)
        edits: list[tuple[str, str]] = []
        for path in demo_run.edits:
            source = path.parent.name
            edit_url = demo_run.edit_urls.get(source)
            edited = await demo_edit(client, edit_url, path.read_bytes()) if edit_url else None
            if edited is None:
                continue
            log.info("demo: the %s stand-in %s", source, edited.edited)
            edits.append((source, edited.text))
            job_ids.update(
                await _post(
                    client,
                    settings,
                    base,
                    source,
                    f"{_label(path)} (its edit made real by the stand-in)",
                    edited.body,
                )
            )
    await _drain(pool, server)
    await _log_edits_in_feed(pool, server, after, edits)
    states: dict[str, int] = {}
    for job_id in sorted(job_ids):
        job = await queue.get(pool, job_id)
        state = job.status.value if job is not None else "gone"
        states[state] = states.get(state, 0) + 1
    documents = await reads.count_documents(pool)
    log.info(
        "demo: the examples' %d jobs: %s; %s documents in the `documents` table — see "
        "them with `debounce documents` (DATABASE_URL unset uses the same embedded "
        "database)",
        len(job_ids),
        ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "none",
        documents,
    )
    log.info(
        "demo: edit the page again and see the change arrive: `%s`%s; then `debounce "
        "documents changes` lists the feed",
        EDIT_COMMAND,
        ""
        if demo_run.state_file is None or demo_run.state_file.parent == Path(".debounce")
        else f" (with DEBOUNCE_DATA_DIR={demo_run.state_file.parent})",
    )


async def _log_file_documents(pool: Any, demo_run: Demo) -> None:
    """Log each of the demo's file documents: its title, the page it hangs off and the first
    line of its text (the documents extracted from the files the demo pages carry)."""
    for source, document_id in demo_run.file_documents:
        doc = await reads.get_document(pool, source, document_id)
        if doc is None:
            log.info("demo: file document %s/%s: not written yet", source, document_id)
            continue
        meta = doc["metadata"] or {}
        text = next((line for line in doc["content"].splitlines() if line.strip()), "")
        log.info(
            "demo: file document %s/%s %r (%s, from %s/%s): %r",
            source,
            document_id,
            doc["title"],
            (meta.get("extraction") or {}).get("status", "?"),
            source,
            meta.get("parent_document_id"),
            text[:80],
        )


def _label(path: Path) -> str:
    """An example file as the tour's log names it: ``examples/notion/page.created.json`` (the
    path ``debounce send`` takes, from a checkout)."""
    return f"examples/{path.parent.name}/{path.name}"


def _workspace_label(source: str, workspace: DemoWorkspace) -> str:
    """The webhook of a further demo workspace, which no file holds (the stand-in builds it):
    its event type and the workspace it comes from."""
    event = workspace.event
    inner = event.get("event")
    kind = inner.get("type") if isinstance(inner, dict) else event.get("type")
    return (
        f"a {source} {kind} event of the second workspace, {workspace.name} "
        f"({workspace.external_id}; built by the stand-in, no file)"
    )


async def _post(
    client: httpx.AsyncClient, settings: Settings, base: str, source: str, name: str, body: bytes
) -> list[int]:
    """Post one webhook ``body`` of ``source`` to ourselves, signed; log the answer; returns
    the job ids it names."""
    resp = await client.post(
        f"{base}/webhooks/{source}",
        content=body,
        headers=sign_request(source, body, secret_for(settings, source)[0]),
    )
    log.info("demo: sent %s → %s %s", name, resp.status_code, resp.text[:200])
    return _job_ids(resp)


async def _drain(pool: Any, server: uvicorn.Server) -> None:
    """Wait (:data:`DEMO_WAIT_SECONDS` at most) until no job is pending or processing."""
    deadline = time.monotonic() + DEMO_WAIT_SECONDS
    while time.monotonic() < deadline and not server.should_exit:
        stats = await queue.stats(pool)
        if stats["totals"]["pending"] == 0 and stats["totals"]["processing"] == 0:
            return
        await asyncio.sleep(0.5)


async def _log_edits_in_feed(
    pool: Any, server: uvicorn.Server, after: feed.Cursor, edits: list[tuple[str, str]]
) -> None:
    """Follow the change feed from ``after`` (:data:`DEMO_WAIT_SECONDS` at most) until each
    ``(source, text)`` of ``edits`` showed as a change of a document of ``source`` that
    contains ``text``; log each with that line of the document, or log the edits that did not
    come (as not come in time, or, when the demo was stopped first, as cut short)."""
    remaining = list(edits)
    deadline = time.monotonic() + DEMO_WAIT_SECONDS
    while remaining and time.monotonic() < deadline and not server.should_exit:
        page = await feed.read_changes(pool, after, feed.MAX_LIMIT)
        after = page.next
        for change in page.changes:
            row = (
                await reads.get_document(pool, change.source, change.document_id)
                if change.op == "upsert"
                else None
            )
            lines = str(row["content"]).splitlines() if row else []
            for edit in [e for e in remaining if e[0] == change.source]:
                found = [line.strip() for line in lines if edit[1] in line]
                if found:
                    remaining.remove(edit)
                    log.info(
                        "demo: feed: %s %s/%s  %r  cursor=%s",
                        change.op,
                        change.source,
                        change.document_id,
                        found[0],
                        change.cursor.encode(),
                    )
                    break
        if remaining and page.at_head:
            await asyncio.sleep(0.25)
    for source, text in remaining:
        if server.should_exit:  # stopped early: the edit had no time, nothing went wrong
            log.info("demo: stopped before the %s edit %r reached the feed", source, text)
        else:
            log.warning(
                "demo: the %s edit %r did not reach the feed within %g s: see `debounce jobs`",
                source,
                text,
                DEMO_WAIT_SECONDS,
            )


def _job_ids(resp: httpx.Response) -> list[int]:
    """The job ids a webhook's answer names (``{"jobs": [{"job_id": …}]}``)."""
    try:
        body = resp.json()
    except ValueError:
        return []
    jobs = body.get("jobs") if isinstance(body, dict) else None
    return [int(j["job_id"]) for j in jobs or [] if isinstance(j, dict) and isinstance(j.get("job_id"), int)]
