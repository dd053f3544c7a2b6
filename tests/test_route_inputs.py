"""Every route of the HTTP surface refuses hostile parameters with a 4xx naming them, never a
500 (issue 32, point 4): the test walks the app's routes, so a route added later is walked
too. A NUL byte (or any control character) in a path or query parameter, a source outside the
registry, and a page id its source cannot own (``POST /resync/notion/../../etc``) each answer
400 with a JSON body naming the parameter; the dashboard (a mounted app) answers its own 4xx
pages."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from starlette.routing import Mount, Route
from test_dashboard import sign_in

from debounce.config import Settings
from debounce.web import create_app

ADMIN = "route-walk-admin"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
_PARAM = re.compile(r"\{([a-z_]+)(?::[a-z]+)?\}")


@pytest.fixture
async def app_client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    app = create_app(
        Settings(
            admin_token=ADMIN,
            read_token="route-walk-reader",
            notion_webhook_secret="secret_route_walk",
            slack_signing_secret="route-walk",
        ),
        pool=pool,
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://web") as client,
    ):
        yield app, client


def _fill(path: str, values: dict[str, str], default: str) -> str:
    return _PARAM.sub(lambda m: values.get(m.group(1), default), path)


def _api_routes(app: Any) -> list[tuple[str, str, list[str]]]:
    """(method, path template, parameter names) of every route outside the mounted apps."""
    out = []
    for route in app.routes:
        if isinstance(route, Route):
            for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
                out.append((method, route.path, _PARAM.findall(route.path)))
    return out


async def test_a_nul_byte_in_any_path_parameter_is_400_naming_it(
    app_client: tuple[Any, httpx.AsyncClient],
) -> None:
    app, client = app_client
    walked = 0
    for method, template, params in _api_routes(app):
        for name in params:
            path = _fill(template, {name: "a%00b", "source": "notion"}, "1")
            if name == "source":
                path = _fill(template, {"source": "a%00b"}, "1")
            resp = await client.request(method, path, headers=AUTH)
            assert resp.status_code == 400, (method, path, resp.status_code, resp.text)
            assert resp.json() == {
                "error": "bad_request",
                "detail": f"path parameter {name!r} must not contain control characters (such as %00)",
            }
            walked += 1
    assert walked >= 8  # every {source}, {page_id}, {job_id}, {workspace_id}, … of the API


async def test_a_control_character_in_any_query_parameter_is_400_naming_it(
    app_client: tuple[Any, httpx.AsyncClient],
) -> None:
    app, client = app_client
    for method, template, _ in _api_routes(app):
        path = _fill(template, {"source": "notion"}, "1") + "?cursor=1&page_id=x%01y"
        resp = await client.request(method, path, headers=AUTH)
        assert resp.status_code == 400, (method, path, resp.text)
        assert resp.json()["detail"] == (
            "query parameter 'page_id' must not contain control characters (such as %00)"
        )


async def test_a_source_outside_the_registry_is_400_naming_the_parameter(
    app_client: tuple[Any, httpx.AsyncClient],
) -> None:
    app, client = app_client
    walked = 0
    for method, template, params in _api_routes(app):
        if "source" not in params:
            continue
        resp = await client.request(method, _fill(template, {"source": "jira"}, "x"), headers=AUTH)
        assert resp.status_code == 400, (method, template, resp.text)
        assert resp.json() == {
            "error": "unknown_source",
            "detail": "source must be one of notion, slack, got 'jira'",
        }
        walked += 1
    assert walked == 4  # webhooks, resync, the verification token, a document
    for path in ("/jobs?source=jira", "/documents?source=jira", "/documents/changes?source=jira"):
        resp = await client.get(path, headers=AUTH)
        assert resp.status_code == 400 and "got 'jira'" in resp.json()["detail"], path


@pytest.mark.parametrize(
    ("source", "page_id", "form"),
    [
        ("notion", "..%2F..%2Fetc", "a UUID, with or without dashes"),
        ("notion", "153104cd-477e-809d-8dc4", "a UUID, with or without dashes"),
        ("slack", "..%2F..%2Fetc", "a conversation id"),
        ("slack", "general", "a conversation id"),
    ],
)
async def test_a_page_id_its_source_cannot_own_is_400_and_creates_no_job(
    app_client: tuple[Any, httpx.AsyncClient], source: str, page_id: str, form: str
) -> None:
    _, client = app_client
    resp = await client.post(f"/resync/{source}/{page_id}", headers=AUTH)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"] == "bad_request"
    assert resp.json()["detail"].startswith("page_id ") and form in resp.json()["detail"]
    listed = await client.get("/jobs", headers=AUTH)
    assert listed.json()["jobs"] == []
    # The same page, spelled as the source spells it, is re-synced.
    good = {"notion": "153104CD477E809D8DC4FF2D96AE3090", "slack": "C0123ABCD"}[source]
    done = await client.post(f"/resync/{source}/{good}", headers=AUTH)
    assert done.status_code == 202, done.text


async def test_the_dashboard_answers_hostile_path_parameters_with_4xx_pages(
    app_client: tuple[Any, httpx.AsyncClient],
) -> None:
    app, client = app_client
    await sign_in(client, ADMIN)
    mount = next(r for r in app.routes if isinstance(r, Mount))
    walked = 0
    for route in mount.routes:
        if not isinstance(route, Route) or not _PARAM.search(route.path):
            continue
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            resp = await client.request(method, mount.path + _fill(route.path, {}, "a%00b"), headers=AUTH)
            assert 400 <= resp.status_code < 500, (method, route.path, resp.status_code)
            walked += 1
    assert walked >= 3
