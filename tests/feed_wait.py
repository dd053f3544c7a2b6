"""Waiting for the change feed in tests that share the Postgres server with other sessions."""

from __future__ import annotations

import asyncio
from typing import Any

from debounce.documents import feed


async def servable(db: Any) -> None:
    """Wait until every committed change is servable: the server is shared, and a transaction
    of another session (another test run) may hold the snapshot's xmin back for a while."""
    for _ in range(1200):
        page = await feed.read_changes(db, await feed.head(db), 1)
        if not page.pending:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("changes stayed behind an open transaction for a minute")
