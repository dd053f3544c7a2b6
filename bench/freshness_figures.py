"""The figures of the freshness benchmark, from what it logged (pure functions, no I/O).

- **Staleness** (database clock, seconds). Each sync of a page writes documents carrying the
  highest revision it saw; a sync that raises the page's covered revision from ``c`` to ``R``
  gives one sample: the time its last document was written minus the acceptance time of the
  newest edit in ``(c, R]`` whose webhook was accepted before that write (the *last accepted
  edit* it reflects). ``per_edit`` is the wait of every edit until the first write covering it
  (an edit whose content a sync fetched before its webhook was accepted waits 0). Edits never
  covered are ``unsynced``.
- **Due windows**: the stretches in which a workspace had work due, as its users see it: a
  page is due from the end of its debounce window (its last uncovered edit + the window, or
  its first uncovered edit + the max wait) until a sync writes its newest edit; a page to
  backfill (a ``bulk`` edit: no window) from the backfill's request until its first document.
  Read from the benchmark's own edits and writes, not from ``sync_jobs``: a job that yielded
  on an empty budget is pending with a due time in the future, yet its work is due.
- **Budget used while work is due**: requests the stand-in accepted inside the due windows ÷
  what its bucket allowed there (``rate × length`` plus what the bucket could have refilled
  before the window, at most ``burst``).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import percentiles

__all__ = ["Edit", "Staleness", "Write", "due_windows", "merge", "pct", "staleness", "used_in_windows"]


@dataclass(frozen=True)
class Edit:
    """An edit whose webhook was accepted: ``page``, ``rev``, ``at`` (epoch s, database clock);
    ``bulk``: not an edit but a page to backfill (due at once, no staleness sample)."""

    page: str
    rev: int
    at: float
    bulk: bool = False


@dataclass(frozen=True)
class Write:
    """A document written: its ``page``, the highest ``rev`` in its content, ``at``."""

    page: str
    rev: int
    at: float


@dataclass
class Staleness:
    last_edit: list[float]
    per_edit: list[float]
    unsynced: int
    unsynced_oldest_s: float | None


def _syncs(writes: Sequence[Write], done: Sequence[float]) -> list[tuple[float, int]]:
    """The writes of one page grouped by the sync that made them (the first completion at or
    after each write; writes after the last completion form one more group): ``(time of the
    group's last write, highest revision)``, in time order."""
    groups: dict[int, tuple[float, int]] = {}
    for w in writes:
        k = bisect.bisect_left(done, w.at)
        at, rev = groups.get(k, (w.at, w.rev))
        groups[k] = (max(at, w.at), max(rev, w.rev))
    return [groups[k] for k in sorted(groups)]


def staleness(
    edits: Iterable[Edit], writes: Iterable[Write], completions: Iterable[tuple[str, float]], end: float
) -> Staleness:
    """See the module docstring. ``completions``: ``(page, time)`` of every finished sync;
    ``end``: when the run stopped looking (ages of unsynced edits)."""
    by_page: dict[str, list[Edit]] = defaultdict(list)
    for e in edits:
        if not e.bulk:
            by_page[e.page].append(e)
    page_writes: dict[str, list[Write]] = defaultdict(list)
    for w in writes:
        page_writes[w.page].append(w)
    done: dict[str, list[float]] = defaultdict(list)
    for page, at in completions:
        done[page].append(at)
    last: list[float] = []
    waits: list[float] = []
    unsynced: list[float] = []
    for page, page_edits in by_page.items():
        page_edits.sort(key=lambda e: e.rev)
        ws = sorted(page_writes.get(page, []), key=lambda w: w.at)
        covered = min(e.rev for e in page_edits) - 1
        i = 0
        for at, rev in _syncs(ws, sorted(done.get(page, []))):
            if rev <= covered:
                continue
            newest: Edit | None = None
            while i < len(page_edits) and page_edits[i].rev <= rev:
                e = page_edits[i]
                waits.append(max(0.0, at - e.at))
                if e.at <= at:
                    newest = e
                i += 1
            if newest is not None:
                last.append(at - newest.at)
            covered = rev
        unsynced += [end - e.at for e in page_edits[i:]]
    return Staleness(last, waits, len(unsynced), round(max(unsynced), 2) if unsynced else None)


def pct(values: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p99", "max", "n"}`` of ``values`` (seconds, 2 decimals); ``{"n": 0}`` if none."""
    if not values:
        return {"n": 0}
    p = percentiles(values, (50, 99))
    return {"p50": round(p["p50"], 2), "p99": round(p["p99"], 2), "max": round(p["max"], 2), "n": len(values)}


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals``, as disjoint sorted intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _page_due(
    edits: list[Edit], syncs: list[tuple[float, int]], window: float, max_wait: float, end: float
) -> list[tuple[float, float]]:
    """When one page had work due (module docstring); ``edits`` sorted by time."""
    # Each edit is pending from its acceptance until the first sync that reflects it (at once
    # if a sync had fetched it before its webhook was accepted).
    pending = [(e.at, next((max(at, e.at) for at, rev in syncs if rev >= e.rev), end)) for e in edits]
    out: list[tuple[float, float]] = []
    for start, stop in merge(pending):
        inside = [e for e in edits if start <= e.at < stop]
        out.append((start + max_wait, stop))
        for i, e in enumerate(inside):
            nxt = inside[i + 1].at if i + 1 < len(inside) else stop
            out.append((e.at + (0.0 if e.bulk else window), nxt))
    return merge((a, min(b, end)) for a, b in out)


def due_windows(
    edits: Iterable[Edit],
    writes: Iterable[Write],
    completions: Iterable[tuple[str, float]],
    window: float,
    max_wait: float,
    end: float,
) -> list[tuple[float, float]]:
    """The windows in which any of the pages of ``edits`` had work due (module docstring)."""
    by_page: dict[str, list[Edit]] = defaultdict(list)
    for e in edits:
        by_page[e.page].append(e)
    page_writes: dict[str, list[Write]] = defaultdict(list)
    for w in writes:
        page_writes[w.page].append(w)
    done: dict[str, list[float]] = defaultdict(list)
    for page, at in completions:
        done[page].append(at)
    out: list[tuple[float, float]] = []
    for page, page_edits in by_page.items():
        page_edits.sort(key=lambda e: e.at)
        syncs = _syncs(sorted(page_writes.get(page, []), key=lambda w: w.at), sorted(done.get(page, [])))
        out += _page_due(page_edits, syncs, window, max_wait, end)
    return merge(out)


def used_in_windows(
    windows: Sequence[tuple[float, float]],
    accepted_at: Sequence[float],
    rate: float,
    burst: float,
    since: float,
) -> dict[str, Any]:
    """Requests accepted inside ``windows`` against what a bucket of ``rate``/s and ``burst``
    (full at ``since``) allowed there (module docstring)."""
    times = sorted(accepted_at)
    used = 0
    allowed = 0.0
    seconds = 0.0
    previous_end = since
    for i, (a, b) in enumerate(windows):
        used += bisect.bisect_right(times, b) - bisect.bisect_left(times, a)
        refill = burst if i == 0 else min(burst, rate * (a - previous_end))
        allowed += rate * (b - a) + refill
        seconds += b - a
        previous_end = b
    return {
        "due_seconds": round(seconds, 1),
        "requests_while_due": used,
        "allowed_while_due": round(allowed, 1),
        "budget_used_while_due": round(used / allowed, 3) if allowed else None,
    }
