"""The dashboard's workspaces over HTTP (httpx, real database): the workspace page, the job
list's workspace filter and column, the documents' workspace filter, the Sources page's
per-workspace counts and their links, and backfill figures that add up."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import httpx
import pytest
from dashboard_seed import LONG_ERROR, SeededWorkspaces, seed, seed_workspaces
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from test_dashboard import csrf_of, open_client, settings, sign_in

from debounce import queue, workspaces
from debounce.contract import BackfillItem
from debounce.documents.store import Document, DocumentStore
from debounce.infra.secrets import Keyring, new_key
from debounce.queue import backfills
from debounce.types import JobEvent
from debounce.web import create_app
from debounce.workspaces import budgets

WEEK = 7 * 86400


@pytest.fixture
async def client(pool: AsyncConnectionPool[Any]) -> AsyncIterator[httpx.AsyncClient]:
    application: Starlette = create_app(settings(), pool=pool)
    async with application.router.lifespan_context(application), await open_client(application) as c:
        await sign_in(c)
        yield c


@pytest.fixture
async def ws(pool: AsyncConnectionPool[Any]) -> SeededWorkspaces:
    await seed(pool)  # jobs and documents of no workspace besides the workspaces' own
    return await seed_workspaces(pool)


def job_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-job="(\d+)"', html)]


def cell(html: str, css_id: str) -> str:
    """The text of the element with id ``css_id`` (tags stripped, spaces collapsed; up to
    the first closing tag of its kind: no nested element of the same kind)."""
    match = re.search(rf'<(\w+)[^>]* id="{css_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, (css_id, html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", match.group(2))).split())


def figures(html: str) -> dict[str, int]:
    """The backfill table's figures of a workspace page."""
    return {k: int(v) for k, v in re.findall(r'data-figure="([a-z-]+)">(\d+)', html)}


async def test_the_job_list_filters_by_workspace_and_names_each_jobs_workspace(
    client: httpx.AsyncClient, ws: SeededWorkspaces
) -> None:
    everything = (await client.get("/admin/jobs")).text
    acme = (await client.get("/admin/jobs", params={"workspace": ws.slack})).text
    labs = (await client.get("/admin/jobs", params={"workspace": ws.notion})).text
    assert len(job_ids(acme)) == 6 and ws.failed_job in job_ids(acme)  # 5 completed, 1 failed
    assert len(job_ids(labs)) == 4  # 4 completed
    assert not set(job_ids(acme)) & set(job_ids(labs))
    assert len(job_ids(everything)) == 7 + 10  # seed()'s 7, of no workspace, and these 10
    # The workspace column: the name, linked to the workspace page; "—" for no workspace.
    assert acme.count(f'<a href="/admin/workspaces/{ws.slack}" title="workspace {ws.slack}">Acme</a>') == 6
    assert everything.count('title="no workspace: the source\'s settings">—') == 7
    assert "Jobs of workspace" in acme and ">Acme</a> (slack, id" in acme
    # With the other filters: state, source, the window of "completed".
    completed: dict[str, str | int] = {"workspace": ws.notion, "status": "completed"}
    assert len(job_ids((await client.get("/admin/jobs", params=completed)).text)) == 4
    recent = (await client.get("/admin/jobs", params={**completed, "finished_within": WEEK})).text
    assert len(job_ids(recent)) == 3 and "Finished in the last 7 days" in recent
    failed = (await client.get("/admin/jobs", params={"workspace": ws.slack, "status": "failed"})).text
    assert job_ids(failed) == [ws.failed_job]
    assert (
        job_ids((await client.get("/admin/jobs", params={"workspace": ws.slack, "source": "notion"})).text)
        == []
    )
    # A workspace with no jobs: an empty list that says so.
    beta = (await client.get("/admin/jobs", params={"workspace": ws.revoked})).text
    assert job_ids(beta) == [] and "No jobs match: workspace Beta has none." in beta


async def test_a_malformed_workspace_filter_is_400_and_an_unknown_one_404(
    client: httpx.AsyncClient, ws: SeededWorkspaces
) -> None:
    for path in ("/admin/jobs", "/admin/documents"):
        for bad in ("abc", "0", "-1", "1.5", "%C2%B2", "99999999999999999999", "9" * 5000):
            r = await client.get(f"{path}?workspace={bad}")
            assert r.status_code == 400, (path, bad, r.text[:300])
            assert "workspace must be a workspace&#39;s numeric id" in r.text
        r = await client.get(f"{path}?workspace=424242")
        assert r.status_code == 404 and "no workspace 424242" in r.text
        assert r.headers["content-type"].startswith("text/html")
        assert (await client.get(f"{path}?workspace=%20{ws.slack}%20")).status_code == 200
    for bad in ("abc", "0", "-5", "1e5", "inf"):
        r = await client.get(f"/admin/jobs?finished_within={bad}")
        assert r.status_code == 400 and "finished_within must be a number of seconds" in r.text
    for bad in ("abc", "0", "99999999999999999999", "9" * 5000):
        assert (await client.get(f"/admin/workspaces/{bad}")).status_code == 404
    r = await client.get("/admin/workspaces/424242")
    assert r.status_code == 404 and "no workspace 424242" in r.text


async def test_every_count_of_the_sources_page_opens_a_list_of_that_many(
    client: httpx.AsyncClient, ws: SeededWorkspaces
) -> None:
    html = (await client.get("/admin/sources")).text
    followed = 0
    for number in (ws.notion, ws.slack, ws.revoked):
        row = html.split(f'id="workspace-{number}">', 1)[1].split("</tbody>", 1)[0]
        # The name links to the workspace page.
        assert f'<td class="ws-name"><a href="/admin/workspaces/{number}">' in row
        for href, shown in re.findall(r'<a href="(/admin/(?:jobs|documents)\?[^"]+)">(\d+)</a>', row):
            url = unescape(href)
            assert f"workspace={number}" in url
            listed = (await client.get(url)).text
            rows = re.findall(r'data-(?:job|document)="\d+"', listed)
            assert len(rows) == int(shown), (url, shown, len(rows))
            followed += 1
    # Quantify Labs: 3 completed (the 7-day window), 2 live documents and 1 marked deleted;
    # Acme: 5 completed, 1 failed, 4 documents; Beta nothing.
    assert followed == 6
    assert re.search(
        rf'href="/admin/jobs\?workspace={ws.notion}&amp;status=completed&amp;'
        rf'finished_within={WEEK}">3</a>',
        html,
    )
    documents = re.findall(r'<a href="/admin/documents\?workspace=(\d+)&amp;state=(\w+)">(\d+)</a>', html)
    assert documents == [
        (str(ws.notion), "live", "2"),
        (str(ws.notion), "deleted", "1"),
        (str(ws.slack), "live", "4"),
    ]
    # The documents list filtered by workspace names it.
    labs_docs = (await client.get("/admin/documents", params={"workspace": ws.notion})).text
    assert "Documents of workspace" in labs_docs and ">Quantify Labs</a> (notion" in labs_docs
    assert len(re.findall(r'data-document="\d+"', labs_docs)) == 3  # 2 live, 1 deleted
    assert labs_docs.count('badge bad">deleted') == 1
    r = await client.get("/admin/documents", params={"workspace": ws.notion, "state": "gone"})
    assert r.status_code == 400 and "unknown document state" in r.text


async def test_the_workspace_page_shows_its_jobs_documents_budget_and_errors(
    client: httpx.AsyncClient, ws: SeededWorkspaces, pool: AsyncConnectionPool[Any]
) -> None:
    labs = (await client.get(f"/admin/workspaces/{ws.notion}")).text
    assert "<h1>Workspace Quantify Labs" in labs and cell(labs, "workspace-status") == "active"
    assert cell(labs, "workspace-credentials-badge") == "credentials error"
    assert workspaces.WRONG_KEY in cell(labs, "workspace-credentials")
    assert ws.notion_external in labs
    assert cell(labs, "workspace-documents") == "2 and 1 marked deleted"
    assert f'href="/admin/documents?workspace={ws.notion}&amp;state=live">2</a>' in labs
    states = dict(re.findall(r'data-state="(\w+)">(?:<a [^>]*>)?(\d+)', labs))
    assert states == {"pending": "0", "processing": "0", "completed": "3", "failed": "0"}
    assert (
        f'href="/admin/jobs?workspace={ws.notion}&amp;status=completed&amp;finished_within={WEEK}">3</a>'
    ) in labs
    assert cell(labs, "budget-available") == "20"  # Notion's default burst, full
    assert cell(labs, "budget-rate") == "150 requests/min (source default)"
    assert cell(labs, "budget-burst") == "20"
    assert cell(labs, "budget-blocked") == "not blocked"
    assert cell(labs, "workspace-last-error") == "none"
    assert len(job_ids(labs)) == 4 and cell(labs, "backfill-summary") == "never backfilled"
    assert 'id="backfill-button"' in labs  # active: the credentials error makes it wait

    # Acme: its own budget, a rate limit in force, the failed job's error.
    await budgets.set_budget(pool, ws.slack, 30, 3)
    await workspaces.block(pool, ws.slack, 120, "ratelimited: conversations.history")
    acme = (await client.get(f"/admin/workspaces/{ws.slack}")).text
    states = dict(re.findall(r'data-state="(\w+)">(?:<a [^>]*>)?(\d+)', acme))
    assert states == {"pending": "0", "processing": "0", "completed": "5", "failed": "1"}
    assert cell(acme, "budget-rate") == "30 requests/min (set for this workspace)"
    assert cell(acme, "budget-burst") == "3"
    assert cell(acme, "budget-available") == "3"
    blocked = cell(acme, "budget-blocked")
    assert blocked.startswith("blocked until ")
    assert re.search(r"\(in (1 min 5\d|2 min 0) s\)", blocked), blocked  # 120 s from now
    assert blocked.endswith("— ratelimited: conversations.history")
    error = cell(acme, "workspace-last-error")
    assert error.startswith(unescape(LONG_ERROR)) and f"job {ws.failed_job} failed" in error
    assert cell(acme, "workspace-documents") == "4" and len(job_ids(acme)) == 6

    beta = (await client.get(f"/admin/workspaces/{ws.revoked}")).text
    assert cell(beta, "workspace-status") == "revoked" and 'id="backfill-button"' not in beta
    assert cell(beta, "workspace-auth-error").startswith("invalid_auth from conversations.history")
    assert cell(beta, "workspace-documents") == "0" and job_ids(beta) == []

    # The backfill button comes back to the workspace page.
    r = await client.post(
        f"/admin/workspaces/{ws.slack}/backfill",
        data={"csrf_token": csrf_of(acme), "back": f"/admin/workspaces/{ws.slack}"},
    )
    assert r.status_code == 303 and r.headers["location"] == f"/admin/workspaces/{ws.slack}"
    acme = (await client.get(r.headers["location"])).text
    assert "Backfill of workspace" in acme and "started" in acme
    assert cell(acme, "backfill-summary").startswith(
        "backfill running: 0 listed = 0 current + 0 to sync + 0 already had a job"
    )


async def _synced_document(
    pool: AsyncConnectionPool[Any], workspace_id: int, page: str, edited: datetime
) -> None:
    """``page`` synced by a job of ``workspace_id`` (its document is the workspace's)."""
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion",
                page,
                {},
                event_id=None,
                debounce_seconds=0,
                max_wait_seconds=0,
                workspace_id=workspace_id,
            )
        ],
    )
    [job] = [
        c.job for c in await queue.claim(pool, "w0", limit=1, lease_seconds=60, source_slots={"notion": 1})
    ]
    await (
        DocumentStore(pool)
        .fenced(job)
        .upsert(Document("notion", page, page, page, f"# {page}\n", source_updated_at=edited))
    )
    await queue.settle(pool, completed=[job])


async def test_backfill_figures_add_up_when_a_listed_page_already_had_a_job(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any]
) -> None:
    now = datetime.now(UTC)
    row = await workspaces.save(
        pool,
        Keyring(new_key()),
        source_type="notion",
        external_id="W-BACKFILL",
        name="Docs team",
        credentials={"access_token": "ntn_docs"},
    )
    workspace = int(row["id"])
    await _synced_document(pool, workspace, "current", now - timedelta(days=1))
    await _synced_document(pool, workspace, "gone", now - timedelta(days=1))
    # A webhook's job for "edited", waiting out its debounce window during the backfill.
    await queue.enqueue(
        pool,
        [
            JobEvent(
                "notion",
                "edited",
                {"live": True},
                event_id="e1",
                debounce_seconds=300,
                max_wait_seconds=3600,
                workspace_id=workspace,
            )
        ],
    )
    started = await backfills.request(pool, workspace)
    assert started is not None
    assert await backfills.lease(pool, "w1", ["notion"], 60) is not None

    def item(page: str) -> BackfillItem:
        return BackfillItem(page, now - timedelta(days=2), {"entity": {"id": page}})

    await backfills.record_page(
        pool,
        started["id"],
        "w1",
        [item("current"), item("edited"), item("a"), item("b")],
        "cursor-2",
        lease_seconds=60,
        max_attempts=5,
    )
    await backfills.record_page(
        pool, started["id"], "w1", [item("c")], None, lease_seconds=60, max_attempts=5
    )
    # Two of the three bulk jobs synced; the live job is not due, so the claim skips it.
    for _ in range(2):
        [job] = [
            c.job
            for c in await queue.claim(pool, "w2", limit=1, lease_seconds=60, source_slots={"notion": 1})
        ]
        assert job.priority == backfills.BULK_PRIORITY
        await queue.settle(pool, completed=[job])
    await backfills.finish(pool, started["id"], "w1", max_attempts=5)  # re-checks "gone"

    html = (await client.get(f"/admin/workspaces/{workspace}")).text
    shown = figures(html)
    assert shown == {
        "listed": 5,
        "current": 1,
        "to-sync": 3,
        "had-a-job": 1,
        "rechecks": 1,
        "synced": 2,
        "remaining": 2,
    }
    # Every listed page is in exactly one category; the synced and the remaining split the
    # bulk jobs (the listed pages to sync and the re-check).
    assert shown["listed"] == shown["current"] + shown["to-sync"] + shown["had-a-job"]
    assert shown["synced"] + shown["remaining"] == shown["to-sync"] + shown["rechecks"]
    # Remaining 2 × 1 request a Notion page (issue 31) ÷ 150 a minute: 0.8 s.
    summary = (
        "backfill done: 5 listed = 1 current + 3 to sync + 1 already had a job; "
        "1 re-check (a document the listing no longer shows); 2 synced, 2 remaining, "
        "ETA 1 s"
    )
    assert cell(html, "backfill-summary") == summary
    sources = unescape((await client.get("/admin/sources")).text)
    assert f'<span class="backfill">{summary}</span>' in sources


async def test_the_workspace_page_and_metrics_show_requests_per_synced_page(
    client: httpx.AsyncClient, pool: AsyncConnectionPool[Any], ws: SeededWorkspaces
) -> None:
    from debounce.queue.backfills import BULK_PRIORITY
    from debounce.workspaces.sync_costs import SyncCosts, read

    page = (await client.get(f"/admin/workspaces/{ws.notion}")).text
    assert "no page synced yet" in cell(page, "workspace-costs")
    costs = SyncCosts(pool)
    costs.add(ws.notion, BULK_PRIORITY, 1000, 1000)  # a backfill: one request per page
    costs.add(ws.notion, 0, 10, 8)  # body edits, and a new page (2)
    costs.add(ws.notion, 0, 1, 0)  # a sync that yielded: its request counts
    await costs.flush()
    assert {c.lane: c.per_page for c in await read(pool, ws.notion)} == {"bulk": 1.0, "live": 11 / 8}
    page = (await client.get(f"/admin/workspaces/{ws.notion}")).text
    shown = cell(page, "workspace-costs")
    assert "live 1.38 (11 requests, 8 pages" in shown and "bulk 1.00 (1000 requests" in shown
    text = (await client.get("/metrics")).text
    labels = f'lane="bulk",source="notion",workspace="{ws.notion}"'
    assert f"debounce_workspace_requests_per_page{{{labels}}} 1.0" in text
    assert f"debounce_workspace_sync_requests{{{labels}}} 1000.0" in text
    assert f"debounce_workspace_synced_pages{{{labels}}} 1000.0" in text
    # a workspace id with no row: its counts are dropped, nothing fails
    costs.add(424242, 0, 3, 1)
    await costs.flush()
    assert all(c.workspace_id != 424242 for c in await read(pool))


async def test_a_workspace_and_its_jobs_speak_the_same_words(
    client: httpx.AsyncClient, ws: SeededWorkspaces, pool: AsyncConnectionPool[Any]
) -> None:
    """Issue 42, point 7: every time on the workspace page formatted, its newest jobs linked
    (id and page), a job's page naming its workspace, the documents' order said."""
    started = await backfills.request(pool, ws.slack)
    assert started is not None
    acme = (await client.get(f"/admin/workspaces/{ws.slack}")).text
    latest = unescape(re.sub(r"<[^>]+>", " ", acme.split('id="workspace-backfill"')[1].split("</tr>")[0]))
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", latest), latest
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d", acme), "a raw ISO time on the workspace page"
    ids = job_ids(acme)
    assert ids
    for job_id in ids:
        row = acme.split(f'data-job="{job_id}"')[1].split("</tr>")[0]
        assert row.count(f'href="/admin/jobs/{job_id}"') == 2, row  # the id and the page
    job_page = (await client.get(f"/admin/jobs/{ids[0]}")).text
    assert cell(job_page, "job-workspace") == "Acme"
    assert f'href="/admin/workspaces/{ws.slack}" id="job-workspace"' in job_page
    assert f"(id {ws.slack})" in job_page
    documents = (await client.get("/admin/documents")).text
    assert cell(documents, "documents-order").startswith(
        "Newest first (by id), as debounce documents lists them."
    )
    shown = [int(i) for i in re.findall(r'data-document="(\d+)"', documents)]
    assert shown == sorted(shown, reverse=True) and len(shown) > 1


async def test_missing_scopes_show_on_the_workspace_and_sources_screens(
    pool: AsyncConnectionPool[Any], client: httpx.AsyncClient, ws: SeededWorkspaces
) -> None:
    page = (await client.get(f"/admin/workspaces/{ws.slack}")).text
    assert "none missing" in cell(page, "workspace-scopes") and "workspace-scopes-badge" not in page
    assert await workspaces.add_missing_scope(pool, ws.slack, "canvases:read") == ["canvases:read"]
    assert await workspaces.add_missing_scope(pool, ws.slack, "canvases:read") is None  # once
    assert await workspaces.add_missing_scope(pool, ws.slack, "files:read") == ["canvases:read", "files:read"]
    page = (await client.get(f"/admin/workspaces/{ws.slack}")).text
    assert 'id="workspace-scopes-badge"' in page
    assert "canvases:read, files:read" in cell(page, "workspace-scopes")
    sources = (await client.get("/admin/sources")).text
    row = sources.split(f'id="workspace-{ws.slack}">', 1)[1].split("</tr>", 1)[0]
    assert "missing canvases:read, files:read" in row
