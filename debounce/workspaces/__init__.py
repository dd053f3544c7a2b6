"""Workspaces: the workspaces (teams, organisations) of each source connected to this deployment.

A workspace is connected by an install flow (OAuth), by ``debounce workspaces add``, or — for
the single-workspace deployment of before — by the environment's token (each source's
``token_setting``), whose workspace row is created at start and whose id is learned from the
source on first use. Stored credentials are encrypted (:mod:`debounce.infra.secrets`).

One module per concept; this package re-exports their public names (``workspaces.save``,
``workspaces.Directory``, …):

- :mod:`.store`: the rows: connect, status, remove, list with figures, the 429 block;
- :mod:`.tokens`: the stored tokens: read for a sync (``sync_state``), the
  ``credentials_error`` mark, key rotation;
- :mod:`.decryption`: what a stored token decrypts to, and why not (no I/O);
- :mod:`.environment`: the environment's workspaces (``NOTION_TOKEN``, ``SLACK_BOT_TOKEN``);
- :mod:`.directory`: routing an event to its workspace (the web process);
- :mod:`.oauth_state`: the install flows' single-use ``state``.
"""

from __future__ import annotations

from debounce.workspaces.decryption import (
    NO_KEY,
    WRONG_KEY,
    CredentialsUnreadable,
    decrypt,
    unreadable_reason,
)
from debounce.workspaces.directory import ACCEPTING, Directory, Route
from debounce.workspaces.environment import ensure_env_workspace, env_tokens, learn_external_id
from debounce.workspaces.oauth_state import STATE_TTL_SECONDS, consume_state, issue_state
from debounce.workspaces.store import (
    WorkspaceNotFound,
    add_missing_scope,
    block,
    list_workspaces,
    name_and_source,
    remove,
    revoke_by_external_id,
    save,
    set_status,
)
from debounce.workspaces.tokens import (
    credentials_error,
    credentials_to_check,
    rotate_key,
    set_credentials_error,
    stored_count,
    sync_state,
)

__all__ = [
    "ACCEPTING",
    "NO_KEY",
    "STATE_TTL_SECONDS",
    "WRONG_KEY",
    "CredentialsUnreadable",
    "Directory",
    "Route",
    "WorkspaceNotFound",
    "add_missing_scope",
    "block",
    "consume_state",
    "credentials_error",
    "credentials_to_check",
    "decrypt",
    "ensure_env_workspace",
    "env_tokens",
    "issue_state",
    "learn_external_id",
    "list_workspaces",
    "name_and_source",
    "remove",
    "revoke_by_external_id",
    "rotate_key",
    "save",
    "set_credentials_error",
    "set_status",
    "stored_count",
    "sync_state",
    "unreadable_reason",
]
