"""The named queries as sent (debounce.infra.sql.compact): comments, indentation and alignment go,
string literals stay whole, and every statement fits psycopg's cache of converted queries."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from debounce.infra.sql import compact, queries, sql_dir

#: psycopg converts a query's placeholders once and caches the result only for queries up to
#: this many characters (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH).
PSYCOPG_CACHED_LENGTH = 4096


def test_comments_indentation_and_alignment_go_and_literals_stay() -> None:
    text = (
        "-- what it does\n"
        "with x as (\n"
        "    select 'a -- b' as s,      -- trailing note\n"
        "           'it''s  --  two' as t   -- another\n"
        ")\n"
        "\n"
        "select x.s,   x.t from x -- done"
    )
    assert compact(text) == (
        "with x as (\nselect 'a -- b' as s,\n'it''s  --  two' as t\n)\nselect x.s, x.t from x"
    )
    for unreadable in ("select $$ -- $$", "select E'it\\'s -- x'"):
        with pytest.raises(ValueError):
            compact(unreadable)


async def test_a_compacted_statement_means_what_the_file_says(conn: psycopg.AsyncConnection[Any]) -> None:
    sql = "select 'a -- b' as s,   -- note\n       'c  d' as t -- end"
    cur = await conn.execute(compact(sql))
    assert await cur.fetchone() == ("a -- b", "c  d")


def test_the_hot_statements_fit_psycopgs_query_cache() -> None:
    """The worker's and the budget's statements, once compacted, are converted once per
    process instead of at every execution (the web's two enqueue statements are longer still
    and batched, so each webhook carries a fraction of one conversion)."""
    claim, queue, budgets = queries("claim"), queries("queue"), queries("budgets")
    hot = {
        "claim": claim["claim"],
        "seconds_until_due": claim["seconds_until_due"],
        "settle": queue["settle"],
        "take_budget": budgets["take_budget"],
        "upsert_document": queries("documents")["upsert_document"],
    }
    long = {k: len(v) for k, v in hot.items() if len(v) > PSYCOPG_CACHED_LENGTH}
    assert not long, long
    raw = (sql_dir() / "queries" / "queue.sql").read_text(encoding="utf-8")
    assert len(queue["settle"]) < raw.index("-- release --") - raw.index("-- settle --")
    assert "--" not in claim["claim"]
