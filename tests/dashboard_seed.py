"""Jobs and documents for the dashboard's tests (and its screenshots), made through the queue's
and the document store's own functions: every state, an error, recent syncs with a known lag."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import one_job

from debounce import queue, workspaces
from debounce.contract import Audience
from debounce.documents.store import Document, DocumentStore
from debounce.infra.db import Db, fetch_one
from debounce.infra.secrets import Keyring, new_key
from debounce.types import JobEvent

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

ADMIN = "dashboard-test-admin-token"
SYNCED_PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
PENDING_PAGE = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"
FAILED_PAGE = "9c1e7b52-0d4a-4f3e-b8a1-5e6f7a8b9c0d"
RUNNING_PAGE = "41d0e3a9-7c2b-4a6e-9f15-0b8c2d4e6f71"
SLACK_CHANNEL = "C2147483705"
RETRYING_CHANNEL = "C0PS7Q1R9"

#: Stored Markdown with a script and raw HTML in it: neither may reach the page as markup.
HOSTILE_MARKDOWN = """# Launch plan

The **launch** is on *Thursday*; see the [runbook](https://example.com/runbook).

<script>window.__pwned = true; document.title = "pwned";</script>

<img src="x" onerror="window.__pwned = true">

- [x] Write the README
- [ ] Ship it

| step | owner |
|---|---|
| deploy | ops |

```
debounce serve
```
"""


@dataclass(frozen=True)
class Seeded:
    """Ids of what :func:`seed` made."""

    failed_job: int
    pending_job: int
    running_job: int
    synced_job: int
    retrying_job: int
    document: int


def _example(source: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / source / name).read_text())
    return data


async def _event(
    db: Db,
    source: str,
    page: str,
    event_id: str,
    payload: dict[str, Any],
    at: datetime,
    debounce: float = 30.0,
) -> int:
    result = await one_job.enqueue(
        db,
        source,
        page,
        payload=payload,
        event_id=event_id,
        debounce_seconds=debounce,
        max_wait_seconds=300,
        now=at,
    )
    assert result.job is not None
    return result.job.id


async def seed(db: Db) -> Seeded:
    """Fill the queue and documents: a completed Notion page with a document (lag 35 s), a
    Slack channel synced twice, a pending page with three debounced events, a running page,
    a failed page (permanent error) and a Slack channel waiting out a retry."""
    now = datetime.now(UTC)
    notion_event = _example("notion", "page.content_updated.json")
    slack_event = _example("slack", "message.json")

    # A synced page: first event 40 s ago, claimed 8 s ago, done 5 s ago (lag 35 s).
    synced = await _event(db, "notion", SYNCED_PAGE, "n-1", notion_event, now - timedelta(seconds=40))
    [job] = [
        c.job
        for c in await queue.claim(
            db,
            "worker-1",
            limit=1,
            lease_seconds=60,
            source_slots={"notion": 1},
            now=now - timedelta(seconds=8),
        )
    ]
    await one_job.complete(db, job, now=now - timedelta(seconds=5))
    # A Slack channel synced twice in the last hour (lags 12 s and 20 s).
    for i, (ago, lag) in enumerate(((1800, 12), (600, 20))):
        await _event(
            db, "slack", SLACK_CHANNEL, f"s-{i}", slack_event, now - timedelta(seconds=ago + lag), debounce=5
        )
        [job] = [
            c.job
            for c in await queue.claim(
                db,
                "worker-1",
                limit=1,
                lease_seconds=60,
                source_slots={"slack": 1},
                now=now - timedelta(seconds=ago + 1),
            )
        ]
        await one_job.complete(db, job, now=now - timedelta(seconds=ago))
    # A failed page: no access, failed for good.
    failed = await _event(db, "notion", FAILED_PAGE, "n-2", notion_event, now - timedelta(minutes=20))
    [job] = [
        c.job
        for c in await queue.claim(
            db,
            "worker-1",
            limit=1,
            lease_seconds=60,
            source_slots={"notion": 1},
            now=now - timedelta(minutes=19),
        )
    ]
    await one_job.fail(
        db,
        job,
        "403 restricted_resource: the integration has no access to this "
        "page <b>(share it with the integration)</b>",
        permanent=True,
        now=now - timedelta(minutes=19),
    )
    # A Slack channel waiting out a retry after a timeout.
    retrying = await _event(
        db, "slack", RETRYING_CHANNEL, "s-9", slack_event, now - timedelta(minutes=3), debounce=5
    )
    [job] = [
        c.job
        for c in await queue.claim(
            db,
            "worker-2",
            limit=1,
            lease_seconds=60,
            source_slots={"slack": 1},
            now=now - timedelta(minutes=2),
        )
    ]
    await one_job.fail(
        db,
        job,
        "ReadTimeout: conversations.history did not answer within 10 s",
        jitter=0,
        now=now - timedelta(minutes=2),
    )
    # A page being synced right now.
    running = await _event(db, "notion", RUNNING_PAGE, "n-3", notion_event, now - timedelta(seconds=45))
    [
        c.job
        for c in await queue.claim(
            db,
            "worker-2",
            limit=1,
            lease_seconds=60,
            now=now - timedelta(seconds=2),
            source_slots={"notion": 1},
        )
    ]
    # A page with three edits in its window, due in the future.
    pending = 0
    for i in range(3):
        pending = await _event(
            db,
            "notion",
            PENDING_PAGE,
            f"n-p{i}",
            {**notion_event, "n": i},
            now - timedelta(seconds=10 - i),
            debounce=300,
        )
    store = DocumentStore(db)
    await store.upsert(
        Document(
            source_type="notion",
            document_id=SYNCED_PAGE,
            source_page_id=SYNCED_PAGE,
            title="Launch plan",
            content=HOSTILE_MARKDOWN,
            url=f"https://www.notion.so/{SYNCED_PAGE.replace('-', '')}",
            metadata={"created_by": "c7c11cca", "last_edited_time": "2026-11-20T23:55:34Z"},
            audience=Audience(
                "workspace",
                None,
                ("556a1abf-4f08-40c6-878a-75890d2a88ba", "1edc05f6-2702-81b5-8408-00279347f034"),
            ),
        )
    )
    await store.upsert(
        Document(
            source_type="slack",
            document_id=f"{SLACK_CHANNEL}/1763682934.000200",
            source_page_id=SLACK_CHANNEL,
            title="#general: Hello world",
            content="**U2147483697** (2026-11-20 23:55): Hello world\n",
            audience=Audience("public_channel"),
        )
    )
    row = await fetch_one(
        db,
        "select id from documents where document_id = %(d)s",  # test-only
        {"d": SYNCED_PAGE},
    )
    assert row is not None
    return Seeded(
        failed_job=failed,
        pending_job=pending,
        running_job=running,
        synced_job=synced,
        retrying_job=retrying,
        document=int(row["id"]),
    )


#: A Slack error as long as real ones get (a JSON body quoted in the message).
LONG_ERROR = (
    "SlackApiError: The request to the Slack API failed. (url: "
    "https://slack.com/api/conversations.history) The server responded with: "
    "{'ok': False, 'error': 'ratelimited', 'warning': 'superfluous_charset', "
    "'response_metadata': {'warnings': ['superfluous_charset'], 'messages': "
    "['[WARN] A Content-Type header was sent with a charset, which is not needed']}} "
    "after 3 tries over 94 s; the channel C0LONGERR1 will be retried"
)


@dataclass(frozen=True)
class SeededWorkspaces:
    """Ids of what :func:`seed_workspaces` made: three connected workspaces (numeric id and
    the source's id) and the job whose error is the Slack team's last error."""

    notion: int
    notion_external: str
    slack: int
    slack_external: str
    revoked: int
    revoked_external: str
    failed_job: int


async def _synced(
    db: Db, source: str, page: str, workspace_id: int, finished: datetime, document: str | None = None
) -> None:
    """One job of ``workspace_id`` enqueued, claimed and completed at ``finished``; its sync
    writes the page's document (``document`` "live"), or writes it and marks it deleted
    ("deleted"), through the claim's fenced store as a sync does (so the document is the
    workspace's), or writes none (``None``)."""
    await queue.enqueue(
        db,
        [
            JobEvent(
                source_type=source,
                source_page_id=page,
                payload={"page": page},
                event_id=None,
                debounce_seconds=0,
                max_wait_seconds=0,
                workspace_id=workspace_id,
            )
        ],
        now=finished - timedelta(seconds=20),
    )
    [job] = [
        c.job
        for c in await queue.claim(
            db,
            "worker-1",
            limit=1,
            lease_seconds=60,
            source_slots={source: 1},
            now=finished - timedelta(seconds=10),
        )
    ]
    assert job.source_page_id == page
    if document is not None:
        store = DocumentStore(db).fenced(job)
        await store.upsert(
            Document(
                source_type=source,
                document_id=page,
                source_page_id=page,
                title=f"Page {page}",
                content=f"# Page {page}\n",
            )
        )
        if document == "deleted":
            await store.mark_page_deleted(source, page)
    await one_job.complete(db, job, now=finished)


async def seed_workspaces(db: Db) -> SeededWorkspaces:
    """Connected workspaces with their own jobs: the Notion workspace "Quantify Labs" with 3
    syncs completed in the last day (and one 8 days ago, outside the default 7-day window),
    2 live documents and 1 marked deleted, and a credentials error (a worker's key does not
    decrypt its token, set after the syncs), the Slack team "Acme" with 5 completed (4 live
    documents) and one failed with :data:`LONG_ERROR`, and the Slack team "Beta" revoked (its
    auth error kept), none completed, no documents."""
    now = datetime.now(UTC)
    keyring = Keyring(new_key())
    notion = await workspaces.save(
        db,
        keyring,
        source_type="notion",
        external_id="e3c1a0d2-5b7f-4c1e-9a8d-2f6b0c4e7a19",
        name="Quantify Labs",
        credentials={"access_token": "ntn_q"},
    )
    slack = await workspaces.save(
        db,
        keyring,
        source_type="slack",
        external_id="T07LABS42",
        name="Acme",
        credentials={"access_token": "xoxb-acme"},
    )
    revoked = await workspaces.save(
        db,
        keyring,
        source_type="slack",
        external_id="T0BETA999",
        name="Beta",
        credentials={"access_token": "xoxb-beta"},
    )
    await workspaces.set_status(db, revoked["id"], "revoked", "invalid_auth from conversations.history")
    await _synced(
        db,
        "notion",
        "0a6e0f7e-0bad-4000-8000-000000000000",
        notion["id"],
        now - timedelta(days=8),
        document="live",
    )
    for i, document in enumerate(("live", "deleted", None)):
        await _synced(
            db,
            "notion",
            f"0a6e0f7e-{i:04d}-4000-8000-000000000000",
            notion["id"],
            now - timedelta(hours=20 - i),
            document=document,
        )
    for i in range(5):
        await _synced(
            db,
            "slack",
            f"C0ACME{i:04d}",
            slack["id"],
            now - timedelta(minutes=50 - i),
            document="live" if i < 4 else None,
        )
    await queue.enqueue(
        db,
        [
            JobEvent(
                source_type="slack",
                source_page_id="C0LONGERR1",
                payload={},
                event_id=None,
                debounce_seconds=0,
                max_wait_seconds=0,
                workspace_id=slack["id"],
            )
        ],
        now=now - timedelta(minutes=6),
    )
    [job] = [
        c.job
        for c in await queue.claim(
            db,
            "worker-1",
            limit=1,
            lease_seconds=60,
            source_slots={"slack": 1},
            now=now - timedelta(minutes=5),
        )
    ]
    await one_job.fail(db, job, LONG_ERROR, permanent=True, now=now - timedelta(minutes=5))
    # Last: a workspace with a credentials error is parked (the claim skips it).
    await workspaces.set_credentials_error(db, notion["id"], workspaces.WRONG_KEY)
    return SeededWorkspaces(
        notion=int(notion["id"]),
        notion_external=str(notion["external_id"]),
        slack=int(slack["id"]),
        slack_external=str(slack["external_id"]),
        revoked=int(revoked["id"]),
        revoked_external=str(revoked["external_id"]),
        failed_job=job.id,
    )
