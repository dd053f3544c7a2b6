"""One run of the freshness benchmark in figures: per workspace, per source, and its goals
(``bench.freshness`` collects what the run logged into a :class:`RunLog`).

Staleness, due windows and the budget used while work is due: :mod:`bench.freshness_figures`.
**Requests per synced page**: requests the stand-in answered (429s included), less a
listing's and less the responses kept in the checkpoints of syncs unfinished at the end (paid,
and reused when those syncs resume), ÷ syncs finished.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.freshness_figures import Edit, Write, due_windows, pct, staleness, used_in_windows
from bench.freshness_world import Space, StandinBudget
from standins.budgets import Usage

__all__ = ["IDEAL_REQUESTS", "WINDOWS", "Budget", "RunLog", "space_figures", "summary"]

#: Requests a sync of one page needs at best: Notion ``pages.retrieve`` + ``pages.markdown``;
#: Slack one ``conversations.history`` page.
IDEAL_REQUESTS = {"notion": 2.0, "slack": 1.0}
#: Window lengths (seconds) of the "never more than the budget" check.
WINDOWS = (1.0, 10.0, 30.0)
#: Endpoints of a listing (backfill), not of a page's sync.
LISTING_ENDPOINTS = ("search", "users.conversations", "data_sources.query")


@dataclass(frozen=True)
class Budget:
    """debounce's own budget of a source: ``per_minute`` (0: unmetered) and ``burst``."""

    per_minute: float
    burst: float

    def bound(self, seconds: float) -> float:
        """The most requests a bucket lets through any window of ``seconds``."""
        return self.burst + self.per_minute / 60 * seconds


@dataclass
class RunLog:
    """What one run recorded. Edits, writes and outcomes on the database clock (epoch seconds),
    the stand-ins' request times and ``since``/``end`` on ``time.monotonic()``;
    ``mono_to_epoch`` maps one to the other. ``edits`` include the ``bulk`` ones (pages to
    backfill)."""

    edits: list[Edit]
    writes: list[Write]
    #: ``(page, workspace row id, outcome, epoch)`` of every sync that ended.
    outcomes: list[tuple[str, int | None, str, float]]
    usage: dict[str, Usage]
    since_mono: float
    end_mono: float
    mono_to_epoch: float
    statuses: dict[str, int] = field(default_factory=dict)
    #: Responses held in the checkpoints of jobs not finished at the end, by workspace row id:
    #: requests paid for syncs that will reuse them (not counted against the finished ones).
    unfinished: dict[int, int] = field(default_factory=dict)


def space_figures(
    space: Space, log: RunLog, standin: StandinBudget, budget: Budget, window: tuple[float, float]
) -> dict[str, Any]:
    """The figures of one workspace in one run (``window``: its debounce window and max wait)."""
    pages = set(space.pages)
    end_epoch = log.end_mono + log.mono_to_epoch
    synced = [(p, at) for p, ws, outcome, at in log.outcomes if p in pages and outcome == "synced"]
    edits = [e for e in log.edits if e.page in pages]
    writes = [w for w in log.writes if w.page in pages]
    st = staleness(edits, writes, synced, end_epoch)
    outcomes = Counter(o for p, _, o, _ in log.outcomes if p in pages and o != "synced")
    yields = Counter(p for p, _, o, _ in log.outcomes if p in pages and o == "budget_yield")
    usage = log.usage[space.key]
    listing = sum(n for ep, n in usage.by_endpoint.items() if ep in LISTING_ENDPOINTS)
    sent = usage.requests + usage.rate_limited
    unfinished = log.unfinished.get(space.db_id or -1, 0)
    windows = due_windows(edits, writes, synced, *window, end_epoch)
    used = used_in_windows(
        windows,
        [t + log.mono_to_epoch for t in usage.accepted_at],
        standin.per_second,
        standin.burst,
        log.since_mono + log.mono_to_epoch,
    )
    minutes = (log.end_mono - log.since_mono) / 60
    ideal = IDEAL_REQUESTS[space.source]
    return {
        "source": space.source,
        "edits": sum(1 for e in edits if not e.bulk),
        "syncs": len(synced),
        "staleness_s": pct(st.last_edit),
        "edit_wait_s": pct(st.per_edit),
        "unsynced_edits": st.unsynced,
        "unsynced_oldest_s": st.unsynced_oldest_s,
        "requests": usage.requests,
        "rate_limited": usage.rate_limited,
        "first_429_s": (
            round(usage.rate_limited_at[0] - log.since_mono, 1) if usage.rate_limited_at else None
        ),
        "by_endpoint": dict(sorted(usage.by_endpoint.items())),
        "requests_per_sync": round((sent - listing - unfinished) / len(synced), 2) if synced else None,
        "listing_requests": listing,
        "requests_in_unfinished_syncs": unfinished,
        "other_outcomes": dict(outcomes),
        "most_yields_of_one_page": max(yields.values(), default=0),
        **used,
        "syncs_per_min": round(len(synced) / minutes, 1),
        "budget_allows_syncs_per_min": round(standin.per_second * 60 / ideal, 1),
        "max_in_window": {f"{w:g}s": usage.max_in_window(w) for w in WINDOWS},
        "budget_bound": {f"{w:g}s": round(budget.bound(w), 1) for w in WINDOWS}
        if budget.per_minute
        else None,
    }


def _pool(figs: Sequence[dict[str, Any]], log: RunLog, spaces: Sequence[Space]) -> dict[str, Any]:
    pages = {p for s in spaces for p in s.pages}
    end_epoch = log.end_mono + log.mono_to_epoch
    synced = [(p, at) for p, _, o, at in log.outcomes if p in pages and o == "synced"]
    st = staleness(
        [e for e in log.edits if e.page in pages],
        [w for w in log.writes if w.page in pages],
        synced,
        end_epoch,
    )
    syncs = sum(f["syncs"] for f in figs)
    sent = sum(
        f["requests"] + f["rate_limited"] - f["listing_requests"] - f["requests_in_unfinished_syncs"]
        for f in figs
    )
    endpoints: Counter[str] = Counter()
    for f in figs:
        endpoints.update(f["by_endpoint"])
    return {
        "staleness_s": pct(st.last_edit),
        "edit_wait_s": pct(st.per_edit),
        "unsynced_edits": st.unsynced,
        "syncs": syncs,
        "requests": sum(f["requests"] for f in figs),
        "requests_per_synced_page": round(sent / syncs, 2) if syncs else None,
        "rate_limited": sum(f["rate_limited"] for f in figs),
        "by_endpoint": dict(sorted(endpoints.items())),
    }


def summary(
    spaces: Sequence[Space],
    log: RunLog,
    standins: dict[str, StandinBudget],
    budgets: dict[str, Budget],
    windows: dict[str, tuple[float, float]],
) -> dict[str, Any]:
    """Per workspace (those edited or synced in the run) and per source."""
    per_space: dict[str, dict[str, Any]] = {}
    for space in spaces:
        figs = space_figures(space, log, standins[space.source], budgets[space.source], windows[space.source])
        if figs["edits"] or figs["syncs"] or figs["requests"] or figs["rate_limited"]:
            per_space[space.key] = figs
    by_source: dict[str, list[Space]] = defaultdict(list)
    for space in spaces:
        if space.key in per_space:
            by_source[space.source].append(space)
    sources = {src: _pool([per_space[s.key] for s in ss], log, ss) for src, ss in sorted(by_source.items())}
    return {"sources": sources, "workspaces": per_space}


def goals(
    figures: dict[str, Any],
    saturated: Sequence[str],
    live: Sequence[str],
    budgets: dict[str, Budget],
    windows: dict[str, float],
    one_worker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The goals that apply to a run (``goal_*`` booleans) and the figures they read.

    - ``goal_zero_429_after_first``: no workspace got more than one 429;
    - ``goal_budget_used_ge_90pct``: each ``saturated`` workspace (more edits than its budget
      syncs, by design) used ≥ 90 % of what the stand-in's bucket allowed while work was due;
    - ``goal_le_2_requests_per_notion_page``: Notion requests (listings aside) ÷ Notion syncs;
    - ``goal_4_workers_within_1_worker_budget`` (4 workers): in both runs, every workspace's
      most requests in any window of 1/10/30 s ≤ debounce's ``burst + rate × window``;
    - ``goal_live_p99_within_window_plus_10s`` (with ``live`` workspaces: flood, backfill):
      each one's p99 staleness ≤ its debounce window + 10 s, nothing left unsynced.
    """
    ws = figures["workspaces"]
    out: dict[str, Any] = {}
    out["goal_zero_429_after_first"] = all(w["rate_limited"] <= 1 for w in ws.values())
    used = {k: ws[k]["budget_used_while_due"] for k in saturated if k in ws}
    out["budget_used_while_due"] = used
    out["goal_budget_used_ge_90pct"] = bool(used) and all(u is not None and u >= 0.9 for u in used.values())
    notion = figures["sources"].get("notion", {}).get("requests_per_synced_page")
    out["goal_le_2_requests_per_notion_page"] = notion is not None and notion <= 2.0
    if one_worker is not None:

        def within(run: dict[str, Any]) -> bool:
            return all(
                w["max_in_window"][k] <= budgets[w["source"]].bound(float(k[:-1]))
                for w in run["workspaces"].values()
                for k in w["max_in_window"]
            )

        out["goal_4_workers_within_1_worker_budget"] = within(one_worker) and within(figures)
    if live:
        measured = {k: ws[k] for k in live if k in ws}
        out["live_p99_s"] = {k: w["staleness_s"].get("p99") for k, w in measured.items()}
        out["goal_live_p99_within_window_plus_10s"] = len(measured) == len(live) and all(
            w["unsynced_edits"] == 0 and w["staleness_s"].get("p99", 1e9) <= windows[w["source"]] + 10
            for w in measured.values()
        )
    return out
