"""The :class:`Source` spec: a source as the service sees it.

A source is a package under ``integrations/`` (or a third-party distribution, through the
``debounce.integrations`` entry point group) that exposes one :class:`Source`: its
``source_type``, its typed settings, its default debounce window, how its webhooks are signed
(for ``debounce send``), how it spells page ids, and the factories of its two halves: the
:class:`~debounce.contract.sync.WebhookParser` (web) and the
:class:`~debounce.contract.sync.Syncer` (worker). The service — configuration, CLI, web, worker —
iterates the registry (:mod:`debounce.registry`, entry points) and names no source.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from debounce.contract.install import Identity, Installer
from debounce.contract.jobs import ApiBudget, SourceWindow
from debounce.contract.settings import (
    NoSettings,
    SourceSetting,
    setting_specs,
    settings_from_values,
)
from debounce.contract.sync import Syncer, WebhookParser

__all__ = ["DEFAULT_WINDOW", "MAX_PAGE_ID", "Factory", "HasSourceValues", "Source"]

#: ``create(settings)``: the syncer of a source, given its typed settings.
Factory = Callable[[Any], Syncer]
#: The longest page id a person may give (characters): no source's ids come near it.
MAX_PAGE_ID = 1000
#: The window of a source that declares none, seconds.
DEFAULT_WINDOW = SourceWindow(30.0, 300.0)


class HasSourceValues(Protocol):
    """What holds the sources' settings that were set (``debounce.config.Settings``): the
    values by field name; a field missing from it keeps its source's default."""

    @property
    def source_values(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Source:
    """A source as the service sees it (see the module docstring).

    - ``source_type``: the ``{source}`` of ``POST /webhooks/{source}`` and of its jobs;
    - ``create(settings)``: its :class:`~debounce.contract.sync.Syncer` (worker), given its
      typed settings (an instance of ``settings_type``); ``webhooks(settings)``: its
      :class:`~debounce.contract.sync.WebhookParser` (web; ``None``: it takes no webhooks);
    - ``settings_type``: the frozen dataclass of its settings (fields made with
      :func:`~debounce.contract.settings.setting`); ``env_prefix`` names its window variables
      (``<PREFIX>_DEBOUNCE_SECONDS``, ``<PREFIX>_MAX_WAIT_SECONDS``) whose defaults are
      ``window``;
    - ``secret_setting``: the field holding its webhook signing secret, and ``demo_secret``
      the one ``serve --demo`` and ``debounce send --demo`` use when it is unset;
    - ``sign(body, secret, timestamp)``: the headers that sign ``body`` as the source does
      (``debounce send``, tests); ``timestamp`` is Unix seconds or ``None`` for now;
    - ``normalize_page_id``: the job key spelling of a page id given by a person (manual
      re-sync, CLI); ``page_id_pattern``: a regular expression every page id of the source
      matches once normalized (``None``: any text), and ``page_id_form`` what such an id looks
      like, in words, for the error that refuses another (:meth:`page_id`);
    - ``handshake_command``: the CLI command that prints the handshake token the source sent
      (``None`` if it has no handshake);
    - ``installer(settings)``: its OAuth install flow (an
      :class:`~debounce.contract.install.Installer`; raises
      :class:`~debounce.contract.errors.InstallError` naming the settings it lacks);
    - ``token_setting``: the field whose token defines the environment's workspace;
      ``identify(settings, token)``: ask the source who a token is (an
      :class:`~debounce.contract.install.Identity`; raises
      :class:`~debounce.contract.errors.AuthRevoked` for a token that does not work);
    - ``budget``: the default API budget of each of its workspaces (``None``: unmetered),
      overridable by ``<PREFIX>_BUDGET_PER_MINUTE`` / ``<PREFIX>_BUDGET_BURST`` and per
      workspace (``debounce workspaces set-budget``); ``requests_per_page``: what a typical
      sync of one page costs (for the claim's reservation and the backfill's ETA);
    - ``reconcile_by_default``: whether its workspaces are swept for lost webhooks unless
      set otherwise (``debounce workspaces set-reconcile``);
    - ``audiences``: whether its documents carry per-user audiences (a conversation's
      kind and members), so the read API's ``visible_to`` may name one of its users;
    - ``audience_labels``: how each audience kind of its documents reads to a person on the
      dashboard and in the CLI (``{"im": "Slack DM"}``; a kind it does not name reads as
      itself).

    The methods taking ``settings`` accept anything with ``source_values``
    (:class:`HasSourceValues`, i.e. the service's ``Settings``) and build the typed settings
    with :meth:`configure`.
    """

    source_type: str
    create: Factory
    webhooks: Callable[[Any], WebhookParser] | None = None
    settings_type: type[Any] = NoSettings
    env_prefix: str = ""
    window: SourceWindow = DEFAULT_WINDOW
    secret_setting: str | None = None
    demo_secret: str | None = None
    sign: Callable[[bytes, str, int | None], dict[str, str]] | None = None
    normalize_page_id: Callable[[str], str] = str.strip
    page_id_pattern: str | None = None
    page_id_form: str = "a page id"
    handshake_command: str | None = None
    token_setting: str | None = None
    identify: Callable[[Any, str], Awaitable[Identity]] | None = None
    installer: Callable[[Any], Installer] | None = None
    budget: ApiBudget | None = None
    requests_per_page: float = 1.0
    reconcile_by_default: bool = False
    audiences: bool = False
    audience_labels: Mapping[str, str] = field(default_factory=dict)

    def page_id(self, raw: str) -> str:
        """The job key of the page id ``raw`` as a person gave it (a manual re-sync: the HTTP
        API, the dashboard, the CLI): :attr:`normalize_page_id`'s spelling.

        Raises:
            ValueError: ``raw`` is empty, longer than :data:`MAX_PAGE_ID`, holds a control
                character (a NUL byte: Postgres text cannot hold one), or does not match
                :attr:`page_id_pattern`; the message says what the source's ids look like.
        """
        if any(ord(c) < 32 or ord(c) == 127 for c in raw):
            raise ValueError(
                f"page_id must not contain control characters; a {self.source_type} "
                f"page id is {self.page_id_form}"
            )
        page_id = self.normalize_page_id(raw)
        if (
            not page_id
            or len(page_id) > MAX_PAGE_ID
            or (self.page_id_pattern is not None and re.fullmatch(self.page_id_pattern, page_id) is None)
        ):
            raise ValueError(
                f"page_id {raw[:80]!r} is not a {self.source_type} page id: one is {self.page_id_form}"
            )
        return page_id

    @property
    def settings(self) -> tuple[SourceSetting, ...]:
        """What it reads from the environment (the fields of ``settings_type``)."""
        return setting_specs(self.settings_type)

    def configure(self, settings: HasSourceValues) -> Any:
        """Its typed settings (an instance of ``settings_type``) from ``settings``."""
        return settings_from_values(self.settings_type, settings.source_values)

    def build(self, settings: HasSourceValues) -> Syncer:
        """Its syncer: ``create(configure(settings))``."""
        return self.create(self.configure(settings))

    def parser(self, settings: HasSourceValues) -> WebhookParser | None:
        """Its webhook parser: ``webhooks(configure(settings))`` (``None``: it has none)."""
        return None if self.webhooks is None else self.webhooks(self.configure(settings))

    def signing_secret(self, settings: HasSourceValues) -> str | None:
        """The configured webhook signing secret (``None`` when unset)."""
        return self._value(settings, self.secret_setting)

    def token(self, settings: HasSourceValues) -> str | None:
        """The configured token of the environment's workspace (``None`` when unset)."""
        return self._value(settings, self.token_setting)

    def _value(self, settings: HasSourceValues, name: str | None) -> str | None:
        if name is None:
            return None
        value = getattr(self.configure(settings), name, None)
        return str(value) if value else None

    def secret_env(self) -> str | None:
        """The environment variable of the webhook signing secret (``None`` if none)."""
        return next((s.env for s in self.settings if s.name == self.secret_setting), None)

    def window_settings(self) -> tuple[SourceSetting, SourceSetting]:
        """The two window variables, with this source's defaults."""
        prefix = self.env_prefix or self.source_type.upper()
        return (
            SourceSetting(
                "debounce_seconds",
                f"{prefix}_DEBOUNCE_SECONDS",
                self.window.debounce_seconds,
                "seconds",
                "debounce window: a page syncs this long after its latest event",
            ),
            SourceSetting(
                "max_wait_seconds",
                f"{prefix}_MAX_WAIT_SECONDS",
                self.window.max_wait_seconds,
                "seconds",
                "max wait: a page edited non-stop still syncs this long after its first event",
            ),
        )

    def budget_settings(self) -> tuple[SourceSetting, SourceSetting]:
        """The two budget variables, with this source's defaults (0 per minute: unmetered)."""
        prefix = self.env_prefix or self.source_type.upper()
        budget = self.budget or ApiBudget(0.0, 1.0)
        return (
            SourceSetting(
                "budget_per_minute",
                f"{prefix}_BUDGET_PER_MINUTE",
                budget.per_minute,
                "number",
                "API requests per minute per workspace (0: unmetered)",
            ),
            SourceSetting(
                "budget_burst",
                f"{prefix}_BUDGET_BURST",
                budget.burst,
                "number",
                "API requests a workspace may send at once (bucket capacity; at least 1)",
            ),
        )
