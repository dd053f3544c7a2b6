"""Workspaces, tokens and OAuth of the Notion stand-in (mixed into
:class:`standins.notion_api.FakeNotion`).

One fake serves many workspaces. Every page, database, data source and block belongs to one
workspace; every token belongs to one workspace and stands for one bot user. A request whose
token belongs to another workspace than the object it names answers 404 ``object_not_found``,
exactly as Notion answers for a page that exists but is not shared with the integration
("Given the bearer token used, the resource does not exist. This error can also indicate that
the resource has not been shared with owner of the bearer token",
https://developers.notion.com/reference/status-codes). An unknown or revoked token answers 401
``unauthorized``.

Endpoints:

- ``GET /v1/users/me``, "Retrieve your token's bot user"
  (https://developers.notion.com/reference/get-self): a user object of type ``bot``
  (https://developers.notion.com/reference/user, "Bots"): ``{"object": "user", "id", "name",
  "avatar_url", "type": "bot", "bot": {"owner": {"type": "workspace", "workspace": true},
  "workspace_name", "workspace_id", "workspace_limits": {"max_file_upload_size_in_bytes"}},
  "request_id"}`` (the reference's OpenAPI requires ``owner``, ``workspace_id``,
  ``workspace_limits`` and ``workspace_name`` in ``bot``);
- ``POST /v1/oauth/token``, "Create a token"
  (https://developers.notion.com/reference/create-a-token): HTTP Basic ``client_id:client_secret``
  and a JSON body ``{"grant_type": "authorization_code", "code", "redirect_uri"}``, as
  ``notion_client``'s ``oauth.token(client_id=, client_secret=, grant_type=, code=,
  redirect_uri=)`` sends it; answers ``{"access_token", "token_type": "bearer", "bot_id",
  "workspace_id", "workspace_name", "workspace_icon", "owner": {"type": "workspace",
  "workspace": true}, "duplicated_template_id": null, "request_id"}``. Its errors have the
  OAuth 2.0 shape (RFC 6749 §5.2) Notion's token endpoint answers with, ``{"error",
  "error_description", "request_id"}``: 401 ``invalid_client`` (no Basic credentials, unknown
  client id, wrong secret), 400 ``invalid_grant`` (unknown or already used code, a code issued
  to another client, a ``redirect_uri`` other than the one the code was issued for), 400
  ``unsupported_grant_type``, 400 ``invalid_request`` (not a JSON object). ``notion_client``
  raises them as ``UnknownHTTPResponseError`` (``status``, ``body``), since they carry no
  ``code``/``message``.

Set up with :meth:`NotionWorkspaces.add_workspace`, :meth:`~NotionWorkspaces.oauth_client`,
:meth:`~NotionWorkspaces.authorization_code` (what Notion does when a user approves the
integration at the authorization URL) and :meth:`~NotionWorkspaces.revoke`.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from standins.notion_http import norm_id
from standins.server import basic_credentials

__all__ = [
    "DEFAULT_WORKSPACE_ID",
    "DEFAULT_WORKSPACE_NAME",
    "Grant",
    "NotionWorkspace",
    "NotionWorkspaces",
]

#: Id and name of the workspace a :class:`~standins.notion_api.FakeNotion` starts with (the
#: constructor's token belongs to it, and so does every object added without a workspace).
#: The workspace of ``examples/notion/*.json`` (their ``workspace_id``), so the example webhooks
#: name the stand-in's default workspace.
DEFAULT_WORKSPACE_ID = "13950b26-c203-4f3b-b97d-93ec06319565"
DEFAULT_WORKSPACE_NAME = "Debounce Demo"

_NAMESPACE = uuid.UUID("0c4f7d2e-9a1b-4c3d-8e5f-6a7b8c9d0e1f")


@dataclass
class NotionWorkspace:
    """One workspace of the fake.

    ``token`` is its internal integration's token (the one :meth:`~NotionWorkspaces.add_workspace`
    was given), ``bot_id`` the id of that integration's bot user (``users/me``), ``icon`` the
    ``workspace_icon`` URL of OAuth answers (``None``: none).
    """

    id: str
    name: str
    token: str
    bot_id: str
    icon: str | None = None


@dataclass(frozen=True)
class Grant:
    """What a token stands for: a workspace and a bot user."""

    token: str
    workspace_id: str
    bot_id: str


@dataclass(frozen=True)
class _Code:
    workspace_id: str
    redirect_uri: str | None
    client_id: str | None
    access_token: str | None


def _oauth_error(status: int, error: str, description: str) -> Response:
    body = {"error": error, "error_description": description, "request_id": str(uuid.uuid4())}
    return JSONResponse(body, status_code=status)


class NotionWorkspaces:
    """Workspaces, tokens, OAuth and ``users/me`` of :class:`~standins.notion_api.FakeNotion`.

    Attributes:
        workspace_id: id of the default workspace (:data:`DEFAULT_WORKSPACE_ID`), that of the
            constructor's token and of every object added without a workspace.
        workspaces: :class:`NotionWorkspace` by id, the default one included.
        max_file_upload_size_in_bytes: ``workspace_limits`` of ``users/me`` (5 MiB, as on
            Notion's free plan).
        bot_name: the ``name`` of every bot user.
    """

    max_file_upload_size_in_bytes = 5 * 1024 * 1024
    bot_name = "debounce"

    # Provided by FakeNotion.
    calls: Counter[str]
    _lock: threading.Lock

    def _init_workspaces(self, token: str) -> None:
        self.workspace_id = DEFAULT_WORKSPACE_ID
        self.workspaces: dict[str, NotionWorkspace] = {}
        self._grants: dict[str, Grant] = {}
        self._revoked: set[str] = set()
        self._owners: dict[str, str] = {}  # object id -> workspace id
        self._unshared: set[str] = set()  # objects not shared with the integration
        self._clients: dict[str, str] = {}
        self._codes: dict[str, _Code] = {}
        self.add_workspace(DEFAULT_WORKSPACE_ID, DEFAULT_WORKSPACE_NAME, token)

    # -- setting up ------------------------------------------------------------------------

    def add_workspace(self, workspace_id: str, name: str, token: str, *, icon: str | None = None) -> None:
        """Add a workspace ``workspace_id`` (a UUID, dashed or not) named ``name`` whose
        internal integration token is ``token``.

        Raises:
            ValueError: ``workspace_id`` is not a UUID or exists, or ``token`` is taken.
        """
        wid = norm_id(workspace_id)
        if wid is None:
            raise ValueError(f"a Notion workspace id is a UUID, got {workspace_id!r}")
        with self._lock:
            if wid in self.workspaces:
                raise ValueError(f"workspace {wid} exists")
            if token in self._grants:
                raise ValueError("that token already belongs to a workspace")
            bot_id = str(uuid.uuid5(_NAMESPACE, f"bot/{wid}"))
            self.workspaces[wid] = NotionWorkspace(wid, name, token, bot_id, icon)
            self._grants[token] = Grant(token, wid, bot_id)

    def oauth_client(self, client_id: str, client_secret: str) -> None:
        """Register a public integration's OAuth credentials (any number of them)."""
        with self._lock:
            self._clients[client_id] = client_secret

    def authorization_code(
        self,
        code: str,
        workspace_id: str,
        *,
        redirect_uri: str | None = None,
        client_id: str | None = None,
        access_token: str | None = None,
    ) -> None:
        """Issue the single-use ``code`` for ``workspace_id``, as Notion does when a member of
        that workspace approves the integration at the authorization URL.

        ``redirect_uri``: the exchange must send exactly this one (``None``: any or none);
        ``client_id``: only that client may exchange it (``None``: any registered client);
        ``access_token``: the token the exchange answers (``None``: a new ``ntn_…`` token).
        Every exchange creates a new bot (a new ``bot_id``), as every authorization does.

        Raises:
            KeyError: no such workspace.
            ValueError: ``access_token`` belongs to another workspace.
        """
        wid = norm_id(workspace_id) or workspace_id
        with self._lock:
            if wid not in self.workspaces:
                raise KeyError(workspace_id)
            held = self._grants.get(access_token or "")
            if held is not None and held.workspace_id != wid:
                raise ValueError("that token belongs to another workspace")
            self._codes[code] = _Code(wid, redirect_uri, client_id, access_token)

    def revoke(self, token: str) -> None:
        """Revoke ``token``: every later request with it answers 401 ``unauthorized``."""
        with self._lock:
            self._revoked.add(token)

    def workspace_of(self, object_id: str) -> str:
        """The id of the workspace a page, database, data source or block belongs to.

        Raises:
            KeyError: no such object.
        """
        return self._owners[norm_id(object_id) or object_id]

    # -- ownership (used by FakeNotion's builders) -----------------------------------------

    def _workspace_for(self, workspace_id: str | None, parent: Mapping[str, Any] | None) -> str:
        """The workspace of a new object: ``workspace_id``, else its parent's, else the
        default one."""
        if workspace_id is not None:
            wid = norm_id(workspace_id) or workspace_id
            if wid not in self.workspaces:
                raise KeyError(f"no workspace {workspace_id!r}: add_workspace() it first")
            return wid
        for key in ("page_id", "block_id", "database_id", "data_source_id"):
            raw = (parent or {}).get(key)
            owner = self._owners.get(norm_id(raw) or raw) if isinstance(raw, str) else None
            if owner is not None:
                return owner
        return self.workspace_id

    # -- HTTP ------------------------------------------------------------------------------

    def _grant_for(self, authorization: str | None) -> Grant | None:
        """The grant of an ``Authorization: Bearer …`` header (``None``: unknown or revoked)."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        token = authorization[7:]
        with self._lock:
            return None if token in self._revoked else self._grants.get(token)

    def _visible(self, grant: Grant, object_id: str) -> bool:
        """Whether the grant's workspace may see ``object_id`` (unknown objects: yes, so
        the endpoint answers its own 404; unshared ones: no)."""
        owner = self._owners.get(object_id, grant.workspace_id)
        return owner == grant.workspace_id and object_id not in self._unshared

    def _bot_user(self, grant: Grant) -> dict[str, Any]:
        workspace = self.workspaces[grant.workspace_id]
        return {
            "object": "user",
            "id": grant.bot_id,
            "name": self.bot_name,
            "avatar_url": None,
            "type": "bot",
            "bot": {
                "owner": {"type": "workspace", "workspace": True},
                "workspace_name": workspace.name,
                "workspace_id": workspace.id,
                "workspace_limits": {"max_file_upload_size_in_bytes": self.max_file_upload_size_in_bytes},
            },
            "request_id": str(uuid.uuid4()),
        }

    async def _oauth_token(self, request: Request) -> Response:
        """``POST /v1/oauth/token`` (see the module's docstring)."""
        with self._lock:
            self.calls["oauth.token"] += 1
        creds = basic_credentials(request.headers.get("authorization"))
        secret = self._clients.get(creds[0]) if creds else None
        if creds is None or secret is None or not hmac.compare_digest(secret, creds[1]):
            return _oauth_error(401, "invalid_client", "Client authentication failed.")
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _oauth_error(400, "invalid_request", "body failed validation.")
        if body.get("grant_type") != "authorization_code":
            return _oauth_error(
                400, "unsupported_grant_type", f"Unsupported grant_type: {body.get('grant_type')}"
            )
        code = body.get("code")
        with self._lock:
            issued = self._codes.get(code) if isinstance(code, str) else None
            if issued is None or issued.client_id not in (None, creds[0]):
                return _oauth_error(400, "invalid_grant", "Invalid code.")
            assert isinstance(code, str)
            if issued.redirect_uri is not None and body.get("redirect_uri") != issued.redirect_uri:
                return _oauth_error(400, "invalid_grant", "Invalid redirect_uri.")
            del self._codes[code]
            token = issued.access_token or f"ntn_{secrets.token_hex(20)}"
            grant = Grant(token, issued.workspace_id, str(uuid.uuid4()))
            self._grants[token] = grant
            self._revoked.discard(token)
        workspace = self.workspaces[grant.workspace_id]
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "bearer",
                "bot_id": grant.bot_id,
                "workspace_id": workspace.id,
                "workspace_name": workspace.name,
                "workspace_icon": workspace.icon,
                "owner": {"type": "workspace", "workspace": True},
                "duplicated_template_id": None,
                "request_id": str(uuid.uuid4()),
            }
        )
