"""A third-party source joins through the ``debounce.integrations`` entry point
(docs/writing-a-source.md): the example under ``examples/echo_source`` is found by
``importlib.metadata`` from a distribution's ``entry_points.txt`` — real entry-point loading, as
``pip install ./examples/echo_source`` would register it — and then serves the whole path:
its settings from the environment, its webhooks at ``POST /webhooks/echo``, a debounced job,
the worker's sync, a document."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool

from debounce import registry
from debounce.cli import sign_request
from debounce.config import Settings
from debounce.documents.store import DocumentStore
from debounce.types import SourceWindow
from debounce.web import create_app
from debounce.worker import Worker

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "echo_source"
SECRET = "echo-test-secret"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``examples/echo_source`` importable and registered the way an installed distribution
    is: a ``*.dist-info`` with its ``entry_points.txt`` on ``sys.path``."""
    info = tmp_path / "echo_source-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-source\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[debounce.integrations]\necho = echo_source:SOURCE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    registry._installed.cache_clear()
    yield
    registry._installed.cache_clear()
    sys.modules.pop("echo_source", None)


def test_the_example_source_is_loaded_through_its_entry_point(installed: None) -> None:
    assert "echo_source" not in sys.modules
    source = registry.get("echo")
    assert "echo_source" in sys.modules  # imported by the entry point's loader
    assert source.source_type == "echo"
    assert registry.source_types() == ["echo", "notion", "slack"]
    # Its typed settings, from the environment like every source's.
    settings = Settings.from_env({"ECHO_SIGNING_SECRET": SECRET, "ECHO_DEBOUNCE_SECONDS": "2"})
    assert source.configure(settings).echo_signing_secret == SECRET
    assert settings.window("echo") == SourceWindow(2.0, 60.0)
    assert source.configure(Settings(echo_signing_secret=SECRET)).echo_signing_secret == SECRET


async def test_the_example_source_goes_from_webhook_to_document(
    installed: None, pool: AsyncConnectionPool[Any], database_url: str
) -> None:
    settings = Settings(
        database_url=database_url,
        echo_signing_secret=SECRET,
        windows={"echo": SourceWindow(0.0, 0.0)},
        poll_interval_seconds=0.1,
    )
    app = create_app(settings, pool=pool)
    body = json.dumps(
        {"id": "evt-1", "page": "p-1", "title": "Hello", "text": "Echoed through debounce."}
    ).encode()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        refused = await client.post(
            "/webhooks/echo", content=body, headers=sign_request("echo", body, "wrong")
        )
        resp = await client.post("/webhooks/echo", content=body, headers=sign_request("echo", body, SECRET))
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_signature"
    assert resp.status_code == 200 and resp.json()["jobs"][0]["outcome"] == "created"
    syncers = registry.create_all(settings)
    worker = Worker(settings, pool, syncers, conninfo=database_url)
    task = asyncio.create_task(worker.run())
    store = DocumentStore(pool)
    try:
        async with asyncio.timeout(20):
            while (doc := await store.get("echo", "p-1")) is None:
                await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
        for syncer in syncers.values():
            await syncer.aclose()
    assert (doc["title"], doc["content"]) == ("Hello", "Echoed through debounce.\n")


def test_a_syncer_without_backfill_page_takes_no_part_in_backfills() -> None:
    from debounce.contract import as_backfillable

    assert as_backfillable(object(), "plain") is None
