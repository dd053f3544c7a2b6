"""What isolating a file's extraction costs (issue 39): PDFs of 1, 10 and 100 pages read by
the bare library (pypdfium2 in this process) and by debounce's extraction (a child forked from
the fork server, its limits set, the file read there, the Markdown sent back), in one run.

PDFs are written by :func:`standins.sample_files.text_pdf` (40 lines of text a page, about
2 400 characters). Each size is read ``repeats`` times by each way, alternating; the figures
are medians. One JSON line per size (``bench: "files"``): pages/s and MB/s of each way, the
overhead ``isolated ÷ bare - 1``, the child's peak resident memory (MB), and one summary line
(``bench: "files_goals"``) with ``goal_*`` booleans: the isolation costs at most 20 % on
100-page PDFs, a 1-page PDF's whole file job p50 <= 150 ms, and files cost other workspaces'
live edits nothing beyond their share of the slots (:mod:`bench.files_jobs`: one
``files_job`` line, two ``files_freshness`` lines, on a scratch database).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time

import pypdfium2 as pdfium

from bench.common import emit, note, percentiles, scratch_database
from bench.files_jobs import LOAD_PAGES, freshness_under_files, whole_file_jobs
from debounce.worker.extraction import ExtractionLimits, extract_file
from standins.file_host import FileHost
from standins.sample_files import text_pdf
from standins.server import BackgroundServer

PDF = "application/pdf"
SIZES = (1, 10, 100)


def _bare(path: str) -> int:
    """The bare library: every page's text by pypdfium2 in this process; returns characters."""
    doc = pdfium.PdfDocument(path)
    chars = 0
    try:
        for index in range(len(doc)):
            page = doc[index]
            textpage = page.get_textpage()
            chars += len(textpage.get_text_bounded())
            textpage.close()
            page.close()
    finally:
        doc.close()
    return chars


def _pdf(pages: int) -> bytes:
    return text_pdf(
        [
            [f"Page {p} line {n}: the quick brown fox jumps over the lazy dog 0123456789" for n in range(40)]
            for p in range(1, pages + 1)
        ]
    )


def run(database_url: str, quick: bool) -> None:
    """Run the benchmark (see the module docstring); ``quick`` reads each size fewer times."""
    goals = _isolation(quick)
    host = FileHost()
    with BackgroundServer(host.app()) as server, scratch_database(database_url, "files") as url:
        host.base_url = server.url
        jobs = asyncio.run(whole_file_jobs(url, host, _pdf(1), 15 if quick else 50))
        job_p50 = statistics.median(jobs)
        emit(
            "files_job",
            pages=1,
            repeats=len(jobs),
            p50_ms=round(job_p50 * 1000, 1),
            p95_ms=round(percentiles(jobs, (95,))["p95"] * 1000, 1),
        )
        # Eight slots, four a workspace's share (the fair claim): the goal. Four slots, all of
        # them one workspace's share: what files cost when the share is every slot.
        fairness = False
        for slots in (8, 4):
            fresh = asyncio.run(freshness_under_files(url, host, _pdf(LOAD_PAGES), slots, f"s{slots}"))
            met = fresh.pop("goal")
            fairness = met if slots == 8 else fairness
            emit("files_freshness", pdfs=20, pdf_pages=LOAD_PAGES, within_share=met, **fresh)
    emit(
        "files_goals",
        overhead_100_pages=round(goals["overhead_100"], 3),
        one_page_extraction_p50_ms=round(goals["one_page_p50_ms"], 1),
        one_page_file_job_p50_ms=round(job_p50 * 1000, 1),
        goal_isolation_overhead_100_pages_le_20pct=goals["overhead_100"] <= 0.20,
        goal_one_page_file_job_p50_le_150ms=job_p50 * 1000 <= 150,
        goal_files_cost_others_no_more_than_their_slots=fairness,
    )


def _isolation(quick: bool) -> dict[str, float]:
    """PDFs of :data:`SIZES` pages read by the bare library and by the isolated extraction;
    emits one line per size; returns ``overhead_100`` and ``one_page_p50_ms``."""
    limits = ExtractionLimits()
    repeats = {1: 15 if quick else 60, 10: 7 if quick else 25, 100: 5 if quick else 15}
    goals: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        warm = os.path.join(tmp, "warm.pdf")
        with open(warm, "wb") as f:
            f.write(_pdf(1))
        t0 = time.monotonic()
        extract_file(warm, PDF, limits)  # starts the fork server (imports the readers once)
        note(f"files: fork server up in {time.monotonic() - t0:.1f} s")
        for pages in SIZES:
            path = os.path.join(tmp, f"{pages}.pdf")
            data = _pdf(pages)
            with open(path, "wb") as f:
                f.write(data)
            bare: list[float] = []
            isolated: list[float] = []
            peak = 0
            for _ in range(repeats[pages]):
                t = time.perf_counter()
                _bare(path)
                bare.append(time.perf_counter() - t)
                t = time.perf_counter()
                result = extract_file(path, PDF, limits)
                isolated.append(time.perf_counter() - t)
                assert result.pages == pages
                peak = max(peak, result.child_peak_bytes)
            bare_s, isolated_s = statistics.median(bare), statistics.median(isolated)
            mb = len(data) / 1e6
            overhead = isolated_s / bare_s - 1
            goals[f"overhead_{pages}"] = overhead
            if pages == 1:
                goals["one_page_p50_ms"] = isolated_s * 1000
            emit(
                "files",
                pages=pages,
                bytes=len(data),
                repeats=repeats[pages],
                bare_ms=round(bare_s * 1000, 2),
                isolated_ms=round(isolated_s * 1000, 2),
                bare_pages_per_s=round(pages / bare_s, 1),
                isolated_pages_per_s=round(pages / isolated_s, 1),
                bare_mb_per_s=round(mb / bare_s, 2),
                isolated_mb_per_s=round(mb / isolated_s, 2),
                overhead=round(overhead, 3),
                child_peak_mb=round(peak / 1e6, 1),
            )
    return goals
