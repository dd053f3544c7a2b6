"""The handshake tokens sources send to a new webhook endpoint (Notion's verification request:
``{"verification_token": "secret_..."}``, unsigned, before any secret exists), kept so the
operator can read the newest (``debounce notion-token``, ``GET /admin/verification-token/{source}``)
(``sql/queries/verification.sql``)."""

from __future__ import annotations

from datetime import datetime

from debounce.infra.db import Db, fetch_one
from debounce.infra.sql import queries

__all__ = ["KEPT", "latest", "save"]

_Q = queries("verification")

#: Tokens kept per source: the requests are unsigned, so what anyone can store is bounded.
KEPT = 5


async def save(db: Db, source_type: str, token: str, *, keep: int = KEPT) -> None:
    """Remember ``token`` as ``source_type``'s newest, forgetting all but the newest ``keep``."""
    await fetch_one(
        db, _Q["save_verification_token"], {"source_type": source_type, "token": token, "keep": keep}
    )


async def latest(db: Db, source_type: str) -> tuple[str, datetime] | None:
    """The newest token ``source_type`` sent and when it arrived (UTC), or ``None``."""
    row = await fetch_one(db, _Q["latest_verification_token"], {"source_type": source_type})
    return (str(row["token"]), row["received_at"]) if row is not None else None
