"""A source's OAuth install flow and who a token is: part of the contract
(:mod:`debounce.contract`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from debounce.contract.errors import InstallError

__all__ = ["Identity", "InstallError", "Installed", "Installer"]


@dataclass(frozen=True)
class Identity:
    """Who a token is, as its source says (``users.me`` / ``auth.test``): the workspace's id
    and name, the bot's user id, the Grid org."""

    external_id: str
    name: str = ""
    bot_user_id: str | None = None
    enterprise_id: str | None = None


@dataclass(frozen=True)
class Installed:
    """A workspace an install flow connected: the row saved (``id``, ``external_id``,
    ``name``, …, never the credentials) and what the success page shows (``details``)."""

    workspace: Mapping[str, Any]
    details: Mapping[str, Any] = field(default_factory=dict)


class Installer(Protocol):
    """A source's OAuth install flow ("Add to Slack", Notion's public integration).

    ``authorize_url(state, redirect_uri)``: where to send the user; ``complete(code,
    redirect_uri, save)`` exchanges the code for a token and stores the workspace with
    ``save(**fields)`` (:func:`debounce.workspaces.save`'s keywords) — raises
    :class:`InstallError`; ``success_page`` / ``failure_page`` render the HTML the user sees.
    """

    def authorize_url(self, state: str, redirect_uri: str) -> str: ...

    async def complete(
        self, code: str, redirect_uri: str, save: Callable[..., Awaitable[Mapping[str, Any]]]
    ) -> Installed: ...

    def success_page(self, installed: Installed) -> str: ...

    def failure_page(self, reason: str) -> str: ...
