"""The configuration reference and the metadata it is generated from (issue 28, point 3).

- ``docs/configuration.md`` is what ``python -m debounce.devtools.config_reference`` prints: a variable
  added, renamed or re-described in the code without regenerating the file fails here, with
  the command that regenerates it;
- every variable the reference lists is the one the code reads: a non-default value in the
  environment reaches its field (the service's, a source's settings, window and budget), and a
  malformed one is refused naming it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

import pytest

from debounce import config, registry
from debounce.config import ENV, EnvVar, Settings
from debounce.contract import SourceSetting
from debounce.devtools.config_reference import COMMAND
from debounce.infra.secrets import new_key

ROOT = Path(__file__).resolve().parent.parent
KEY = new_key()

#: A non-default text of each kind of the service's variables, and the value it reads as.
SERVICE_SAMPLES: dict[config.Kind, tuple[str, Any]] = {
    config.TEXT: ("https://example.test/x", "https://example.test/x"),
    config.POSTGRES_URL: (
        "postgresql://app@db.example.test:5432/app",
        "postgresql://app@db.example.test:5432/app",
    ),
    config.SECRET: ("s3cret", "s3cret"),
    config.SECRET_KEY: (KEY, KEY),
    config.INTEGER: ("7", 7),
    config.OPTIONAL_INTEGER: ("7", 7),
    config.SECONDS: ("7.5", 7.5),
    config.POSITIVE_SECONDS: ("7.5", 7.5),
    config.LOG_FORMAT: ("json", "json"),
    config.LOG_LEVEL: ("debug", "DEBUG"),
    config.BACKOFF: ("1, 2.5", (1.0, 2.5)),
    config.COUNT: ("0", 0),
    config.SHARE: ("0.25", 0.25),
    config.MEDIA_TYPES: ("application/pdf, Text/CSV", ("application/pdf", "text/csv")),
    config.HOSTS: ("Files.Example.com., 127.0.0.1:8010", ("files.example.com", "127.0.0.1:8010")),
}
#: A text each kind refuses (``None``: every text is a value).
MALFORMED: dict[config.Kind, str | None] = {
    config.TEXT: None,
    config.POSTGRES_URL: "notaurl",
    config.SECRET: None,
    config.SECRET_KEY: "not-a-key",
    config.INTEGER: "0",
    config.OPTIONAL_INTEGER: "seven",
    config.SECONDS: "-1",
    config.POSITIVE_SECONDS: "0",
    config.BOOLEAN: "maybe",
    config.LOG_FORMAT: "xml",
    config.LOG_LEVEL: "loud",
    config.BACKOFF: "1,x",
    config.COUNT: "-1",
    config.SHARE: "1.5",
    config.MEDIA_TYPES: "pdf",
    config.HOSTS: "https://x.example/",
}
#: A non-default text of each kind of a source's variables, and the value it reads as.
SOURCE_SAMPLES = {
    "str": ("https://example.test/x", "https://example.test/x"),
    "secret": ("s3cret", "s3cret"),
    "seconds": ("7.5", 7.5),
    "number": ("7.5", 7.5),
}
#: Where a window or budget variable lands: (settings, source type) -> value.
WINDOW_AND_BUDGET: dict[str, Callable[[Settings, str], Any]] = {
    "debounce_seconds": lambda s, t: s.window(t).debounce_seconds,
    "max_wait_seconds": lambda s, t: s.window(t).max_wait_seconds,
    "budget_per_minute": lambda s, t: s.budget(t).per_minute,  # type: ignore[union-attr]
    "budget_burst": lambda s, t: s.budget(t).burst,  # type: ignore[union-attr]
}


def service_fields() -> list[Field[Any]]:
    return [f for f in fields(Settings) if ENV in f.metadata]


def env_var(f: Field[Any]) -> EnvVar:
    var = f.metadata[ENV]
    assert isinstance(var, EnvVar)
    return var


def source_specs() -> list[tuple[str, SourceSetting]]:
    return [
        (source_type, spec)
        for source_type, source in registry.builtin_sources().items()
        for spec in (*source.settings, *source.window_settings(), *source.budget_settings())
    ]


def test_the_committed_reference_is_what_the_generator_prints() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "debounce.devtools.config_reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert done.stdout == committed, (
        f"docs/configuration.md disagrees with the code: regenerate it with `{COMMAND}`"
    )


def test_the_reference_lists_every_variable_once() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    names = [env_var(f).name for f in service_fields()] + [s.env for _, s in source_specs()]
    assert len(names) == len(set(names))
    for name in names:
        assert text.count(f"| `{name}` |") == 1, name
    assert f"`{COMMAND}`" in text.splitlines()[2]


@pytest.mark.parametrize("f", service_fields(), ids=lambda f: env_var(f).name)
def test_a_service_variable_reaches_its_field(f: Field[Any]) -> None:
    var = env_var(f)
    if var.kind is config.BOOLEAN:
        text, value = ("false", False) if f.default else ("true", True)
    else:
        assert var.kind in SERVICE_SAMPLES, f"give {var.kind.type!r} a sample here"
        text, value = SERVICE_SAMPLES[var.kind]
    assert value != f.default
    assert getattr(Settings.from_env({var.name: text}), f.name) == value
    assert getattr(Settings.from_env({}), f.name) == f.default
    assert getattr(Settings.from_env({var.name: ""}), f.name) == f.default  # empty is unset


@pytest.mark.parametrize("f", service_fields(), ids=lambda f: env_var(f).name)
def test_a_malformed_service_variable_is_refused_naming_it(f: Field[Any]) -> None:
    var = env_var(f)
    bad = MALFORMED[var.kind]
    if bad is None:
        return
    with pytest.raises(ValueError, match=var.name):
        Settings.from_env({var.name: bad})


@pytest.mark.parametrize(("source_type", "spec"), source_specs(), ids=[s.env for _, s in source_specs()])
def test_a_source_variable_reaches_its_setting(source_type: str, spec: SourceSetting) -> None:
    text, value = SOURCE_SAMPLES[spec.kind]
    assert value != spec.default
    settings = Settings.from_env({spec.env: text})
    read = WINDOW_AND_BUDGET.get(spec.name)
    if read is not None:
        assert read(settings, source_type) == value
    else:
        assert getattr(registry.get(source_type).configure(settings), spec.name) == value
    if spec.kind in ("seconds", "number"):
        with pytest.raises(ValueError, match=spec.env):
            Settings.from_env({spec.env: "-1"})
