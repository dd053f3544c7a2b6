"""The kinds of the service's environment variables: how one variable is read, checked and
shown (:class:`Kind`), the declaration of a setting's variable (:func:`variable`, kept in the
field's metadata under :data:`ENV` as an :class:`EnvVar`), and the kinds themselves (``TEXT``,
``INTEGER``, ``SECONDS``, ...). :class:`debounce.config.Settings` declares its fields with them;
``docs/configuration.md`` is generated from the same metadata."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from debounce.contract.settings import env_bool, env_int, env_number, env_seconds, env_str

#: The key of a field's metadata that holds its :class:`EnvVar`.
ENV = "debounce.env"

#: Reads one variable: ``(environment, variable, default) -> value``; raises ``ValueError``
#: naming the variable when its text is malformed.
Reader = Callable[[Mapping[str, str], str, Any], Any]


def number_text(value: float) -> str:
    """``value`` as a variable's text (``604800``, not ``604800.0``)."""
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class Kind:
    """How a variable's text becomes a value: ``type`` as the reference shows it, ``read``
    (see :data:`Reader`), ``show`` writes a default back as the variable's text; a ``secret``
    is left out of ``repr``."""

    type: str
    read: Reader
    show: Callable[[Any], str] = str
    secret: bool = False


@dataclass(frozen=True)
class EnvVar:
    """What :func:`variable` records on a field: the variable ``name``, its :class:`Kind`, one
    line of ``meaning``, and what an unset variable means when the default alone does not say
    (``unset``)."""

    name: str
    kind: Kind
    meaning: str
    unset: str = ""

    def read(self, env: Mapping[str, str], default: Any) -> Any:
        """The value of this variable in ``env``; ``default`` when unset.

        Raises:
            ValueError: malformed (names the variable).
        """
        return self.kind.read(env, self.name, default)

    def default_text(self, default: Any) -> str:
        """The default as the reference shows it (Markdown: the variable's text, and what it
        means)."""
        shown = "unset" if default is None else f"`{self.kind.show(default)}`"
        return f"{shown}: {self.unset}" if self.unset else shown


def variable(name: str, kind: Kind, meaning: str, default: Any = None, *, unset: str = "") -> Any:
    """A field of :class:`Settings` read from variable ``name`` (see the module docstring);
    ``default`` when unset. Returns a ``dataclasses.field`` (secrets are left out of its
    ``repr``)."""
    return field(default=default, repr=not kind.secret, metadata={ENV: EnvVar(name, kind, meaning, unset)})


def _text(env: Mapping[str, str], name: str, default: Any) -> Any:
    return env_str(env, name) or default


def _optional_int(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    return env_int(env, name, 1) if raw and raw.strip() else default


def _postgres_url(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env_str(env, name)
    if raw is None:
        return default
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(raw)
    except Exception as exc:  # psycopg.ProgrammingError, libpq's words after the colon
        raise ValueError(
            f"{name} is not a Postgres URL (postgresql://user:password@host:5432/"
            f"database): {str(exc).strip().splitlines()[0]}"
        ) from None
    return raw


def _positive(env: Mapping[str, str], name: str, default: Any) -> Any:
    return env_seconds(env, name, default, positive=True)


def _secret_key(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env_str(env, name)
    if raw is not None:
        from debounce.infra.secrets import Keyring

        Keyring(raw)  # raises SecretKeyError (a ValueError) naming the variable
    return raw or default


def _log_format(env: Mapping[str, str], name: str, default: Any) -> Any:
    value = env.get(name, default).strip().lower() or default
    if value not in ("text", "json"):
        raise ValueError(f"{name} must be 'text' or 'json', got {value!r}")
    return value


#: The level names ``logging`` knows.
_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def _log_level(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = (env.get(name) or default).strip().upper()
    if raw == "WARN":
        raw = "WARNING"
    if raw not in _LEVELS:
        raise ValueError(f"{name} must be one of {', '.join(_LEVELS)}, got {env.get(name)!r}")
    return raw


def _backoff(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if not raw:
        return default
    try:
        backoff = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{name} must be comma-separated seconds, got {raw!r}") from None
    if not backoff or any(not 0 <= b < math.inf for b in backoff):
        raise ValueError(f"{name} must list seconds >= 0, got {raw!r}")
    return backoff


def _media_types(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    types = tuple(dict.fromkeys(t.strip().lower() for t in raw.split(",") if t.strip()))
    if any("/" not in t for t in types):
        raise ValueError(f"{name} must list media types (`type/subtype`), comma-separated, got {raw!r}")
    return types


def _hosts(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    hosts = tuple(dict.fromkeys(h.strip().lower().rstrip(".") for h in raw.split(",") if h.strip()))
    if any("/" in h or " " in h for h in hosts):
        raise ValueError(f"{name} must list host names (`files.example.com`), comma-separated, got {raw!r}")
    return hosts


def _bool_text(value: Any) -> str:
    return "true" if value else "false"


#: The kinds of the service's variables (:func:`variable`'s ``kind``). A text kept as given.
def _share(env: Mapping[str, str], name: str, default: Any) -> Any:
    value = env_number(env, name, default)
    if value > 1:
        raise ValueError(f"{name} must be a share between 0 and 1, got {env.get(name)!r}")
    return value


TEXT = Kind("text", _text)
#: A Postgres connection URL (or libpq key=value string), checked when read.
POSTGRES_URL = Kind("Postgres URL", _postgres_url)
#: A text never shown (left out of ``repr``).
SECRET = Kind("secret", _text, secret=True)
#: Fernet key(s), checked when read.
SECRET_KEY = Kind("Fernet keys, comma-separated", _secret_key, secret=True)
#: An integer >= 1.
INTEGER = Kind("integer ≥ 1", lambda env, name, default: env_int(env, name, default))
#: An integer >= 1, or unset (``None``).
OPTIONAL_INTEGER = Kind("integer ≥ 1", _optional_int)
#: A number of seconds >= 0 (> 0 for ``POSITIVE_SECONDS``).
SECONDS = Kind("seconds ≥ 0", lambda env, name, default: env_seconds(env, name, default), number_text)
POSITIVE_SECONDS = Kind("seconds > 0", _positive, number_text)
SHARE = Kind("share 0..1", _share, number_text)
COUNT = Kind("integer ≥ 0", lambda env, name, default: env_int(env, name, default, minimum=0))
BOOLEAN = Kind("true or false", lambda env, name, default: env_bool(env, name, default), _bool_text)
LOG_FORMAT = Kind("`text` or `json`", _log_format)
LOG_LEVEL = Kind("level name", _log_level)
#: Media types, comma-separated (``application/pdf,text/csv``).
MEDIA_TYPES = Kind("media types, comma-separated", _media_types, ",".join)
#: Host names (``host`` or ``host:port``), comma-separated; unset: none.
HOSTS = Kind("host names, comma-separated", _hosts, ",".join)
#: A backoff schedule: seconds >= 0, comma-separated.
BACKOFF = Kind(
    "seconds, comma-separated", _backoff, lambda schedule: ",".join(number_text(s) for s in schedule)
)
