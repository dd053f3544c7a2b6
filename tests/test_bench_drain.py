"""``python -m bench.drain`` (the back-to-back worker comparison of bench/HISTORY.md,
section 12) drains real jobs with a real worker process and reports what it measured."""

from __future__ import annotations

import psycopg

from bench.common import ROOT
from bench.drain import drain


def test_the_drain_times_a_real_worker_over_workspaces(database_url: str) -> None:
    out = drain(database_url, 400, 1, True, ROOT, timeout=60.0)
    assert "timed_out" not in out, out
    assert out["completed"] == 400 and out["workspaces"] == 64
    assert out["completed_per_s"] > 0 and out["cpu_ms_per_job"] > 0
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "select count(distinct workspace_id), count(*) filter (where status = 'completed') "
            "from (select * from sync_jobs union all select * from finished_jobs) j"
        ).fetchone()
    assert row == (64, 400)
