"""Teams, tokens and OAuth of the Slack stand-in (mixed into
:class:`standins.slack_api.FakeSlack`).

One fake serves many teams (workspaces). Every conversation belongs to a team; a Slack Connect
channel shared with :meth:`SlackTeams.share` belongs to several. Every bot token belongs to one
team; a token of a team that cannot see a conversation gets ``channel_not_found`` for it (HTTP
200, ``{"ok": false}``), as Slack answers for a conversation the token cannot see
(https://docs.slack.dev/reference/methods/conversations.history, "Errors"). A revoked token
answers ``token_revoked`` and an unknown one ``invalid_auth``
(https://docs.slack.dev/reference/methods/auth.test, "Errors").

Methods:

- ``auth.test`` (https://docs.slack.dev/reference/methods/auth.test): ``{"ok": true, "url",
  "team", "user", "team_id", "user_id", "bot_id", "is_enterprise_install": false}``, plus
  ``enterprise_id`` for a team of an Enterprise Grid organization;
- ``oauth.v2.access`` (https://docs.slack.dev/reference/methods/oauth.v2.access): the client's
  credentials as HTTP Basic (what ``slack_sdk``'s ``oauth_v2_access`` sends) or as
  ``client_id``/``client_secret`` parameters, ``code`` and ``redirect_uri``; answers ``{"ok":
  true, "access_token": "xoxb-…", "token_type": "bot", "scope", "bot_user_id", "app_id",
  "team": {"id", "name"}, "enterprise": null | {"id", "name"}, "authed_user": {"id"},
  "is_enterprise_install": false}``; errors ``invalid_client_id`` (no or unknown client id),
  ``bad_client_secret``, ``invalid_code`` (unknown, already used, or issued to another client),
  ``bad_redirect_uri`` (not the one the code was issued for), ``invalid_grant_type``.
"""

from __future__ import annotations

import hmac
import re
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from standins.server import basic_credentials

__all__ = [
    "DEFAULT_BOT_ID",
    "DEFAULT_BOT_USER_ID",
    "DEFAULT_TEAM_ID",
    "DEFAULT_TEAM_NAME",
    "SlackTeam",
    "SlackTeams",
    "token_of",
]

#: The team a :class:`~standins.slack_api.FakeSlack` starts with: the constructor's token is
#: its bot token, and every conversation created without a team belongs to it.
DEFAULT_TEAM_ID = "T061EG9R6"
DEFAULT_TEAM_NAME = "Debounce Demo"
DEFAULT_BOT_USER_ID = "U0BOTUSER"
DEFAULT_BOT_ID = "B0DEBOUNCE"


@dataclass
class SlackTeam:
    """One team (workspace) of the fake and its app installation: ``token`` is the bot token
    (``None``, for the default team only: any token not of another team), ``bot_user_id`` and
    ``bot_id`` the bot's, ``enterprise_id``/``enterprise_name`` its Enterprise Grid
    organization (``None``: none), ``domain`` its ``<domain>.slack.com``."""

    id: str
    name: str
    token: str | None
    bot_user_id: str
    bot_id: str
    domain: str
    enterprise_id: str | None = None
    enterprise_name: str | None = None


@dataclass(frozen=True)
class _Code:
    team_id: str
    redirect_uri: str | None
    client_id: str | None
    access_token: str | None
    user_id: str


def _domain(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "team"


def token_of(params: Mapping[str, str], authorization: str | None) -> str | None:
    """The token of a Web API call: ``Authorization: Bearer <token>``, else the ``token``
    parameter (https://api.slack.com/changelog/2017-10-keeping-up-with-the-jsons: Slack takes
    both and prefers the header); ``None``: neither."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return params.get("token") or None


class SlackTeams:
    """Teams, tokens, shared channels, ``auth.test`` and ``oauth.v2.access`` of
    :class:`~standins.slack_api.FakeSlack`.

    Attributes:
        team_id: id of the default team (:data:`DEFAULT_TEAM_ID`).
        teams: :class:`SlackTeam` by id, the default one included.
        app_id, bot_scopes, bot_user_name: what ``oauth.v2.access`` and ``auth.test`` say
            of the app.
    """

    app_id = "A0DEBOUNCE1"
    bot_scopes = "channels:history,groups:history,im:history,mpim:history"
    bot_user_name = "debounce"

    # Provided by FakeSlack.
    _lock: threading.RLock
    _channels: dict[str, dict[str, dict[str, Any]]]

    def _init_teams(self, token: str | None) -> None:
        self.team_id = DEFAULT_TEAM_ID
        self.teams: dict[str, SlackTeam] = {}
        self._grants: dict[str, str] = {}  # token -> team id
        self._revoked: set[str] = set()
        self._channel_teams: dict[str, set[str]] = {}
        self._clients: dict[str, str] = {}
        self._codes: dict[str, _Code] = {}
        self.teams[DEFAULT_TEAM_ID] = SlackTeam(
            DEFAULT_TEAM_ID,
            DEFAULT_TEAM_NAME,
            token,
            DEFAULT_BOT_USER_ID,
            DEFAULT_BOT_ID,
            _domain(DEFAULT_TEAM_NAME),
        )
        if token is not None:
            self._grants[token] = DEFAULT_TEAM_ID

    # ------------------------------------------------------------------ setting up

    def add_team(
        self,
        team_id: str,
        name: str,
        token: str,
        bot_user_id: str,
        *,
        enterprise_id: str | None = None,
        enterprise_name: str | None = None,
        bot_id: str | None = None,
    ) -> None:
        """Add team ``team_id`` (``T…``) named ``name`` where the app is installed with bot
        token ``token`` and bot user ``bot_user_id``; ``enterprise_id`` (``E…``) puts it in an
        Enterprise Grid organization. ``bot_id`` defaults to ``B`` + the team id's tail.

        Raises:
            ValueError: the team exists or the token is taken.
        """
        with self._lock:
            if team_id in self.teams:
                raise ValueError(f"team {team_id} exists")
            if token in self._grants:
                raise ValueError("that token already belongs to a team")
            self.teams[team_id] = SlackTeam(
                team_id,
                name,
                token,
                bot_user_id,
                bot_id or f"B{team_id[1:]}",
                _domain(name),
                enterprise_id,
                enterprise_name or (enterprise_id and f"Org {enterprise_id}"),
            )
            self._grants[token] = team_id

    def share(self, channel: str, team_id: str) -> None:
        """Share ``channel`` with team ``team_id`` (Slack Connect): its tokens see it too.

        Raises:
            KeyError: no such channel or team.
        """
        with self._lock:
            if channel not in self._channel_teams or team_id not in self.teams:
                raise KeyError(channel if channel not in self._channel_teams else team_id)
            self._channel_teams[channel].add(team_id)

    def channel_teams(self, channel: str) -> frozenset[str]:
        """The ids of the teams that see ``channel`` (``KeyError``: no such channel)."""
        with self._lock:
            return frozenset(self._channel_teams[channel])

    def oauth_client(self, client_id: str, client_secret: str) -> None:
        """Register an app's OAuth credentials (any number of apps)."""
        with self._lock:
            self._clients[client_id] = client_secret

    def authorization_code(
        self,
        code: str,
        team_id: str,
        *,
        redirect_uri: str | None = None,
        client_id: str | None = None,
        access_token: str | None = None,
        user_id: str = "U0INSTALLER",
    ) -> None:
        """Issue the single-use ``code`` for an installation in team ``team_id`` by user
        ``user_id``, as Slack does when a user approves the app at ``/oauth/v2/authorize``.

        ``redirect_uri``: the exchange must send exactly this one (``None``: any or none);
        ``client_id``: only that client may exchange it (``None``: any registered one);
        ``access_token``: the bot token the exchange answers (``None``: the team's token, or a
        new ``xoxb-…`` one if the team has none or it was revoked).

        Raises:
            KeyError: no such team.
            ValueError: ``access_token`` belongs to another team.
        """
        with self._lock:
            if team_id not in self.teams:
                raise KeyError(team_id)
            held = self._grants.get(access_token or "")
            if held is not None and held != team_id:
                raise ValueError("that token belongs to another team")
            self._codes[code] = _Code(team_id, redirect_uri, client_id, access_token, user_id)

    def revoke(self, token: str) -> None:
        """Revoke ``token``: every later call with it answers ``token_revoked``."""
        with self._lock:
            self._revoked.add(token)

    # ------------------------------------------------------------------ used by FakeSlack

    def _claim(self, channel: str, team_id: str | None) -> None:
        """Record the team of a conversation being created (default: the default team);
        for an existing one, check that ``team_id`` sees it."""
        owners = self._channel_teams.get(channel)
        if owners is None:
            tid = team_id or self.team_id
            if tid not in self.teams:
                raise KeyError(f"no team {tid!r}: add_team() it first")
            self._channel_teams[channel] = {tid}
        elif team_id is not None and team_id not in owners:
            raise ValueError(f"{channel} belongs to {sorted(owners)}: share() it first")

    def _team_for(self, token: str) -> tuple[str | None, str | None]:
        """``(team id, None)`` for a valid token, else ``(None, error code)``."""
        if token in self._revoked:
            return None, "token_revoked"
        team = self._grants.get(token)
        if team is None and self.teams[self.team_id].token is None:
            team = self.team_id
        return (team, None) if team is not None else (None, "invalid_auth")

    def _can_see(self, team_id: str, channel: str) -> bool:
        """Whether the team sees ``channel`` (unknown channels: yes, so the method answers
        its own ``channel_not_found``)."""
        return team_id in self._channel_teams.get(channel, {team_id})

    def _auth_test(self, team_id: str) -> dict[str, Any]:
        team = self.teams[team_id]
        body: dict[str, Any] = {
            "ok": True,
            "url": f"https://{team.domain}.slack.com/",
            "team": team.name,
            "user": self.bot_user_name,
            "team_id": team.id,
            "user_id": team.bot_user_id,
            "bot_id": team.bot_id,
        }
        if team.enterprise_id:
            body["enterprise_id"] = team.enterprise_id
        body["is_enterprise_install"] = False
        return body

    def _oauth_v2_access(self, params: dict[str, str], authorization: str | None) -> dict[str, Any]:
        creds = basic_credentials(authorization) or (
            params.get("client_id", ""),
            params.get("client_secret", ""),
        )
        secret = self._clients.get(creds[0])
        if secret is None:
            return {"ok": False, "error": "invalid_client_id"}
        if not hmac.compare_digest(secret, creds[1]):
            return {"ok": False, "error": "bad_client_secret"}
        if params.get("grant_type") not in (None, "", "authorization_code"):
            return {"ok": False, "error": "invalid_grant_type"}
        issued = self._codes.get(params.get("code", ""))
        if issued is None or issued.client_id not in (None, creds[0]):
            return {"ok": False, "error": "invalid_code"}
        if issued.redirect_uri is not None and params.get("redirect_uri") != issued.redirect_uri:
            return {"ok": False, "error": "bad_redirect_uri"}
        del self._codes[params["code"]]
        team = self.teams[issued.team_id]
        token = issued.access_token or team.token
        if token is None or (token in self._revoked and not issued.access_token):
            token = f"xoxb-{secrets.randbelow(10**11)}-{secrets.randbelow(10**11)}-" + (secrets.token_hex(12))
            if team.token is not None:  # a reinstall after revocation: the team's new token
                team.token = token
        self._grants[token] = team.id
        self._revoked.discard(token)
        enterprise = {"id": team.enterprise_id, "name": team.enterprise_name} if team.enterprise_id else None
        return {
            "ok": True,
            "app_id": self.app_id,
            "authed_user": {"id": issued.user_id},
            "scope": self.bot_scopes,
            "token_type": "bot",
            "access_token": token,
            "bot_user_id": team.bot_user_id,
            "team": {"id": team.id, "name": team.name},
            "enterprise": enterprise,
            "is_enterprise_install": False,
        }
