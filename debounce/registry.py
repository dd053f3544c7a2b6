"""The registry of sources: ``source_type`` → :class:`~debounce.contract.Source`.

Every source joins through an entry point in the ``debounce.integrations`` group whose object
is a :class:`~debounce.contract.Source`: the built-in ones (``integrations/notion``,
``integrations/slack``) are declared in debounce's own ``pyproject.toml`` exactly as a
third-party distribution declares its own (``[project.entry-points."debounce.integrations"]
mysource = "mypackage.source:SOURCE"``, see docs/writing-a-source.md); tests and embedders
may :func:`register` one at run time. A source is a package with the modules ``webhook``,
``client``, ``render``, ``sync`` (see ``integrations/notion/``); adding one is adding one
folder and one entry point.

The service reaches the sources only through this module, and this module imports only the
contract (:mod:`debounce.contract`): the sources are loaded by their entry points, so no
import arrow points from the service into ``integrations`` (an import contract in
``pyproject.toml`` forbids one).
"""

from __future__ import annotations

import functools
import logging
from importlib.metadata import EntryPoint, entry_points

from debounce.contract import (
    Factory,
    HasSourceValues,
    Source,
    SourceSetting,
    Syncer,
    WebhookParser,
)

__all__ = [
    "DISTRIBUTION",
    "ENTRY_POINT_GROUP",
    "UnknownSource",
    "builtin_sources",
    "create",
    "create_all",
    "get",
    "normalize_page_id",
    "parsers",
    "register",
    "source_settings",
    "source_types",
    "sources",
]

log = logging.getLogger("debounce.registry")

#: The entry point group every source registers under.
ENTRY_POINT_GROUP = "debounce.integrations"
#: The distribution whose entry points are the built-in sources.
DISTRIBUTION = "debounce"

_extra: dict[str, Source] = {}


class UnknownSource(KeyError):
    """No source is registered under this ``source_type``."""


def _load(point: EntryPoint) -> Source | None:
    try:
        source = point.load()
    except Exception as exc:  # a broken plug-in must not take the service down
        log.error("cannot load source %s from %s: %s", point.name, point.value, exc)
        return None
    if not isinstance(source, Source):
        log.error("entry point %s (%s) is not a debounce.contract.Source", point.name, point.value)
        return None
    return source


def _points(*, builtin: bool) -> list[EntryPoint]:
    return sorted(
        (
            p
            for p in entry_points(group=ENTRY_POINT_GROUP)
            if (p.dist is not None and p.dist.name == DISTRIBUTION) == builtin
        ),
        key=lambda p: p.name,
    )


def builtin_sources() -> dict[str, Source]:
    """The built-in sources (debounce's own entry points) by source type: what ships with
    debounce, without other distributions' and the run-time ones.

    Raises:
        RuntimeError: debounce's entry points are missing (it was not installed:
            ``pip install -e .`` registers them).
    """
    found = {s.source_type: s for p in _points(builtin=True) if (s := _load(p)) is not None}
    if not found:
        raise RuntimeError(
            "no built-in source is registered: install debounce "
            "(pip install -e .) so that its entry points exist"
        )
    return found


@functools.cache
def _installed() -> dict[str, Source]:
    found = builtin_sources()
    for point in _points(builtin=False):
        source = _load(point)
        if source is not None:
            found[source.source_type] = source
    return found


def sources() -> dict[str, Source]:
    """Every registered source by source type (built-in, entry points, then run-time)."""
    return {**_installed(), **_extra}


def source_types() -> list[str]:
    """The registered source types, sorted."""
    return sorted(sources())


def get(source_type: str) -> Source:
    """The source registered under ``source_type``.

    Raises:
        UnknownSource: nothing is registered under that name.
    """
    source = sources().get(source_type)
    if source is None:
        raise UnknownSource(source_type)
    return source


def register(source_type: str, factory: Factory | Source) -> None:
    """Register (or replace) a source at run time, for tests and embedders: a full
    :class:`Source`, or just the factory of its syncer (which then receives
    :class:`~debounce.contract.NoSettings`)."""
    _extra[source_type] = (
        factory if isinstance(factory, Source) else Source(source_type=source_type, create=factory)
    )


def normalize_page_id(source_type: str, page_id: str) -> str:
    """The job key spelling of ``page_id`` (as a person gave it: a manual re-sync, the CLI)
    for ``source_type``: its source's :meth:`~debounce.contract.Source.page_id` (Notion accepts
    ids with or without dashes). So a re-sync lands on the same job as the webhooks.

    Raises:
        UnknownSource: nothing is registered under ``source_type``.
        ValueError: ``page_id`` is not one of the source's page ids (the message says what
            one looks like).
    """
    return get(source_type).page_id(page_id)


def source_settings() -> dict[str, SourceSetting]:
    """Every source's settings by field name (what :class:`~debounce.config.Settings`
    accepts besides its own fields)."""
    return {s.name: s for source in sources().values() for s in source.settings}


def create(source_type: str, settings: HasSourceValues) -> Syncer:
    """The syncer of ``source_type`` built with its typed settings taken from ``settings``
    (the service's ``Settings``): the worker's half.

    Raises:
        UnknownSource: nothing is registered under that name.
    """
    return get(source_type).build(settings)


def create_all(settings: HasSourceValues) -> dict[str, Syncer]:
    """Every registered source's syncer, keyed by source type (the worker's)."""
    return {name: source.build(settings) for name, source in sorted(sources().items())}


def parsers(settings: HasSourceValues) -> dict[str, WebhookParser]:
    """Every registered source's webhook parser, keyed by source type (the web's: no syncer
    is built in the web process)."""
    found = {name: source.parser(settings) for name, source in sorted(sources().items())}
    return {name: parser for name, parser in found.items() if parser is not None}
