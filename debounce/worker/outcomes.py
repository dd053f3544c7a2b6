"""The words of the worker's log lines for a claim and a sync (:func:`claimed_text`,
:func:`written_text`, :func:`budget_yield_text`). Recording the outcomes themselves is :mod:`.completions`."""

from __future__ import annotations

from debounce.types import SyncJob

__all__ = ["budget_yield_text", "claimed_text", "written_text"]


def written_text(wrote: list[tuple[str, str, str]]) -> str:
    """The documents a sync wrote, for its log line: ``: 'Title' (notion/<id>)``, the first
    two and how many more."""
    if not wrote:
        return ""
    shown = ", ".join(f"{title!r} ({source}/{document_id})" for source, document_id, title in wrote[:2])
    return f": {shown}" + (f" and {len(wrote) - 2} more" if len(wrote) > 2 else "")


def claimed_text(job: SyncJob) -> str:
    """A claimed job for the claim's log line: its id, page, and why it was due (its events'
    debounce window ended; a bulk job of a backfill or a re-check has no events)."""
    why = (
        f"{job.event_count} event{'s' * (job.event_count != 1)}, its window ended"
        if job.event_count
        else "bulk"
        if job.priority < 0
        else "due"
    )
    if job.attempts > 1:
        why += f", attempt {job.attempts}"
    return f"job {job.id} ({job.source_type} {job.source_page_id}: {why})"


def budget_yield_text(job: SyncJob, retry_after: float, fetched: int) -> str:
    """A sync that yielded to its workspace's spent budget, in one line: whose budget, the job,
    when a request is due (``retry_after`` seconds) and the ``fetched`` responses it keeps."""
    whose = (
        f"workspace {job.workspace_id}'s"
        if job.workspace_id is not None
        else f"the {job.source_type} source's"
    )
    kept = (
        f" (it keeps the {fetched} response{'s' if fetched != 1 else ''} fetched so far)" if fetched else ""
    )
    return f"{whose} API budget is spent: job {job.id} waits for a request, due in {retry_after:.1f} s{kept}"
