"""A consumer of debounce: keeps a local SQLite index of the documents current by following
the change feed (docs/consumers.md), printing each change it applies; Ctrl-C stops it (the
index and its cursor are saved together). Run: python examples/consumer.py URL TOKEN index.db"""

import sqlite3
import sys

import httpx


def say(line: str) -> None:
    print(line, flush=True)  # at once, piped or not


def open_index(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute("create table if not exists docs (source text, document_id text, sha text, "
               "title text, content text, primary key (source, document_id))")
    db.execute("create table if not exists feed (one integer primary key, cursor text)")
    return db


def save(db: sqlite3.Connection, doc: dict) -> None:
    if doc["deleted_at"] is not None:  # a tombstone
        db.execute("delete from docs where source = ? and document_id = ?",
                   (doc["source"], doc["document_id"]))
    else:
        db.execute("insert or replace into docs values (?, ?, ?, ?, ?)", (doc["source"],
                   doc["document_id"], doc["content_sha256"], doc["title"], doc["content"]))


def reread(api: httpx.Client, db: sqlite3.Connection, cursor: str | None) -> None:
    """Read every document, then follow from ``cursor`` (taken before reading)."""
    db.execute("delete from docs")
    page, count = {"next_cursor": ""}, 0
    while page["next_cursor"] is not None:
        page = api.get("/documents", params={"cursor": page["next_cursor"]}).raise_for_status().json()
        for doc in page["documents"]:
            save(db, doc)
        count += len(page["documents"])
    db.execute("insert or replace into feed values (1, ?)", (cursor,))
    db.commit()
    say(f"read {count} documents; following the change feed")


def step(api: httpx.Client, db: sqlite3.Connection, wait: float = 25) -> int:
    """One read of the feed (long-polled up to ``wait`` seconds: under a router's idle limit,
    Heroku's 30 s); returns the changes applied (an empty answer may come sooner: ask again)."""
    row = db.execute("select cursor from feed").fetchone()
    if row is None:
        reread(api, db, None)  # None: follow from the oldest retained change
        row = (None,)
    params = {"wait": wait} if row[0] is None else {"wait": wait, "after": row[0]}
    answer = api.get("/documents/changes", params=params)
    if answer.status_code == 410:  # cursor too old or of another database
        say(f"the feed cannot follow the saved cursor ({answer.json()['detail']}): reading again")
        reread(api, db, answer.json()["cursor"])
        return 0
    body = answer.raise_for_status().json()
    for change in body["changes"]:  # fetch each document's latest state (idempotent)
        doc = api.get(f"/documents/{change['source']}/{change['document_id']}")
        if doc.status_code == 404:  # the row itself was deleted
            doc = {**change, "deleted_at": change["updated_at"], "title": "(gone)"}
        else:
            doc = doc.raise_for_status().json()["document"]
        save(db, doc)
        say(f"{change['op']:6} {change['source']} {change['document_id']}: {doc['title']}")
    db.execute("update feed set cursor = ?", (body["next"],))
    db.commit()  # the documents and the cursor together
    return len(body["changes"])


def follow(api: httpx.Client, db: sqlite3.Connection) -> None:
    """Catch up, say so, then wait for changes (long polls), and again, until interrupted."""
    while True:
        while step(api, db, wait=0):
            pass
        say("up to date; waiting for changes (Ctrl-C stops)")
        while not step(api, db):
            pass


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python examples/consumer.py URL TOKEN index.db")
    url, token, path = sys.argv[1:4]
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                          timeout=60) as api:
            follow(api, open_index(path))
    except KeyboardInterrupt:  # Ctrl-C: what was applied is committed with its cursor
        say(f"stopped; {path} keeps the index and where to go on from")
        sys.exit(130)
    except httpx.HTTPStatusError as exc:  # 401: a wrong token
        sys.exit(f"error: {exc.response.status_code} from {exc.request.url}: {exc.response.text}")
    except httpx.TransportError as exc:
        sys.exit(f"error: cannot reach {url}: {exc}")
