"""``sql/schema.sql`` is the schema the migrations produce (``debounce.devtools.schema_dump``): a reader
finds every table, index and function in one file, and the file cannot drift from the
migrations."""

from __future__ import annotations

import difflib

from debounce.devtools.schema_dump import REGENERATE, dump, normalise
from debounce.infra.sql import sql_dir


def test_schema_file_is_what_the_migrations_produce(pg_server_url: str) -> None:
    committed = (sql_dir() / "schema.sql").read_text(encoding="utf-8")
    produced = dump(pg_server_url)
    if produced != committed:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                produced.splitlines(keepends=True),
                "sql/schema.sql (committed)",
                "the migrations (produced)",
                n=1,
            )
        )
        raise AssertionError(
            f"sql/schema.sql is not what the migrations produce; "
            f"regenerate it with `{REGENERATE}`:\n{diff[:4000]}"
        )


def test_normalised_dump_names_no_scratch_schema_owner_or_setting() -> None:
    raw = (
        "--\n-- PostgreSQL database dump\n--\n\n-- Dumped from database version 16.2\n\n"
        "SET statement_timeout = 0;\n"
        "SELECT pg_catalog.set_config('search_path', '', false);\n\n"
        "--\n-- Name: s_1; Type: SCHEMA; Schema: -; Owner: -\n--\n\nCREATE SCHEMA s_1;\n\n"
        "--\n-- Name: t; Type: TABLE; Schema: s_1; Owner: -\n--\n\n"
        "CREATE TABLE s_1.t (\n    id integer\n);\n\n\n"
    )
    text = normalise(raw, "s_1")
    body = text.split("\n\n", 1)[1]
    assert body == "-- Name: t; Type: TABLE\n\nCREATE TABLE t (\n    id integer\n);\n"
    assert REGENERATE in text
