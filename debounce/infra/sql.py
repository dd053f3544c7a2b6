"""The reviewed SQL in ``sql/``: ``sql/migrations/NNN_*.sql`` (the schema's history, applied in
order), ``sql/queries/<domain>.sql`` (the named statements, each file owned by the module of its
domain) and ``sql/schema.sql`` (the schema the migrations produce, generated), loaded once.

Named queries follow Procrastinate's habit: a file such as ``sql/queries/queue.sql`` holds blocks that
start with a header line ``-- name --`` and a comment saying what the statement does, followed
by the statement with ``%(param)s`` placeholders. Python only binds values. A block whose name
starts with ``_`` is a fragment, not a query: other blocks of the same file include it where
they write ``{{_name}}`` (one reviewed copy of SQL that several statements share).

In a source checkout (and an editable install) the files are read from the repository's
``sql/``; a wheel carries the same files as ``debounce/_sql`` (see ``pyproject.toml``).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import LiteralString

__all__ = ["compact", "migrations", "queries", "sql_dir"]

_HEADER = re.compile(r"^-- (_?[a-z][a-z0-9_]*) --\s*$")
_INCLUDE = re.compile(r"\{\{(?:([a-z][a-z0-9_]*)\.)?(_[a-z][a-z0-9_]*)\}\}")
_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
_SPACES = re.compile(r"\s{2,}")


def sql_dir() -> Path:
    """Directory holding the ``.sql`` files.

    Raises:
        FileNotFoundError: neither the packaged copy nor the checkout's ``sql/`` exists.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_sql", package.parent / "sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no sql/ directory next to {package}")


@functools.cache
def _parsed(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """``sql/queries/<name>.sql`` as (statements, fragments), fragments without their comment lines.

    Raises:
        FileNotFoundError: no such file.
        ValueError: text before the first header, or a name defined twice.
    """
    text = (sql_dir() / "queries" / f"{name}.sql").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is not None:
            if current in out:
                raise ValueError(f"sql/queries/{name}.sql defines {current!r} twice")
            out[current] = "\n".join(lines).strip().rstrip(";")

    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            flush()
            current, lines = match.group(1), []
        elif current is None:
            if line.strip() and not line.startswith("--"):
                raise ValueError(f"sql/queries/{name}.sql: statement text before the first header")
        else:
            lines.append(line)
    flush()
    # A fragment's own comment stays in the file; the statements get its SQL.
    fragments = {
        k: "\n".join(ln for ln in v.splitlines() if not ln.startswith("--"))
        for k, v in out.items()
        if k.startswith("_")
    }
    return {k: v for k, v in out.items() if not k.startswith("_")}, fragments


@functools.cache
def queries(name: str) -> dict[str, LiteralString]:
    """Named queries of ``sql/queries/<name>.sql`` as ``{query_name: statement}``.

    A statement includes a fragment (``-- _name --``) of its own file as ``{{_name}}`` and
    one of another file as ``{{file._name}}``; a fragment may include others the same way.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file has text before its first header, a name twice, or includes a
            fragment that is not defined.
    """
    statements, _ = _parsed(name)

    def expand(text: str, file: str, depth: int = 0) -> str:
        """``text`` of ``sql/queries/<file>.sql`` with its includes expanded (a fragment may include
        others: of its own file, or named with theirs)."""
        if depth > 8:
            raise ValueError(f"sql/queries/{name}.sql: fragments include each other in a loop")

        def include(match: re.Match[str]) -> str:
            where, fragment = match.group(1) or file, match.group(2)
            fragments = _parsed(where)[1]
            if fragment not in fragments:
                raise ValueError(
                    f"sql/queries/{name}.sql includes undefined fragment "
                    f"{(where + '.') if where != name else ''}{fragment}"
                )
            return expand(fragments[fragment], where, depth + 1)

        return _INCLUDE.sub(include, text)

    # Expanded from reviewed files of the repository, never from input: literal statements.
    return {k: compact(expand(v, name)) for k, v in statements.items()}


def compact(statement: str) -> LiteralString:
    """``statement`` as sent to PostgreSQL: without its comments, indentation, alignment and
    blank lines.

    The comments are for reviewers and stay in the file; sent, they would make most statements
    longer than the 4 096 characters up to which psycopg caches the conversion of a query's
    ``%(name)s`` placeholders (``psycopg._queries.MAX_CACHED_STATEMENT_LENGTH``), so every
    execution would convert it again. A ``--`` inside a string literal is kept: a line's
    trailing comment is cut only where an even number of quotes precede it.

    Raises:
        ValueError: the statement uses dollar quoting or a backslash-escaped quote, whose
            literals this quote count cannot find (the named queries use neither).
    """
    if "$$" in statement or "\\'" in statement:
        raise ValueError("compact() cannot read dollar quoting or backslash-escaped quotes")
    out = []
    for line in statement.splitlines():
        text = line.strip()
        cut = text.find("--")
        while cut >= 0 and text.count("'", 0, cut) % 2:
            cut = text.find("--", cut + 2)
        if cut >= 0:
            text = text[:cut].rstrip()
        # runs of spaces (alignment) become one, outside string literals
        parts = text.split("'")
        text = "'".join(_SPACES.sub(" ", p) if i % 2 == 0 else p for i, p in enumerate(parts))
        if text:
            out.append(text)
    return "\n".join(out)  # the reviewed text, shortened


def migrations() -> list[tuple[int, str, str]]:
    """The numbered migrations ``sql/migrations/NNN_name.sql`` in order, as ``(version, filename, sql)``.

    Raises:
        ValueError: two files share a version number.
    """
    found: dict[int, tuple[int, str, str]] = {}
    for path in sorted((sql_dir() / "migrations").iterdir()):
        match = _MIGRATION.match(path.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise ValueError(f"two migrations numbered {version:03d}: {found[version][1]}, {path.name}")
        found[version] = (version, path.name, path.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]
