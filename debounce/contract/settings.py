"""Settings read from the environment: the one parser of environment values (used by the
service's own :class:`~debounce.config.Settings` and by every source), and the typed settings
of a source.

A source declares its settings as a frozen dataclass whose fields are made with
:func:`setting` (the variable, the default, the kind, one line of help)::

    @dataclass(frozen=True)
    class NotionSettings:
        notion_token: str | None = setting("NOTION_TOKEN", kind="secret", help="…")

The service reads each field's variable with its parser (``debounce.config.Settings.from_env``)
and builds the dataclass from the values read or set by a caller (:func:`settings_from_values`),
then hands it to the source's factories: every read is a typed attribute. Field names are
unique across sources (``notion_…``, ``slack_…``), so ``Settings(notion_token=…)`` can route a
keyword to its source.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "NoSettings",
    "SourceSetting",
    "env_bool",
    "env_int",
    "env_number",
    "env_seconds",
    "env_str",
    "setting",
    "setting_specs",
    "settings_from_values",
]

S = TypeVar("S")

#: The kinds of a setting: ``str`` (kept as given), ``secret`` (a string never shown),
#: ``seconds`` and ``number`` (a number >= 0).
KINDS = ("str", "secret", "seconds", "number")


def env_str(env: Mapping[str, str], name: str) -> str | None:
    """The text of variable ``name``; ``None`` when unset or empty."""
    raw = env.get(name)
    return raw if raw else None


def _number(env: Mapping[str, str], name: str, default: float, what: str) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{name} must be {what}, got {raw!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {raw!r}")
    return value


def env_seconds(env: Mapping[str, str], name: str, default: float, *, positive: bool = False) -> float:
    """Variable ``name`` as a number of seconds >= 0 (> 0 with ``positive``); ``default`` when
    unset or empty.

    Raises:
        ValueError: not a finite number, negative, or 0 with ``positive`` (names the variable).
    """
    value = _number(env, name, default, "a number of seconds")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0 seconds, got {env.get(name)!r}")
    return value


def env_number(env: Mapping[str, str], name: str, default: float) -> float:
    """Variable ``name`` as a finite number >= 0; ``default`` when unset or empty.

    Raises:
        ValueError: not a finite number, or negative (names the variable).
    """
    return _number(env, name, default, "a number")


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    """Variable ``name`` as an integer >= ``minimum``; ``default`` when unset or empty.

    Raises:
        ValueError: not an integer, or below ``minimum`` (names the variable).
    """
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {raw!r}")
    return value


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """Variable ``name`` as a boolean (1/true/yes/on, 0/false/no/off); ``default`` when unset.

    Raises:
        ValueError: anything else (names the variable).
    """
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be true or false, got {env.get(name)!r}")


@dataclass(frozen=True)
class SourceSetting:
    """One setting read from the environment (what :func:`setting` records on a field).

    ``name`` is the field (and the keyword of ``Settings(…)``), ``env`` the variable,
    ``default`` the value when it is unset or empty; ``kind`` one of :data:`KINDS`. ``help``
    is one line of meaning for the configuration reference (docs/configuration.md).
    """

    name: str
    env: str
    default: Any = None
    kind: str = "str"
    help: str = ""

    def parse(self, raw: str | None) -> Any:
        """The value of ``raw`` (the variable's text, ``None`` if unset).

        Raises:
            ValueError: not a number >= 0 for a ``seconds`` or ``number`` setting (names the
                variable).
        """
        env = {self.env: raw} if raw is not None else {}
        if self.kind == "seconds":
            return env_seconds(env, self.env, self.default)
        if self.kind == "number":
            return env_number(env, self.env, self.default)
        if raw is None or raw.strip() == "":
            return self.default
        return raw


def setting(env: str, default: Any = None, *, kind: str = "str", help: str = "") -> Any:
    """A field of a source's settings dataclass read from variable ``env`` (see the module
    docstring); ``default`` when unset. Returns a ``dataclasses.field``.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown setting kind {kind!r} (expected one of {', '.join(KINDS)})")
    return dataclasses.field(
        default=default, metadata={"env": env, "kind": kind, "help": help}, repr=kind != "secret"
    )


@dataclass(frozen=True)
class NoSettings:
    """The settings of a source that reads none."""


def setting_specs(settings_type: type[Any]) -> tuple[SourceSetting, ...]:
    """The settings a settings dataclass declares, in field order (fields made without
    :func:`setting` are not read from the environment)."""
    return tuple(
        SourceSetting(
            f.name, f.metadata["env"], f.default, f.metadata.get("kind", "str"), f.metadata.get("help", "")
        )
        for f in dataclasses.fields(settings_type)
        if "env" in f.metadata
    )


def settings_from_values(settings_type: type[S], values: Mapping[str, Any]) -> S:
    """``settings_type`` with the fields ``values`` holds (keys of other sources are ignored);
    the rest keep their defaults."""
    names = {f.name for f in dataclasses.fields(settings_type)}  # type: ignore[arg-type]
    return settings_type(**{k: v for k, v in values.items() if k in names})
