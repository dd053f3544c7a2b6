"""Registry of sources: ``source_type`` → integration.

Every module or subpackage of this package other than ``base`` (and names starting with ``_``)
is a source. It defines (or re-exports) ``SOURCE_TYPE`` and ``create(settings, store) ->
Integration``; adding a source is adding one folder (``integrations/<source>/``). ``store``
is ``None`` in the web process, which only parses webhooks.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from integrations.base import Integration

if TYPE_CHECKING:
    from debounce.config import Settings
    from debounce.documents import DocumentStore

__all__ = ["source_types", "create", "create_all", "register", "UnknownSource"]

Factory = Callable[["Settings", "DocumentStore | None"], Integration]

_extra: dict[str, Factory] = {}


class UnknownSource(KeyError):
    """No integration is registered under this ``source_type``."""


def _discovered() -> dict[str, Factory]:
    found: dict[str, Factory] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module: Any = importlib.import_module(f"{__name__}.{info.name}")
        source = getattr(module, "SOURCE_TYPE", None)
        factory = getattr(module, "create", None)
        if isinstance(source, str) and callable(factory):
            found[source] = factory
    return found


def _factories() -> dict[str, Factory]:
    return {**_discovered(), **_extra}


def source_types() -> list[str]:
    """The registered source types, sorted."""
    return sorted(_factories())


def register(source_type: str, factory: Factory) -> None:
    """Register (or replace) a source at run time; for tests and embedders."""
    _extra[source_type] = factory


def create(
    source_type: str, settings: Settings, store: DocumentStore | None = None
) -> Integration:
    """The integration of ``source_type``.

    Raises:
        UnknownSource: nothing is registered under that name.
    """
    factory = _factories().get(source_type)
    if factory is None:
        raise UnknownSource(source_type)
    return factory(settings, store)


def create_all(settings: Settings, store: DocumentStore | None = None) -> dict[str, Integration]:
    """Every registered integration, keyed by source type."""
    return {name: factory(settings, store) for name, factory in sorted(_factories().items())}
