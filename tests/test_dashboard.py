"""The dashboard over HTTP (httpx, lifespan running, real database): sign-in, the session
cookie's flags, CSRF on every POST, 4xx pages for bad parameters, escaping, the figures.
The browser tests are in test_dashboard_browser.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html import unescape
from typing import Any

import httpx
import one_job
import pytest
from dashboard_seed import ADMIN, FAILED_PAGE, HOSTILE_MARKDOWN, Seeded, seed
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.applications import Starlette

from debounce import queue
from debounce.config import Settings
from debounce.types import JobStatus
from debounce.web import create_app
from debounce.web.dashboard import data
from debounce.web.dashboard import workspaces as ws_data


def settings(**changes: Any) -> Settings:
    base = Settings(
        database_url="postgresql://unused", admin_token=ADMIN, notion_webhook_secret="secret_test"
    )
    return base.with_(**changes)


async def open_client(app: Starlette, base_url: str = "http://test") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@pytest.fixture
async def app(pool: AsyncConnectionPool[Any]) -> AsyncIterator[Starlette]:
    application = create_app(settings(), pool=pool)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with await open_client(app) as c:
        yield c


@pytest.fixture
async def seeded(pool: AsyncConnectionPool[Any]) -> Seeded:
    return await seed(pool)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


async def sign_in(
    client: httpx.AsyncClient,
    token: str = ADMIN,
    next_path: str = "/admin/",
) -> httpx.Response:
    form = await client.get("/admin/login", params={"next": next_path})
    assert form.status_code == 200, form.text
    return await client.post(
        "/admin/login", data={"token": token, "next": next_path, "csrf_token": csrf_of(form.text)}
    )


async def test_disabled_without_an_admin_token_says_how_to_enable_it(pool: AsyncConnectionPool[Any]) -> None:
    application = create_app(settings().with_(admin_token=None), pool=pool)
    async with application.router.lifespan_context(application), await open_client(application) as c:
        for path in ("/admin/", "/admin/login", "/admin/jobs"):
            r = await c.get(path)
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/html")
            assert "DEBOUNCE_ADMIN_TOKEN" in r.text
        r = await c.post("/admin/login", data={"token": "x", "csrf_token": "y"})
        assert r.status_code == 503


async def test_pages_redirect_to_the_login_form_and_come_back(client: httpx.AsyncClient) -> None:
    r = await client.get("/admin/jobs?status=failed")
    assert r.status_code == 303
    assert r.headers["location"] == "http://test/admin/login?next=%2Fadmin%2Fjobs%3Fstatus%3Dfailed"
    assert (await client.get("/admin")).status_code in (307, 308)  # to /admin/
    signed = await sign_in(client, next_path="/admin/jobs?status=failed")
    assert signed.status_code == 303 and signed.headers["location"] == "/admin/jobs?status=failed"
    page = await client.get("/admin/jobs?status=failed")
    assert page.status_code == 200 and "Signed in." in page.text


async def test_a_wrong_token_is_refused_and_the_right_one_sets_a_strict_http_only_cookie(
    client: httpx.AsyncClient,
) -> None:
    wrong = await sign_in(client, token="not-the-token")
    assert wrong.status_code == 401 and "Wrong admin token." in wrong.text
    assert (await client.get("/admin/")).status_code == 303
    right = await sign_in(client)
    assert right.status_code == 303 and right.headers["location"] == "/admin/"
    cookie = right.headers["set-cookie"].lower()
    assert cookie.startswith("debounce_session=")
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/admin" in cookie
    assert "secure" not in cookie  # plain HTTP: a Secure cookie would never come back
    assert (await client.get("/admin/")).status_code == 200


async def test_the_cookie_is_secure_over_https_and_when_the_setting_says_so(
    app: Starlette, pool: AsyncConnectionPool[Any]
) -> None:
    async with await open_client(app, "https://test") as c:
        assert "; secure" in (await sign_in(c)).headers["set-cookie"].lower()
        assert (await c.get("/admin/")).status_code == 200
    forced = create_app(settings(dashboard_secure_cookie=True), pool=pool)
    async with forced.router.lifespan_context(forced), await open_client(forced) as c:
        assert "; secure" in (await c.get("/admin/login")).headers["set-cookie"].lower()


async def test_a_session_signed_with_another_admin_token_is_not_signed_in(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    await sign_in(client)
    cookie = client.cookies["debounce_session"]
    rotated = create_app(settings(admin_token="a-new-token"), pool=pool)
    async with rotated.router.lifespan_context(rotated), await open_client(rotated) as c:
        r = await c.get("/admin/", headers={"cookie": f"debounce_session={cookie}"})
        assert r.status_code == 303


async def test_every_post_without_the_session_csrf_token_is_refused(
    client: httpx.AsyncClient, app: Starlette, seeded: Seeded, pool: AsyncConnectionPool[Any]
) -> None:
    # The login form itself: no token, or a token of no session.
    anonymous = await client.post("/admin/login", data={"token": ADMIN})
    assert anonymous.status_code == 403 and "CSRF" in anonymous.text
    assert (await sign_in(client)).status_code == 303
    async with await open_client(app) as other:
        await sign_in(other)
        foreign = csrf_of((await other.get("/admin/")).text)
    for token in (None, "", "wrong", foreign):
        fields = {} if token is None else {"csrf_token": token}
        r = await client.post(f"/admin/jobs/{seeded.failed_job}/retry", data=fields)
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        r = await client.post("/admin/resync", data={**fields, "source": "notion", "page_id": "p1"})
        assert r.status_code == 403
        r = await client.post("/admin/logout", data=fields)
        assert r.status_code == 403
    r = await client.post(
        f"/admin/jobs/{seeded.failed_job}/retry", content=b"{}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 403
    job = await queue.get(pool, seeded.failed_job)
    assert job is not None and job.status is JobStatus.FAILED
    assert await one_job.active_for_page(pool, "notion", "p1") is None
    assert (await client.get("/admin/")).status_code == 200  # still signed in
    # With the token: the retry happens, the logout too.
    token = csrf_of((await client.get("/admin/")).text)
    r = await client.post(f"/admin/jobs/{seeded.failed_job}/retry", data={"csrf_token": token})
    assert r.status_code == 303 and r.headers["location"] == f"/admin/jobs/{seeded.failed_job}"
    job = await queue.get(pool, seeded.failed_job)
    assert job is not None and job.status is JobStatus.PENDING
    assert (await client.post("/admin/logout", data={"csrf_token": token})).status_code == 303
    assert (await client.get("/admin/")).status_code == 303


async def test_bad_parameters_are_4xx_pages_not_500s(client: httpx.AsyncClient, seeded: Seeded) -> None:
    await sign_in(client)
    cases = {
        "/admin/jobs?status=bogus": 400,
        "/admin/jobs?cursor=abc": 400,
        "/admin/jobs?cursor=0": 400,
        "/admin/jobs?cursor=99999999999999999999999": 400,
        "/admin/jobs?cursor=%C2%B2": 400,
        "/admin/jobs?page_id=%00": 400,
        "/admin/jobs?source=" + "x" * 600: 400,
        "/admin/jobs/abc": 404,
        "/admin/jobs/0": 404,
        "/admin/jobs/99999999999999999999": 404,
        "/admin/jobs/424242": 404,
        "/admin/documents/abc": 404,
        "/admin/documents/424242": 404,
        "/admin/documents?q=%00": 400,
        "/admin/documents?cursor=-1": 400,
        "/admin/nowhere": 404,
    }
    for path, status in cases.items():
        r = await client.get(path)
        assert r.status_code == status, (path, r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("text/html"), path
        assert r.headers["x-frame-options"] == "DENY"
        assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none'
    assert (await client.delete("/admin/jobs")).status_code == 405
    token = csrf_of((await client.get("/admin/")).text)
    r = await client.post("/admin/resync", data={"csrf_token": token, "source": "nope", "page_id": "x"})
    assert r.status_code == 400
    r = await client.post("/admin/resync", data={"csrf_token": token, "source": "notion", "page_id": " "})
    assert r.status_code == 400
    r = await client.post("/admin/jobs/424242/retry", data={"csrf_token": token})
    assert r.status_code == 404
    # A job that is not failed: no error page, a message on the page it came from.
    r = await client.post(
        f"/admin/jobs/{seeded.pending_job}/retry",
        data={"csrf_token": token, "back": "/admin/jobs?status=pending"},
    )
    assert r.status_code == 303 and r.headers["location"] == "/admin/jobs?status=pending"
    assert "only failed jobs can be retried" in (await client.get(r.headers["location"])).text
    # No open redirect through "back" or "next".
    for back in ("https://evil.example/", "//evil.example/admin/", "/admin/\\evil"):
        r = await client.post(
            "/admin/resync",
            data={
                "csrf_token": token,
                "source": "notion",
                "page_id": "59833787-2cf9-4fdf-8782-e53db20768a5",
                "back": back,
            },
        )
        assert r.status_code == 303 and r.headers["location"] == "/admin/", back
    async with httpx.AsyncClient(transport=client._transport, base_url="http://test") as fresh:
        r = await sign_in(fresh, next_path="//evil.example/")
        assert r.headers["location"] == "/admin/"


async def test_stored_text_is_escaped_and_markdown_html_is_not_rendered(
    client: httpx.AsyncClient, seeded: Seeded
) -> None:
    await sign_in(client)
    job = await client.get(f"/admin/jobs/{seeded.failed_job}")
    assert "&lt;b&gt;(share it with the integration)&lt;/b&gt;" in job.text
    assert "<b>(share" not in job.text and FAILED_PAGE in job.text
    doc = await client.get(f"/admin/documents/{seeded.document}")
    assert doc.status_code == 200
    rendered = doc.text.split('id="rendered">', 1)[1].split("</div>", 1)[0]
    assert "<h1>Launch plan</h1>" in rendered and "<strong>launch</strong>" in rendered
    assert "<script" not in rendered and "<img" not in rendered
    assert "&lt;script&gt;" in rendered
    html = data.render_markdown("[x](javascript:alert(1)) <b>b</b>\n\n<div>d</div>")
    assert 'href="javascript' not in html and "<b>" not in html and "<div>" not in html
    assert data.render_markdown(HOSTILE_MARKDOWN).count("<table>") == 1


async def test_screens_show_the_queue(
    client: httpx.AsyncClient, seeded: Seeded, pool: AsyncConnectionPool[Any]
) -> None:
    view = await data.overview(pool, ["notion", "slack"])
    assert view.totals == {"pending": 2, "processing": 1, "completed": 3, "failed": 1}
    assert view.counts["notion"] == {"pending": 1, "processing": 1, "completed": 1, "failed": 1}
    assert view.recent_total.completed == 3 and view.recent_total.failed == 1
    # Lags 12 s, 20 s (slack) and 35 s (notion): p50 20, p95 33.5 (interpolated), max 35.
    assert view.recent_total.lag_p50_seconds == pytest.approx(20, abs=0.01)
    assert view.recent_total.lag_p95_seconds == pytest.approx(33.5, abs=0.01)
    assert view.recent["notion"].lag_max_seconds == pytest.approx(35, abs=0.01)
    assert view.overall_due_age > 60  # the Slack retry has been due since about 90 s ago
    await sign_in(client)
    overview = (await client.get("/admin/")).text
    assert "Queue overview" in overview and "33.5 s" in overview
    sources = (await client.get("/admin/sources")).text
    assert sources.count("not configured") >= 1  # Slack: no signing secret in these settings
    assert "ReadTimeout: conversations.history" in sources
    listed = (await client.get("/admin/jobs", params={"source": "notion", "status": "pending"})).text
    assert f'data-job="{seeded.pending_job}"' in listed
    assert f'data-job="{seeded.failed_job}"' not in listed
    docs = (await client.get("/admin/documents", params={"q": "LAUNCH"})).text
    assert "Launch plan" in docs and "Hello world" not in docs
    assert "Hello world" in (await client.get("/admin/documents", params={"source": "slack"})).text


async def test_paging_walks_every_job_once(client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]) -> None:
    for i in range(120):
        await queue.resync(pool, "notion", f"page-{i:03d}")
    await sign_in(client)
    seen: list[str] = []
    url: str | None = "/admin/jobs"
    while url:
        html = (await client.get(url)).text
        seen += re.findall(r'data-job="(\d+)"', html)
        match = re.search(r'id="next-page" href="([^"]+)"', html)
        url = match.group(1).replace("&amp;", "&") if match else None
    assert len(seen) == 120 and len(set(seen)) == 120


async def test_the_admin_api_under_admin_is_still_the_json_api(client: httpx.AsyncClient) -> None:
    r = await client.get("/admin/verification-token/notion", headers={"authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert (await client.get("/admin/verification-token/notion")).status_code == 401


async def test_unexpected_errors_and_a_database_down_are_html_pages(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sign_in(client)

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom <b>")

    async def down(*_: Any, **__: Any) -> Any:
        raise PoolTimeout("no connection")

    monkeypatch.setattr(data, "overview", broken)
    r = await client.get("/admin/")
    assert r.status_code == 500 and r.headers["content-type"].startswith("text/html")
    assert "boom" not in r.text and r.headers["x-frame-options"] == "DENY"
    monkeypatch.setattr(data, "overview", down)
    r = await client.get("/admin/")
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    assert "database is unavailable" in r.text


def test_the_secure_cookie_setting_is_read_from_the_environment() -> None:
    assert Settings.from_env({}).dashboard_secure_cookie is False
    assert Settings.from_env({"DEBOUNCE_DASHBOARD_SECURE_COOKIE": "true"}).dashboard_secure_cookie
    with pytest.raises(ValueError, match="DEBOUNCE_DASHBOARD_SECURE_COOKIE"):
        Settings.from_env({"DEBOUNCE_DASHBOARD_SECURE_COOKIE": "maybe"})


async def test_the_sources_screen_shows_connected_workspaces_and_their_status(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    from debounce import workspaces
    from debounce.infra.secrets import Keyring, new_key

    keyring = Keyring(new_key())
    a = await workspaces.save(
        pool,
        keyring,
        source_type="slack",
        external_id="TACME",
        name="Acme team",
        credentials={"access_token": "xoxb-acme"},
    )
    await workspaces.save(
        pool,
        keyring,
        source_type="slack",
        external_id="TBETA",
        name="Beta team",
        credentials={"access_token": "xoxb-beta"},
    )
    await workspaces.set_status(pool, a["id"], "revoked", "invalid_auth from conversations.history")
    await sign_in(client)
    html = (await client.get("/admin/sources")).text
    # Each workspace by name with both its ids: the numeric one and the source's.
    for name, number, external in (("Acme team", a["id"], "TACME"), ("Beta team", a["id"] + 1, "TBETA")):
        assert re.search(
            rf'id="workspace-{number}">\s*<tr>\s*<td class="ws-name">'
            rf'<a href="/admin/workspaces/{number}">{name}</a></td>'
            rf'.*?<strong class="ws-id">{number}</strong> <span class="muted">· '
            rf'source id</span> <code class="ws-source-id">{external}</code>',
            html,
            re.S,
        ), html
    assert "revoked" in html and "invalid_auth from conversations.history" in html
    assert "xoxb-" not in html
    # The budget of each workspace, and a backfill button for the active one (CSRF-checked).
    assert "45/min, burst 5 (source default); 5 available now" in html
    assert html.count("/backfill") == 1
    beta = (await workspaces.list_workspaces(pool))[1]
    assert (
        await client.post(f"/admin/workspaces/{beta['id']}/backfill", data={"csrf_token": "wrong"})
    ).status_code == 403
    r = await client.post(f"/admin/workspaces/{beta['id']}/backfill", data={"csrf_token": csrf_of(html)})
    assert r.status_code == 303 and r.headers["location"].endswith("/admin/sources")
    html = (await client.get("/admin/sources")).text
    assert "Backfill of workspace" in html and "backfill running: 0 listed" in html
    r = await client.post(f"/admin/workspaces/{a['id']}/backfill", data={"csrf_token": csrf_of(html)})
    assert (
        f"Workspace {a['id']} (TACME) is revoked: resume it first"
        in (await client.get("/admin/sources")).text
    )
    # A workspace whose token no worker can decrypt: its backfill waits, and the message
    # says why.
    await workspaces.set_credentials_error(pool, beta["id"], workspaces.NO_KEY)
    await client.post(f"/admin/workspaces/{beta['id']}/backfill", data={"csrf_token": csrf_of(html)})
    assert (
        f"Backfill of workspace {beta['id']} (TBETA) already running: it waits, as the "
        f"workspace's jobs do, because {workspaces.NO_KEY}."
        in unescape((await client.get("/admin/sources")).text)
    )
    assert (
        await client.post("/admin/workspaces/99999/backfill", data={"csrf_token": csrf_of(html)})
    ).status_code == 404


async def test_completed_jobs_are_counted_per_workspace_within_the_job_retention(
    pool: AsyncConnectionPool[Any],
) -> None:
    from dashboard_seed import seed_workspaces

    ws = await seed_workspaces(pool)
    configured: dict[str, tuple[bool, str | None]] = {"notion": (True, None), "slack": (True, None)}

    async def completed(window: float) -> dict[int | None, int]:
        views = await ws_data.source_views(pool, configured, completed_window_seconds=window)
        return {w.workspace_id: w.jobs["completed"] for v in views for w in v.workspaces}

    assert await completed(7 * 86400) == {ws.notion: 3, ws.slack: 5, ws.revoked: 0}
    assert await completed(30 * 86400) == {ws.notion: 4, ws.slack: 5, ws.revoked: 0}
    assert await completed(3600) == {ws.notion: 0, ws.slack: 5, ws.revoked: 0}
    # The page's window is the job retention, and its header says so.
    application = create_app(settings(job_retention_seconds=30 * 86400.0), pool=pool)
    async with application.router.lifespan_context(application), await open_client(application) as c:
        await sign_in(c)
        html = (await c.get("/admin/sources")).text
    assert html.count("last 30 days") == 4  # title and heading of both sources' tables
    assert re.search(rf'id="workspace-{ws.notion}">.*?data-state="completed"><a [^>]*>4</a>', html, re.S)
