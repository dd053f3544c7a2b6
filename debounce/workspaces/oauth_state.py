"""The install flows' OAuth ``state`` store (``oauth_states``): a random single-use value per
install, valid :data:`STATE_TTL_SECONDS`, deleted when used."""

from __future__ import annotations

import secrets

from debounce.infra.db import Db, fetch_all
from debounce.infra.sql import queries

__all__ = ["STATE_TTL_SECONDS", "consume_state", "issue_state"]

_Q = queries("workspaces")

#: Seconds an OAuth state parameter stays valid.
STATE_TTL_SECONDS = 600.0


async def issue_state(db: Db, source_type: str, *, ttl: float = STATE_TTL_SECONDS) -> str:
    """A new single-use OAuth ``state`` for an install of ``source_type`` (random, 256 bits,
    URL-safe text), valid ``ttl`` seconds."""
    state = secrets.token_urlsafe(32)
    await fetch_all(
        db, _Q["issue_oauth_state"], {"state": state, "source_type": source_type, "ttl": float(ttl)}
    )
    return state


async def consume_state(db: Db, source_type: str, state: str) -> bool:
    """Use ``state`` once: ``True`` if it was issued for ``source_type`` and had not expired
    or been used (it is deleted either way). An empty state or one over 200 characters is
    ``False`` without a query."""
    if not state or len(state) > 200:
        return False
    rows = await fetch_all(db, _Q["consume_oauth_state"], {"state": state, "source_type": source_type})
    return bool(rows)
