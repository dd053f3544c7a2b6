"""The dashboard in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by .ci/run) driven by Selenium against the app served on
loopback with its lifespan, over a database filled through ``debounce.queue``.

Marked ``browser``: ``pytest`` deselects them; ``pytest -m browser`` runs them, and fails at
once with one line saying what to install where Chromium is missing (``tests/chromium.py``).

With ``DEBOUNCE_SCREENSHOTS=<dir>`` the tests also save one screenshot per screen there
(``DEBOUNCE_SCREENSHOTS=docs/dashboard pytest tests/test_dashboard_browser.py`` refreshes the
ones in docs/dashboard.md).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import one_job
import pytest
from chromium import CHROMEDRIVER, CHROMIUM
from dashboard_seed import (
    ADMIN,
    FAILED_PAGE,
    LONG_ERROR,
    SLACK_CHANNEL,
    SYNCED_PAGE,
    seed,
    seed_workspaces,
)
from psycopg_pool import AsyncConnectionPool
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait
from test_notion_sync import make_job

from debounce import queue, workspaces
from debounce.config import Settings
from debounce.contract import SyncContext
from debounce.documents.store import DocumentStore
from debounce.types import JobStatus
from debounce.web import create_app
from integrations.notion import NotionSettings, NotionSyncer
from standins.notion_api import DEMO_PAGE_ID, FakeNotion
from standins.server import BackgroundServer

pytestmark = pytest.mark.browser

SCREENSHOTS = os.environ.get("DEBOUNCE_SCREENSHOTS")


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """A fresh headless Chromium (own profile directory), 1280 px wide (the session has
    checked that Chromium is installed: ``conftest.py``)."""
    profile = tempfile.mkdtemp(prefix="debounce-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def served(database_url: str) -> Iterator[str]:
    """The web app (dashboard included) on loopback, its own pool on ``database_url``."""
    settings = Settings(
        database_url=database_url, admin_token=ADMIN, notion_webhook_secret="secret_browser_test"
    )
    with BackgroundServer(create_app(settings), lifespan="on") as server:
        yield server.url


def shoot(driver: WebDriver, name: str) -> None:
    """Save the whole page as ``<DEBOUNCE_SCREENSHOTS>/<name>.png`` when that is set."""
    if not SCREENSHOTS:
        return
    chrome, height = driver.execute_script(
        "return [window.outerHeight - window.innerHeight, document.documentElement.scrollHeight]"
    )
    driver.set_window_size(1280, max(700, min(int(height) + int(chrome), 2400)))
    Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))
    driver.set_window_size(1280, 900)


def wait_for(driver: WebDriver, css: str) -> Any:
    return WebDriverWait(driver, 10).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def sign_in(driver: WebDriver, base: str, token: str = ADMIN) -> None:
    driver.get(f"{base}/admin/")
    wait_for(driver, "#token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()


def wait_flash(driver: WebDriver, text: str) -> None:
    """Wait for the next page's flash message containing ``text`` (a click does not wait for
    the page it loads)."""
    WebDriverWait(driver, 10).until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".flash"), text))


def wait_rows(driver: WebDriver, css: str, count: int) -> list[Any]:
    """Wait until ``css`` matches ``count`` elements; those elements."""
    WebDriverWait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, css)) == count)
    return list(driver.find_elements(By.CSS_SELECTOR, css))


async def test_sign_in_overview_sources_and_sign_out(
    browser: WebDriver, database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    await seed(pool)
    with served(database_url) as base:
        browser.get(f"{base}/admin/jobs")
        assert "/admin/login" in browser.current_url
        shoot(browser, "login")
        sign_in(browser, base, token="not-the-token")
        assert wait_for(browser, "#login-error").text == "Wrong admin token."
        assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in"

        sign_in(browser, base)
        wait_flash(browser, "Signed in.")
        assert wait_for(browser, "h1").text == "Queue overview"
        tile = browser.find_element(By.CSS_SELECTOR, "#tile-pending .value")
        assert tile.text == "2"
        assert browser.find_element(By.CSS_SELECTOR, "#tile-failed .value").text == "1"
        assert browser.find_element(By.CSS_SELECTOR, "#tile-synced .value").text == "3"
        notion_row = browser.find_element(By.XPATH, "//table[@id='by-state']//tr[td/a[text()='notion']]")
        cells = {
            c.get_attribute("data-state"): c.text
            for c in notion_row.find_elements(By.CSS_SELECTOR, "td[data-state]")
        }
        assert cells == {"pending": "1", "processing": "1", "completed": "1", "failed": "1"}
        # The session cookie as the browser keeps it.
        [cookie] = browser.get_cookies()
        assert cookie["name"] == "debounce_session" and cookie["httpOnly"]
        assert cookie["sameSite"] == "Strict" and cookie["path"] == "/admin"
        shoot(browser, "overview")

        browser.find_element(By.LINK_TEXT, "Sources").click()
        wait_for(browser, "#source-notion")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Sources"
        notion = browser.find_element(By.ID, "source-notion")
        slack = browser.find_element(By.ID, "source-slack")
        assert notion.find_element(By.CSS_SELECTOR, "h2 .badge").text == "configured"
        assert slack.find_element(By.CSS_SELECTOR, "h2 .badge").text == "not configured"
        assert "SLACK_SIGNING_SECRET" in slack.text
        assert "ReadTimeout" in slack.find_element(By.CSS_SELECTOR, ".last-error").text
        assert "403 restricted_resource" in notion.find_element(By.CSS_SELECTOR, ".last-error").text
        # No workspace connected: one "default" row per source, completed in the last 7 days.
        assert completed_of(notion) == "1" and completed_of(slack) == "2"

        browser.find_element(By.ID, "logout").click()
        wait_flash(browser, "Signed out.")
        assert "/admin/login" in browser.current_url
        browser.get(f"{base}/admin/jobs")
        assert "/admin/login" in browser.current_url and wait_for(browser, "#token")


def completed_of(row: Any) -> str:
    """The text of the "completed" cell of the first workspace row inside ``row``."""
    return str(row.find_element(By.CSS_SELECTOR, "td[data-state='completed']").text)


def lines_high(driver: WebDriver, element: Any) -> float:
    """How many lines of its own text ``element`` is rendered on (its height over its line
    height)."""
    height, line = driver.execute_script(
        "const s = getComputedStyle(arguments[0]);"
        "return [arguments[0].getBoundingClientRect().height, parseFloat(s.lineHeight) ||"
        " parseFloat(s.fontSize) * 1.45];",
        element,
    )
    return float(height) / float(line)


async def test_sources_show_each_workspace_its_ids_completed_jobs_and_errors_on_one_line(
    browser: WebDriver, database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    ws = await seed_workspaces(pool)
    with served(database_url) as base:
        sign_in(browser, base)
        wait_for(browser, "#tile-pending")
        browser.find_element(By.LINK_TEXT, "Sources").click()
        notion = wait_for(browser, f"#workspace-{ws.notion}")
        acme = browser.find_element(By.ID, f"workspace-{ws.slack}")
        beta = browser.find_element(By.ID, f"workspace-{ws.revoked}")
        # Completed within the job retention (7 days by default): Quantify Labs 3 (its sync of
        # 8 days ago is outside), Acme 5, Beta none; the header says which window.
        assert [completed_of(notion), completed_of(acme), completed_of(beta)] == ["3", "5", "0"]
        header = browser.find_element(By.CSS_SELECTOR, "#source-notion thead th:nth-child(5)")
        assert header.text.replace("\n", " ") == "COMPLETED last 7 days"
        assert "DEBOUNCE_JOB_RETENTION_SECONDS" in str(header.get_attribute("title"))
        assert acme.find_element(By.CSS_SELECTOR, "td[data-state='failed']").text == "1"
        # Both ids of each workspace: the numeric one and the source's.
        for row, number, external in (
            (notion, ws.notion, ws.notion_external),
            (acme, ws.slack, ws.slack_external),
            (beta, ws.revoked, ws.revoked_external),
        ):
            ids = row.find_element(By.CSS_SELECTOR, ".ids")
            assert ids.text == f"id {number} · source id {external}"
        # The last error is one line (not a column of 10-character lines), the whole text
        # on hover and on its job's page.
        error = acme.find_element(By.CSS_SELECTOR, ".last-error")
        assert error.get_attribute("title") == LONG_ERROR
        assert error.text.startswith("SlackApiError: The request to the Slack API failed.")
        assert lines_high(browser, error) <= 1.5
        # wide enough to read (the Sources page has gained workspace columns: 283 px at 1280 px)
        assert error.size["width"] >= 200
        box = acme.find_element(By.CSS_SELECTOR, ".error-box")
        assert lines_high(browser, box) < 3  # the error and its job's line; not 40 lines
        assert "invalid_auth from conversations.history" in str(
            beta.find_element(By.CSS_SELECTOR, ".auth-error").get_attribute("title")
        )
        # A token no worker's key decrypts: the workspace's credentials error, next to its
        # last error (none here), one line, the whole text on hover.
        parked = notion.find_element(By.CSS_SELECTOR, ".credentials-error")
        assert parked.text.startswith("credentials the worker's DEBOUNCE_SECRET_KEY does not decrypt")
        assert str(parked.get_attribute("title")).startswith(f"{workspaces.WRONG_KEY} (since ")
        assert lines_high(browser, parked) <= 1.5
        assert not acme.find_elements(By.CSS_SELECTOR, ".credentials-error")
        shoot(browser, "sources")
        acme.find_element(By.LINK_TEXT, f"job {ws.failed_job}").click()
        assert wait_for(browser, "#last-error").text == LONG_ERROR


async def test_filter_jobs_open_one_retry_and_resync(
    browser: WebDriver, database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    seeded = await seed(pool)
    with served(database_url) as base:
        sign_in(browser, base)
        wait_for(browser, "#tile-pending")
        browser.find_element(By.LINK_TEXT, "Jobs").click()
        wait_rows(browser, "#jobs tbody tr[data-job]", 7)
        shoot(browser, "jobs")

        Select(browser.find_element(By.ID, "filter-status")).select_by_value("failed")
        browser.find_element(By.ID, "apply-filters").click()
        WebDriverWait(browser, 10).until(ec.url_contains("status=failed"))
        rows = wait_rows(browser, "#jobs tbody tr[data-job]", 1)
        assert [r.get_attribute("data-job") for r in rows] == [str(seeded.failed_job)]
        Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
        page_filter = browser.find_element(By.ID, "filter-page")
        page_filter.send_keys(FAILED_PAGE)
        listed = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.ID, "apply-filters").click()
        # one row before and after: wait for the new page, not the old one's row
        WebDriverWait(browser, 10).until(ec.staleness_of(listed))
        WebDriverWait(browser, 10).until(ec.url_contains("page_id="))
        rows = wait_rows(browser, "#jobs tbody tr[data-job]", 1)
        assert browser.find_element(By.ID, "filter-page").get_attribute("value") == FAILED_PAGE
        assert [r.get_attribute("data-job") for r in rows] == [str(seeded.failed_job)]

        browser.find_element(By.LINK_TEXT, str(seeded.failed_job)).click()
        payload = wait_for(browser, "#payload").text
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Job {seeded.failed_job}")
        assert '"workspace_name": "Quantify Labs"' in payload and "\n  " in payload
        assert "<b>(share it" in browser.find_element(By.ID, "last-error").text  # as text
        fields = browser.find_element(By.ID, "job-fields").text
        assert "attempts 1 of 5" in fields and "events 1" in fields
        shoot(browser, "job")

        # A POST whose CSRF field was emptied is refused, and changes nothing.
        browser.execute_script("document.querySelector('form button.retry').form.csrf_token.value = ''")
        browser.find_element(By.CSS_SELECTOR, "button.retry").click()
        assert "CSRF" in wait_for(browser, "#error-detail").text
        job = await queue.get(pool, seeded.failed_job)
        assert job is not None and job.status is JobStatus.FAILED

        browser.get(f"{base}/admin/jobs/{seeded.failed_job}")
        wait_for(browser, "button.retry").click()
        wait_flash(browser, "pending again, due now")
        job = await queue.get(pool, seeded.failed_job)
        assert job is not None and job.status is JobStatus.PENDING
        assert job.scheduled_at <= datetime.now(UTC)
        assert not browser.find_elements(By.CSS_SELECTOR, "button.retry")

        browser.get(f"{base}/admin/jobs/{seeded.synced_job}")
        wait_for(browser, "button.resync").click()
        wait_flash(browser, f"Re-sync of notion/{SYNCED_PAGE} requested")
        active = await one_job.active_for_page(pool, "notion", SYNCED_PAGE)
        assert active is not None and active.priority == queue.RESYNC_PRIORITY
        assert active.scheduled_at <= datetime.now(UTC)
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Job {active.id}")

        # Re-sync by page id from the sources page.
        browser.find_element(By.LINK_TEXT, "Sources").click()
        form = wait_for(browser, "#source-slack form")
        form.find_element(By.NAME, "page_id").send_keys("C0NEWCHAN1")
        form.find_element(By.TAG_NAME, "button").click()
        wait_flash(browser, "Re-sync of slack/C0NEWCHAN1 requested")
        assert await one_job.active_for_page(pool, "slack", "C0NEWCHAN1") is not None


async def test_documents_search_and_rendered_markdown(
    browser: WebDriver, database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    seeded = await seed(pool)
    with served(database_url) as base:
        sign_in(browser, base)
        wait_for(browser, "#tile-pending")
        browser.find_element(By.LINK_TEXT, "Documents").click()
        rows = wait_rows(browser, "#documents tbody tr", 2)
        # The id a person types into `debounce documents --id` first, the row id labelled.
        assert [r.find_element(By.CSS_SELECTOR, ".doc-id").text for r in rows] == [
            f"{SLACK_CHANNEL}/1763682934.000200",
            SYNCED_PAGE,
        ]
        assert rows[1].find_element(By.CSS_SELECTOR, ".row-id").text == str(seeded.document)
        headers = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#documents th")]
        assert headers[0] == "DOCUMENT ID" and headers[-1] == "ID"
        assert "debounce documents --id <document id>" in browser.find_element(By.TAG_NAME, "main").text
        shoot(browser, "documents")
        browser.find_element(By.ID, "doc-q").send_keys("launch")
        browser.find_element(By.ID, "doc-search").click()
        WebDriverWait(browser, 10).until(ec.url_contains("q=launch"))
        rows = wait_rows(browser, "#documents tbody tr", 1)
        assert "Launch plan" in rows[0].text

        rows[0].find_element(By.LINK_TEXT, "Launch plan").click()
        rendered = wait_for(browser, "#rendered")
        assert rendered.find_element(By.TAG_NAME, "h1").text == "Launch plan"
        assert rendered.find_element(By.TAG_NAME, "strong").text == "launch"
        assert rendered.find_element(By.TAG_NAME, "table")
        assert len(rendered.find_elements(By.TAG_NAME, "li")) == 2
        # The stored <script> and <img onerror> are text, not elements, and never ran.
        assert rendered.find_elements(By.TAG_NAME, "script") == []
        assert rendered.find_elements(By.TAG_NAME, "img") == []
        assert "<script>window.__pwned = true;" in rendered.text
        assert browser.execute_script("return window.__pwned === undefined") is True
        assert "pwned" not in browser.title
        assert "<script>" in browser.find_element(By.ID, "raw").text
        # The command the page shows prints this document, and so does the numeric id.
        command = browser.find_element(By.ID, "doc-cli").text
        assert command == f"debounce documents --id {SYNCED_PAGE}"
        assert f"(id {seeded.document})" in browser.find_element(By.CSS_SELECTOR, "p.muted").text
        assert browser.find_element(By.ID, "audience").text == (
            "Notion workspace: accessible by 2 (1edc05f6-2702-81b5-8408-00279347f034, "
            "556a1abf-4f08-40c6-878a-75890d2a88ba), as its latest event said"
        )
        for args in (command.split()[1:], ["documents", "--id", str(seeded.document)]):
            printed = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "debounce", *args],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "DATABASE_URL": database_url},
            )
            assert printed.returncode == 0, printed.stderr
            assert printed.stdout.startswith("# Launch plan")
        shoot(browser, "document")

        browser.find_element(By.CSS_SELECTOR, "button.resync").click()
        wait_flash(browser, f"Re-sync of notion/{SYNCED_PAGE} requested")
        assert browser.current_url.endswith(f"/admin/documents/{seeded.document}")
        assert await one_job.active_for_page(pool, "notion", SYNCED_PAGE) is not None


async def test_demo_launch_plan_renders_its_callout_and_table_as_elements(
    browser: WebDriver, database_url: str, pool: AsyncConnectionPool[Any]
) -> None:
    """The demo's "Launch plan" read by the markdown endpoint (Notion's enhanced Markdown,
    converted; issue 23) shows as HTML elements, not as literal tags, and the CLI prints the
    same GFM."""
    fake = FakeNotion.demo()
    with BackgroundServer(fake.app()) as srv:
        notion = NotionSyncer(NotionSettings(notion_token=fake.token, notion_base_url=srv.url))
        try:
            await notion.sync(make_job(DEMO_PAGE_ID), SyncContext(store=DocumentStore(pool)))
        finally:
            await notion.aclose()
    assert fake.calls["pages.markdown"] == 1 and fake.calls["blocks.children.list"] == 0
    doc = await DocumentStore(pool).get("notion", DEMO_PAGE_ID)
    assert doc is not None
    with served(database_url) as base:
        sign_in(browser, base)
        wait_for(browser, "#tile-pending")
        browser.get(f"{base}/admin/documents/{doc['id']}")
        rendered = wait_for(browser, "#rendered")
        callout = rendered.find_element(By.TAG_NAME, "blockquote")
        assert callout.text == "💡 This page is served by debounce's local Notion stand-in."
        cells = [
            [c.get_attribute("textContent") for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
            for row in rendered.find_elements(By.CSS_SELECTOR, "table tr")
        ]
        assert cells == [
            ["Source", "Debounce", "Max wait"],
            ["Notion", "300 s", "3600 s"],
            ["Slack", "30 s", "300 s"],
        ]
        boxes = rendered.find_elements(By.CSS_SELECTOR, "li.task-list-item input[type=checkbox]")
        assert [b.is_selected() for b in boxes] == [True, True, False]
        assert [c.text for c in rendered.find_elements(By.CSS_SELECTOR, "p code")] == ["debounce_seconds"]
        assert [h.text for h in rendered.find_elements(By.TAG_NAME, "h2")] == [
            "Checklist",
            "How a sync works",
            "Comments",  # the page's open discussions (issue 41)
        ]
        text = rendered.text
        for literal in ("<callout", "<table", "<details", "<tr>", "<td>", "<database", "</"):
            assert literal not in text, literal
        assert "Details\nRetries back off exponentially with jitter." in text
        printed = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "debounce", "documents", "--id", DEMO_PAGE_ID],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DATABASE_URL": database_url},
        )
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.startswith("# Launch plan\n")
        assert "> 💡 This page is served by debounce's local Notion stand-in.\n" in printed.stdout
        assert "| Notion | 300 s | 3600 s |\n" in printed.stdout
        assert "- [x] Verify the webhook signature\n" in printed.stdout
        assert "<callout" not in printed.stdout and "<table" not in printed.stdout
        shoot(browser, "document-demo")
