"""Signing webhook bodies the way each source signs them, and ``debounce send``.

With ``--demo``, ``debounce send`` plays the source's side of ``debounce serve --demo``: the
running demo says where it is in :data:`DEMO_STATE_FILE` (its URL, its read token and the
route of each stand-in that applies an example's edit, ``standins.demo_edits``); an example
that describes an edit (``page.content_updated``, ``message_changed``) is first made real in
the stand-in, which answers the webhook the source sends for it, and ``send`` then waits for
the sync's change in the feed (the read API, with the demo's read token) and prints it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from debounce import registry
from debounce.cli.errors import CliError
from debounce.config import Settings

__all__ = [
    "DEMO_STATE_FILE",
    "DEMO_WAIT_SECONDS",
    "DemoEdited",
    "DemoService",
    "demo_edit",
    "fresh_event_id",
    "secret_for",
    "send",
    "sign_request",
]

#: The file (in the data directory, ``DEBOUNCE_DATA_DIR``) in which a running ``serve --demo``
#: says where it is; removed when it stops.
DEMO_STATE_FILE = "demo.json"
#: How long ``send --demo`` waits for an edit to reach the change feed, seconds.
DEMO_WAIT_SECONDS = 90.0


def sign_request(source: str, body: bytes, secret: str, *, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` the way ``source`` does (its :class:`~debounce.contract.Source`
    ``sign``); ``timestamp`` in Unix seconds, default now, for sources that sign one.

    Raises:
        ValueError: unknown source, or a source that does not sign its webhooks.
    """
    spec = registry.sources().get(source)
    if spec is None or spec.sign is None:
        raise ValueError(f"unknown source {source!r}, or it does not sign webhooks")
    return spec.sign(body, secret, timestamp)


def secret_for(settings: Settings, source: str, *, demo: bool = False) -> tuple[str, str]:
    """The signing secret ``debounce send`` uses and where it came from (for the operator):
    the configured one (named by its variable), else — only with ``demo`` — the demo one.

    Raises:
        SystemExit: one line: the source does not sign, or its secret is unset and ``demo``
            is false.
    """
    spec = registry.sources().get(source)
    if spec is None or spec.sign is None:
        raise SystemExit(f"error: source {source!r} does not sign its webhooks")
    configured = spec.signing_secret(settings)
    if configured:
        return configured, spec.secret_env() or "the configured secret"
    if demo and spec.demo_secret:
        return spec.demo_secret, "the demo secret of `debounce serve --demo`"
    raise SystemExit(
        f"error: {spec.secret_env() or 'the signing secret'} is not set: set it, "
        "pass --secret, or pass --demo to sign with the demo secret of "
        "`debounce serve --demo`"
    )


def fresh_event_id(body: bytes, run: str) -> bytes:
    """``body`` (a webhook's JSON) with its event id made unique to this run: the envelope's
    top-level ``event_id`` (Slack) or, failing that, ``id`` (Notion) gets ``-<run>`` appended,
    so a later demo run against the same database is not deduplicated as a redelivery. A body
    without either (or not a JSON object) comes back as it was."""
    try:
        event = json.loads(body)
    except ValueError:
        return body
    if not isinstance(event, dict):
        return body
    for key in ("event_id", "id"):
        if isinstance(event.get(key), str):
            event[key] = f"{event[key]}-{run}"
            return json.dumps(event).encode()
    return body


@dataclass(frozen=True)
class DemoService:
    """Where a running ``debounce serve --demo`` is: the service's base ``url``, the
    ``read_token`` its read API takes, and the edit route of each source's stand-in
    (``edit_urls``, by source type)."""

    url: str
    read_token: str
    edit_urls: dict[str, str]

    def save(self, data_dir: Path) -> Path:
        """Write :data:`DEMO_STATE_FILE` in ``data_dir`` (readable by its owner only: it holds
        the read token); returns its path."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / DEMO_STATE_FILE
        path.touch(mode=0o600)
        path.write_text(
            json.dumps(
                {"url": self.url, "read_token": self.read_token, "edit_urls": self.edit_urls}, indent=2
            )
            + "\n"
        )
        return path

    @classmethod
    def load(cls, data_dir: Path) -> DemoService | None:
        """The demo running with ``data_dir``, or ``None`` when none wrote its file (or the
        file is not one it wrote)."""
        try:
            raw = json.loads((data_dir / DEMO_STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        if not (
            isinstance(raw, dict)
            and isinstance(raw.get("url"), str)
            and isinstance(raw.get("read_token"), str)
            and isinstance(raw.get("edit_urls"), dict)
        ):
            return None
        return cls(raw["url"], raw["read_token"], {str(k): str(v) for k, v in raw["edit_urls"].items()})


@dataclass(frozen=True)
class DemoEdited:
    """An edit a demo stand-in applied: ``edited`` (one line: what changed), ``text`` (the
    new text, which the synced document will contain) and the webhook ``body`` to post."""

    edited: str
    text: str
    body: bytes


async def demo_edit(client: httpx.AsyncClient, edit_url: str, body: bytes) -> DemoEdited | None:
    """Ask a demo stand-in (``POST`` ``edit_url``, ``standins.demo_edits``) to apply the edit
    the example webhook ``body`` describes; ``None`` when it describes none.

    Raises:
        CliError: the stand-in is unreachable, or refused the example (one line).
    """
    try:
        resp = await client.post(edit_url, content=body, headers={"content-type": "application/json"})
    except httpx.HTTPError as exc:
        raise CliError(
            f"cannot reach the demo's stand-in at {edit_url} ({exc}): is "
            "`debounce serve --demo` still running?"
        ) from None
    answer = _json(resp)
    if resp.status_code == 404 and answer.get("error") == "not_an_edit":
        return None
    if resp.status_code != 200 or not isinstance(answer.get("webhook"), dict):
        raise CliError(
            f"the demo's stand-in refused the edit: {resp.status_code} "
            f"{answer.get('detail') or resp.text[:200]}"
        )
    return DemoEdited(str(answer["edited"]), str(answer["text"]), json.dumps(answer["webhook"]).encode())


def _json(resp: httpx.Response) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class _Feed:
    """The change feed of a running demo, read as a consumer reads it (``GET
    /documents/changes`` with the demo's read token)."""

    def __init__(self, client: httpx.AsyncClient, service: DemoService, url: str) -> None:
        self.client = client
        self.url = url.rstrip("/")
        self.headers = {"authorization": f"Bearer {service.read_token}"}

    async def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            resp = await self.client.get(self.url + path, params=params, headers=self.headers, timeout=60)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot read {self.url}{path} ({exc})") from None
        if resp.status_code != 200:
            raise CliError(f"cannot read {self.url}{path}: {resp.status_code} {resp.text[:200]}")
        return _json(resp)

    async def head(self) -> str:
        """The cursor past every change servable now."""
        after: str | None = None
        while True:
            page = await self._get(
                "/documents/changes", {"limit": "1000", **({"after": after} if after else {})}
            )
            after = str(page["next"])
            if len(page["changes"]) < 1000:
                return after

    async def await_edits(self, after: str, edits: list[tuple[str, str]]) -> bool:
        """Follow the feed from ``after`` until, for each ``(source, text)`` of ``edits``, a
        change of a document of ``source`` that contains ``text`` arrived (printing each, with
        its line of the document), or :data:`DEMO_WAIT_SECONDS` passed; ``True`` if all came."""
        remaining = list(edits)
        deadline = time.monotonic() + DEMO_WAIT_SECONDS
        while remaining and (left := deadline - time.monotonic()) > 0:
            page = await self._get("/documents/changes", {"after": after, "wait": f"{min(left, 30.0):.1f}"})
            after = str(page["next"])
            for change in page["changes"]:
                found = await self._edit_in(change, remaining)
                if found is not None:
                    remaining.remove(found[0])
                    print(
                        f"feed: {change['op']} {change['source']}/{change['document_id']}  "
                        f"{found[1]!r}  cursor={change['cursor']}",
                        flush=True,
                    )
        return not remaining

    async def _edit_in(
        self, change: dict[str, Any], edits: list[tuple[str, str]]
    ) -> tuple[tuple[str, str], str] | None:
        """The edit of ``edits`` that ``change``'s document now contains, and its line."""
        wanted = [e for e in edits if e[0] == change["source"]]
        if not wanted or change["op"] != "upsert":
            return None
        path = f"/documents/{change['source']}/{change['document_id']}"
        content = str((await self._get(path, {}))["document"]["content"])
        for edit in wanted:
            lines = [line.strip() for line in content.splitlines() if edit[1] in line]
            if lines:
                return edit, lines[0]
        return None


async def send(
    source: str,
    files: list[str],
    url: str | None,
    secret: str | None,
    settings: Settings,
    *,
    demo: bool = False,
) -> int:
    """Post each of ``files`` (raw webhook bodies) to ``url``'s ``/webhooks/{source}``, signed
    with ``secret`` (default: :func:`secret_for`; which one is said on stderr). ``url``
    defaults to the running demo's (with ``demo``), else ``http://127.0.0.1:$PORT``.

    With ``demo`` and a running ``serve --demo`` (:class:`DemoService`), an example that
    describes an edit is made real in the source's stand-in first (:func:`demo_edit`), the
    webhook the stand-in answers for it is posted instead of the file, and once every file
    is sent this waits until the sync's change of each edit is in the feed and prints it.

    Returns 0, or 1 if any was refused, a file cannot be read, or an edit did not reach the
    feed in :data:`DEMO_WAIT_SECONDS`.

    A file that does not exist is said first (one line, exit 1), before the signing secret.

    Raises:
        SystemExit: one line: no signing secret (:func:`secret_for`).
    """
    missing = [file for file in files if not await asyncio.to_thread(Path(file).is_file)]
    if missing:  # before the secret: the file is what the user typed last
        print(
            f"{missing[0]}: cannot read: No such file or directory"
            + (f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""),
            file=sys.stderr,
        )
        return 1
    failures = 0
    key, origin = (secret, "--secret") if secret else secret_for(settings, source, demo=demo)
    print(f"signing with {origin}", file=sys.stderr)
    service = DemoService.load(Path(settings.data_dir)) if demo else None
    url = (url or (service.url if service else f"http://127.0.0.1:{settings.port}")).rstrip("/")
    if demo and service is None:
        print(
            f"no running `debounce serve --demo` here ({Path(settings.data_dir) / DEMO_STATE_FILE}"
            " is missing): the files are posted as they are, no stand-in is edited",
            file=sys.stderr,
        )
    edit_url = service.edit_urls.get(source) if service else None
    edits: list[tuple[str, str]] = []
    async with httpx.AsyncClient(timeout=10) as client:
        feed = _Feed(client, service, url) if service and edit_url else None
        after: str | None = None
        for file in files:
            try:
                body = await asyncio.to_thread(Path(file).read_bytes)
            except OSError as exc:
                print(f"{file}: cannot read: {exc.strerror or exc}", file=sys.stderr)
                failures += 1
                continue
            if feed is not None and edit_url is not None:
                if after is None:
                    after = await feed.head()
                edited = await demo_edit(client, edit_url, body)
                if edited is not None:
                    print(f"{file}: the demo's {source} stand-in {edited.edited}")
                    body = edited.body
                    edits.append((source, edited.text))
            target = f"{url}/webhooks/{source}"
            try:
                resp = await client.post(target, content=body, headers=sign_request(source, body, key))
            except httpx.HTTPError as exc:
                print(f"{file}: cannot reach {target}: {exc}", file=sys.stderr)
                return 1
            print(f"{file}: {resp.status_code} {resp.text}", flush=True)
            failures += resp.status_code >= 300
        if feed is not None and edits and after is not None and not failures:
            print(
                "waiting for the sync to write the edit (after the source's debounce "
                "window) and for its change in the feed …",
                file=sys.stderr,
                flush=True,
            )
            if not await feed.await_edits(after, edits):
                print(
                    f"no change with {edits[0][1]!r} reached the feed within "
                    f"{DEMO_WAIT_SECONDS:g} s: see `debounce jobs`",
                    file=sys.stderr,
                )
                return 1
            print("the whole feed: `debounce documents changes`; the documents: `debounce documents`")
    return 1 if failures else 0
