"""The environment's workspaces: each source whose environment sets a token (its
``token_setting``: ``NOTION_TOKEN``, ``SLACK_BOT_TOKEN``) defines one workspace — the
single-workspace deployment of before workspaces. Its row is created at start (web and
worker); the token itself stays in the environment; the source's id of it is learned on first
use (the worker asks the source's ``identify`` after a sync)."""

from __future__ import annotations

import logging
from typing import Any

from debounce import registry
from debounce.infra.db import Db, fetch_one
from debounce.infra.secrets import fingerprint
from debounce.infra.sql import queries

__all__ = ["ensure_env_workspace", "env_tokens", "learn_external_id"]

log = logging.getLogger("debounce.workspaces")
_Q = queries("workspaces")


def env_tokens(settings: Any) -> dict[str, str]:
    """``{source type: token}`` of the sources whose environment sets a token (their
    :class:`~debounce.contract.Source` ``token_setting``): each defines a workspace."""
    out: dict[str, str] = {}
    for source in registry.sources().values():
        token = source.token(settings)
        if token:
            out[source.source_type] = token
    return out


async def ensure_env_workspace(db: Db, source_type: str, token: str) -> dict[str, Any]:
    """The environment's workspace of ``source_type`` (created if missing), its fingerprint
    kept current. The token itself stays in the environment. Returns its row (without
    credentials: it has none)."""
    row = await fetch_one(
        db,
        _Q["ensure_env_workspace"],
        {
            "source_type": source_type,
            "fingerprint": fingerprint(token),
            "name": f"{source_type} (environment)",
        },
    )
    assert row is not None
    return dict(row)


async def learn_external_id(
    db: Db, workspace_id: int, external_id: str, name: str, bot_user_id: str | None = None
) -> None:
    """Record the source's id of the environment's workspace (learned on first use). Best
    effort: when the same workspace was also installed (the id is taken), both rows are kept
    apart and a warning says so."""
    try:
        await fetch_one(
            db,
            _Q["learn_external_id"],
            {"id": workspace_id, "external_id": external_id, "name": name, "bot_user_id": bot_user_id},
        )
    except Exception as exc:  # the same workspace was also installed: keep both rows apart
        log.warning(
            "cannot record workspace id %s of the environment's workspace: %s",
            external_id,
            exc.__class__.__name__,
        )
