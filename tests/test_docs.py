"""The docs name what exists (issue 28): every reference into this repository that README.md
and docs/*.md write in backticks — a dotted name (``debounce.infra.db.is_transient``,
``queue.enqueue``, ``worker/loop.Worker._claim_round``), a file (``sql/queries/claim.sql``,
``web/errors.py``, ``tests/test_x.py::test_y``) — exists, and every relative Markdown link
resolves. bench/HISTORY.md is a record of the past and is not checked.

What counts as a reference is kept narrow so prose, API method names of the sources
(``pages.retrieve``), table columns (``documents.audience_kind``) and shell lines are not
flagged: a dotted name is checked only when it starts with a package of the project or a
module of ``debounce/``; a file only when its path starts with a directory of the project or
resolves under ``debounce/`` or ``integrations/``."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_PACKAGES = ("debounce", "integrations", "standins", "bench")
_TOP_DIRS = ("debounce", "integrations", "standins", "bench", "sql", "tests", "docs", "examples", ".ci")


#: Modules of debounce/ cited by their short name (``queue.claim``). Those that share their
#: name with a table are checked for classes only (``workspaces.Directory``, not a column such
#: as ``documents.workspace_id``); ``secrets`` is also the standard library's.
def _short_names() -> dict[str, str]:
    """Short name → module: debounce's root modules and packages, then the modules of its
    plumbing and domain packages (``db`` is ``debounce.infra.db``, ``feed``
    ``debounce.documents.feed``); a root name wins over a nested one."""
    names: dict[str, str] = {}
    for package in ("infra", "documents", "workspaces", "queue"):
        for p in (ROOT / "debounce" / package).glob("*.py"):
            if not p.name.startswith("_"):
                names.setdefault(p.stem, f"debounce.{package}.{p.stem}")
    for p in (ROOT / "debounce").iterdir():
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and not p.name.startswith("_"):
            names[p.stem] = f"debounce.{p.stem}"
    return names


_SHORT = _short_names()
_TABLES = {"documents", "workspaces", "backfills"}
del _SHORT["secrets"]
#: Inside shell blocks too: a file of the repository passed to a command.
_SHELL_FILE = re.compile(r"(?<![\w/.])((?:examples|sql|bench|tests|docs)/[\w./-]+\.(?:json|py|sql|md))")
#: Dotted names that are not modules but strings the code uses, each with the file saying so.
NAMES = {
    "debounce.integrations": "debounce/registry.py",  # the entry point group
    "integrations.notion.sdk": "integrations/notion/client.py",
}  # the SDK's logger


def pages() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [ROOT / "README.md", *docs]


def _resolve_attr(module_name: str, attrs: list[str]) -> str | None:
    """``None`` when ``module_name`` imports and has ``attrs`` in turn, else what is missing."""
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        return f"no module {module_name} ({exc})"
    for i, attr in enumerate(attrs):
        if not hasattr(obj, attr):
            return f"{module_name}.{'.'.join(attrs[: i + 1])} does not exist"
        obj = getattr(obj, attr)
    return None


def _dotted(name: str) -> str | None:
    """A full dotted name (``debounce.x.y``): the longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        return _resolve_attr(module, parts[cut:])
    return f"no module {parts[0]}"


def _module_file(path: str) -> Path | None:
    """``worker/loop`` → debounce/worker/loop.py (or a package), from the repository's root,
    ``debounce/`` or ``integrations/``."""
    for base in (ROOT, ROOT / "debounce", ROOT / "integrations"):
        for candidate in (base / f"{path}.py", base / path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _module_name(file: Path) -> str:
    relative = file.relative_to(ROOT).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _file(path: str) -> str | None:
    """A path (``sql/queries/claim.sql``, ``web/errors.py``, ``tests/t.py::test_x``) that exists."""
    path, _, test = path.partition("::")
    found = next(
        (base / path for base in (ROOT, ROOT / "debounce", ROOT / "integrations") if (base / path).exists()),
        None,
    )
    if found is None:
        return f"no file {path}"
    if test and not re.search(
        rf"^\s*(?:async\s+)?(?:def|class)\s+{test}\b|^{test}\s*[:=]", found.read_text(), re.M
    ):
        return f"{path} has no {test}"
    return None


def check_span(span: str) -> str | None:
    """What is wrong with the reference in one backtick span (``None``: fine or not a
    reference)."""
    span = re.sub(r"\(.*\)$", "", span.strip())  # a call: `Source.create(settings)`
    if not re.fullmatch(r"[\w./:-]+", span) or span.startswith(("/", "./", "http")):
        return None
    if span in NAMES:
        return None if f'"{span}"' in (ROOT / NAMES[span]).read_text() else f"{span} is gone"
    head = span.split("/")[0].split(".")[0]
    if "/" in span:
        if not re.fullmatch(r"\.?\w+", span.split("/")[0]):
            return None
        if not (
            head in _TOP_DIRS
            or _module_file(span.split("/")[0]) is not None
            or (ROOT / "debounce" / span.split("/")[0]).is_dir()
        ):
            return None
        mod = re.fullmatch(r"([\w/]+)\.([A-Za-z_][\w.]*)", span)
        if mod and not re.search(r"\.(py|sql|md|json|toml|lua|txt|html)$", span):
            file = _module_file(mod.group(1))
            if file is None:
                return f"no module file for {mod.group(1)}"
            return _resolve_attr(_module_name(file), mod.group(2).split("."))
        if span.endswith("/") or re.search(r"\.\w+(::\w+)?$", span):
            return _file(span)
        if _module_file(span) is None and not (ROOT / span).exists():
            return f"no module or directory {span}"
        return None
    if "." not in span or ":" in span or "-" in span:
        return None
    if head in _PACKAGES:
        return _dotted(span)
    if head in _SHORT:
        attrs = span.split(".")[1:]
        if head in _TABLES and not attrs[0][:1].isupper():
            return None
        return _resolve_attr(_SHORT[head], attrs)
    return None


def check_page(page: Path, text: str | None = None) -> list[str]:
    """Every problem of one page: broken references in backticks, files named in shell
    blocks, relative links that do not resolve."""
    text = page.read_text() if text is None else text
    shell = "\n".join(m.group(0) for m in _FENCE.finditer(text))
    problems = [
        f"`{m.group(1)}` in {page.name}: {problem}"
        for m in _SHELL_FILE.finditer(shell)
        if (problem := _file(m.group(1))) is not None
    ]
    prose = _FENCE.sub("", text)
    for m in _SPAN.finditer(prose):
        if (problem := check_span(m.group(1))) is not None:
            problems.append(f"`{m.group(1)}` in {page.name}: {problem}")
    for m in _LINK.finditer(_SPAN.sub("", prose)):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue
        resolved = (page.parent / target).resolve()
        if not resolved.exists():
            problems.append(f"link ({m.group(1)}) in {page.name}: {resolved} does not exist")
    return problems


def test_the_docs_name_only_what_exists() -> None:
    problems = [p for page in pages() for p in check_page(page)]
    assert not problems, "\n".join(problems)


def test_the_check_catches_each_kind_of_drift() -> None:
    page = ROOT / "docs" / "design.md"
    bad = (
        "`queue.claim_everything` `db.Backoff` `debounce.queue.no_such` "
        "`integrations.notion.nothing` `worker/loop.Worker._no_such` `web/no_such.py` "
        "`sql/no_such.sql` `tests/test_docs.py::test_no_such` `debounce/no_such/` "
        "[a link](no_such.md)\n```sh\ndebounce send notion examples/notion/no_such.json\n```\n"
    )
    found = check_page(page, bad)
    assert len(found) == 11, "\n".join(found)
    fine = (
        "`queue.enqueue` `retry.Backoff` `debounce.infra.db.is_transient` "
        "`worker/loop.Worker._claim_round` `web/errors.py` `sql/queries/claim.sql` "
        "`tests/test_docs.py::test_the_check_catches_each_kind_of_drift` "
        "`Source.create(settings)` `pages.retrieve` `documents.audience_kind` "
        "`secrets.token_urlsafe` `https://example.com/a.py` `/usr/bin/chromium` "
        "[ok](design.md#modules) [web](https://example.com) [cfg](configuration.md)\n"
    )
    assert check_page(page, fine) == []
