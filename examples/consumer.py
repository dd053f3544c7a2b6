"""A consumer of debounce: keeps a local SQLite index of the documents current by following
the change feed (docs/consumers.md), printing each change it applies; Ctrl-C stops it (the
index and its cursor are saved together). Each document's sections are "embedded" (here: their
text stored) one by one: a change re-embeds only the sections it added or changed.
Run: python examples/consumer.py URL TOKEN index.db"""

import sqlite3
import sys

import httpx


def say(line: str) -> None:
    print(line, flush=True)  # at once, piped or not


def open_index(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute(
        "create table if not exists docs (source text, document_id text, sha text, "
        "title text, content text, primary key (source, document_id))"
    )
    db.execute("create table if not exists feed (one integer primary key, cursor text)")
    db.execute(
        "create table if not exists sections (source text, document_id text, id text, "
        "sha text, embedding text, primary key (source, document_id, id))"
    )
    return db


def embed(text: str) -> str:
    return text  # your embedding model here: only the sections that changed get here


def save(db: sqlite3.Connection, doc: dict, named: set[str] | None = None) -> int:
    """Store ``doc`` and re-embed its sections that ``named`` names (None: any) and whose hash
    is not the one stored; drop the sections it no longer has. Returns the sections embedded."""
    key = (doc["source"], doc["document_id"])
    if doc["deleted_at"] is not None:  # a tombstone
        db.execute("delete from docs where source = ? and document_id = ?", key)
        db.execute("delete from sections where source = ? and document_id = ?", key)
        return 0
    db.execute(
        "insert or replace into docs values (?, ?, ?, ?, ?)",
        (*key, doc["content_sha256"], doc["title"], doc["content"]),
    )
    stored = dict(db.execute("select id, sha from sections where source = ? and document_id = ?", key))
    embedded = 0
    for section in doc["sections"]:
        if (named is None or section["id"] in named) and stored.get(section["id"]) != section["sha256"]:
            text = doc["content"][section["start"] : section["end"]]
            db.execute(
                "insert or replace into sections values (?, ?, ?, ?, ?)",
                (*key, section["id"], section["sha256"], embed(text)),
            )
            embedded += 1
    for gone in set(stored) - {s["id"] for s in doc["sections"]}:
        db.execute("delete from sections where source = ? and document_id = ? and id = ?", (*key, gone))
    return embedded


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
        said = change["sections"]  # which sections this change added, changed, removed
        embedded = save(db, doc, None if said is None else {*said["added"], *said["changed"]})
        line = f"{change['op']:6} {change['source']} {change['document_id']}: {doc['title']}"
        if doc["deleted_at"] is None:
            line += f" ({embedded} of {len(doc['sections'])} sections re-embedded)"
        say(line)
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
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as api:
            follow(api, open_index(path))
    except KeyboardInterrupt:  # Ctrl-C: what was applied is committed with its cursor
        say(f"stopped; {path} keeps the index and where to go on from")
        sys.exit(130)
    except httpx.HTTPStatusError as exc:  # 401: a wrong token
        sys.exit(f"error: {exc.response.status_code} from {exc.request.url}: {exc.response.text}")
    except httpx.TransportError as exc:
        sys.exit(f"error: cannot reach {url}: {exc}")
