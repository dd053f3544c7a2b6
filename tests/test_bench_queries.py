"""The benchmarks run the project's own named queries: a query that moves between files or
gains a parameter breaks ``python -m bench`` (issue 20, item 15), so check that each statement a
benchmark binds exists and gets every parameter it names. ``.ci/run`` also runs
``python -m bench --quick`` after the tests."""

from __future__ import annotations

import re

from bench import growth, scale
from debounce.infra.sql import queries
from debounce.queue.lifecycle import settle_params


def _parameters(sql: str) -> set[str]:
    return set(re.findall(r"%\((\w+)\)s", sql))


def test_growth_binds_every_parameter_of_the_claim_and_the_enqueue() -> None:
    assert _parameters(growth.Q["claim"]) <= set(growth._claim_params())
    assert _parameters(growth.Q["enqueue"]) <= set(growth._enqueue_params("p"))
    assert _parameters(growth.Q["settle"]) <= set(settle_params([], [], []))


def test_scale_binds_every_parameter_of_the_claims_explain() -> None:
    claim = queries("claim")["claim"]
    assert _parameters(claim) <= set(scale.claim_params(scale.Mode("unmetered", None, None)))
    assert _parameters(queries("claim")["seconds_until_due"]) <= {"source_types"}
