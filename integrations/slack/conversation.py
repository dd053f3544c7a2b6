"""One sync of one Slack conversation into one document per thread.

The job key is a conversation. The sync reads ``conversations.history``
(https://docs.slack.dev/reference/methods/conversations.history) from the conversation's
stored watermark minus a look-back window, newest first, following
``response_metadata.next_cursor``; threads whose ``reply_count``/``latest_reply`` (or root
text) changed are read with ``conversations.replies``
(https://docs.slack.dev/reference/methods/conversations.replies). One document per thread,
``document_id = "<channel>/<thread_ts>"`` (a message without replies is a thread of one).
The job's latest event payload is used as a hint for what the window cannot see: an edited
or deleted reply, a reply to an old thread, a deleted root. The per-conversation state
(``sync_state``) holds the watermark, an in-progress scan and a fingerprint per recent thread;
it is written only after the documents it describes. The state also keeps the files each
thread document shows (:mod:`integrations.slack.files`), so every sync reports the
conversation's complete set in :attr:`SyncResult.files` (the service makes each a file document
and tombstones the ones no thread shows any more). See ``docs/slack.md`` for the choices.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from debounce.contract import (
    Audience,
    DocumentWriter,
    FileRef,
    PermanentError,
    SyncJob,
    SyncResult,
    WriteOutcome,
)
from integrations.slack.audience import AudienceKeeper
from integrations.slack.client import SlackCall, _ChannelGone
from integrations.slack.files import files_shown, thread_files
from integrations.slack.render import (
    NO_CONTENT_SUBTYPES,
    SOURCE_TYPE,
    _fingerprint,
    _is_root,
    _max_ts,
    _str,
    _ts_key,
    _ts_minus,
    has_content,
    render_thread,
)
from integrations.slack.settings import SlackSettings
from integrations.slack.webhook import own_ids

__all__ = ["SKIPPED_SUBTYPES", "ConversationSync"]

#: One logger for the whole source, named as before the split into modules.
log = logging.getLogger("integrations.slack")

#: Message subtypes that are system notices, not content: never a document or a line.
SKIPPED_SUBTYPES = NO_CONTENT_SUBTYPES

_STATE_VERSION = 1


class ConversationSync:
    """One sync of one conversation (state and counters of a single run): :meth:`run` reads
    what changed since the conversation's watermark and writes its thread documents (module
    docstring). ``audiences`` gives the conversation's audience; ``lookback_seconds`` how far
    below the watermark history is re-read; ``page_limit`` messages per history/replies call."""

    def __init__(
        self,
        store: DocumentWriter,
        call: SlackCall,
        job: SyncJob,
        *,
        settings: SlackSettings,
        audiences: AudienceKeeper,
        lookback_seconds: float,
        page_limit: int,
    ) -> None:
        self.audiences = audiences
        self.lookback_seconds = lookback_seconds
        self.page_limit = page_limit
        self.store = store
        self.call = call
        self.job = job
        self.channel = job.source_page_id
        self.own_ids = own_ids(settings, job.payload if isinstance(job.payload, dict) else None)
        self.state: dict[str, Any] = {}
        #: The conversation's audience, set on every document this run writes.
        self.audience: Audience | None = None
        self.written = 0
        self.unchanged = 0
        self.deleted = 0
        #: Threads written from ``conversations.replies`` (or marked deleted) in this run.
        self.refreshed: set[str] = set()
        #: Root messages ``conversations.history`` returned in this run.
        self.seen_roots: set[str] = set()

    # -- state ---------------------------------------------------------------------------

    @property
    def threads(self) -> dict[str, dict[str, Any]]:
        threads: dict[str, dict[str, Any]] = self.state["threads"]
        return threads

    async def _load(self) -> None:
        raw = await self.store.get_state(SOURCE_TYPE, self.channel)
        if raw.get("v") != _STATE_VERSION:
            raw = {}
        self.state = {
            "v": _STATE_VERSION,
            "watermark": _str(raw.get("watermark")),
            "scan": raw.get("scan") if isinstance(raw.get("scan"), dict) else None,
            "threads": raw.get("threads") if isinstance(raw.get("threads"), dict) else {},
            "last_hint": _str(raw.get("last_hint")),
            "files": raw.get("files") if isinstance(raw.get("files"), dict) else {},
        }

    async def _save(self) -> None:
        await self.store.set_state(SOURCE_TYPE, self.channel, self.state)

    # -- run -----------------------------------------------------------------------------

    async def run(self) -> SyncResult:
        await self._load()
        try:
            self.audience = await self.audiences.for_sync(self.call, self.channel)
            if self.state["scan"] is not None:
                await self._scan(resume=True)
            await self._scan(resume=False)
            await self._apply_hint()
            await self._save()
        except _ChannelGone as gone:
            marked = await self.store.mark_page_deleted(
                SOURCE_TYPE, self.channel, why=f"answered channel_not_found ({gone.method})"
            )
            await self.store.set_state(SOURCE_TYPE, self.channel, {})
            raise PermanentError(
                f"Slack {gone.method}: channel_not_found for {self.channel} (deleted, or the app "
                f"cannot see it); {len(marked)} document(s) marked deleted"
            ) from None
        except Exception:
            # Keep what was written (thread fingerprints are recorded only after their
            # documents, the scan position only after whole pages): a retry resumes there.
            try:
                await self._save()
            except Exception:  # pragma: no cover - the original error matters more
                log.warning("could not save Slack sync state of %s", self.channel, exc_info=True)
            raise
        return SyncResult(
            written=self.written,
            unchanged=self.unchanged,
            deleted=self.deleted,
            files=self._shown_files(),
        )

    # -- files -----------------------------------------------------------------------------

    def _shown_files(self) -> tuple[FileRef, ...]:
        """Every file the conversation's thread documents show (:func:`files_shown`)."""
        return files_shown(self.state["files"])

    # -- Web API -------------------------------------------------------------------------

    async def _call(self, method: str, **params: Any) -> dict[str, Any] | None:
        """One Web API call (:func:`~integrations.slack.client.call_api`); ``None`` when the
        thread asked for is gone."""
        return await self.call.call(method, **params)

    async def _replies(self, thread_ts: str) -> list[dict[str, Any]] | None:
        """The whole thread (parent first), or ``None`` when Slack no longer has it."""
        found: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        while True:
            data = await self._call(
                "conversations.replies",
                channel=self.channel,
                ts=thread_ts,
                limit=self.page_limit,
                cursor=cursor,
            )
            if data is None:
                return None
            for m in data.get("messages") or []:
                if isinstance(m, dict) and isinstance(m.get("ts"), str):
                    found[m["ts"]] = m
            cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            if not (data.get("has_more") and cursor):
                break
        return sorted(found.values(), key=lambda m: _ts_key(m["ts"]))

    # -- writing -------------------------------------------------------------------------

    def _is_own(self, msg: Mapping[str, Any]) -> bool:
        return any(_str(msg.get(k)) in self.own_ids for k in ("user", "bot_id"))

    def _skipped(self, msg: Mapping[str, Any]) -> bool:
        return msg.get("subtype") in SKIPPED_SUBTYPES or self._is_own(msg)

    async def _write(self, messages: Sequence[Mapping[str, Any]]) -> None:
        doc = dataclasses.replace(render_thread(self.channel, messages), audience=self.audience)
        files = await thread_files(self.call, doc.document_id, messages, self.job.log_fields())
        outcome = await self.store.upsert(doc)
        thread_ts = str(doc.metadata["thread_ts"])
        if files:
            self.state["files"][thread_ts] = [dataclasses.asdict(ref) for ref in files]
        else:
            self.state["files"].pop(thread_ts, None)
        if outcome is WriteOutcome.UNCHANGED:
            self.unchanged += 1
        else:
            self.written += 1

    async def _mark_deleted(self, thread_ts: str) -> None:
        marked = await self.store.mark_deleted(
            SOURCE_TYPE, [f"{self.channel}/{thread_ts}"], why="were deleted in Slack"
        )
        self.deleted += len(marked)
        self.threads.pop(thread_ts, None)
        self.state["files"].pop(thread_ts, None)
        self.refreshed.add(thread_ts)

    async def _refresh_thread(self, thread_ts: str) -> None:
        """Read a thread with ``conversations.replies`` and write (or delete) its document.

        A deleted parent (a ``tombstone``, or missing while replies remain) keeps the thread's
        live replies under a ``_(message deleted)_`` line; with none left it is deleted."""
        if thread_ts in self.refreshed:
            return
        thread = await self._replies(thread_ts)
        if not thread:
            await self._mark_deleted(thread_ts)
            return
        root = thread[0]
        replies = thread[1:]
        if root.get("ts") != thread_ts:  # the parent is gone, its replies are not
            root, replies = {"type": "message", "subtype": "tombstone", "ts": thread_ts}, thread
        if self._skipped(root):
            self.refreshed.add(thread_ts)
            return
        live = [m for m in replies if not self._skipped(m) and has_content(m)]
        if not live and not has_content(root):
            await self._mark_deleted(thread_ts)
            return
        self.refreshed.add(thread_ts)
        await self._write([root, *live])

    # -- history scan --------------------------------------------------------------------

    async def _scan(self, *, resume: bool) -> None:
        """Read history from the watermark minus the look-back (or resume a saved scan),
        newest first, writing each page's threads before recording progress."""
        lookback = self.lookback_seconds
        if resume:
            scan = dict(self.state["scan"] or {})
            oldest, latest, top = _str(scan.get("oldest")), _str(scan.get("latest")), _str(scan.get("top"))
        else:
            wm = self.state["watermark"]
            oldest = _ts_minus(wm, lookback) if wm else None
            latest, top = None, wm
        upper = latest  # exclusive upper bound of what the next page covers (None: now)
        cursor: str | None = None
        while True:
            data = await self._call(
                "conversations.history",
                channel=self.channel,
                limit=self.page_limit,
                oldest=oldest,
                latest=latest,
                cursor=cursor,
            )
            assert data is not None
            messages = [
                m for m in data.get("messages") or [] if isinstance(m, dict) and isinstance(m.get("ts"), str)
            ]
            next_cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            more = bool(data.get("has_more")) and next_cursor is not None and bool(messages)
            top = _max_ts([top, *(m["ts"] for m in messages)])
            horizon = _ts_minus(top, lookback) if top else None
            await self._process_page(messages, horizon)
            page_min = min((m["ts"] for m in messages), key=_ts_key) if messages else None
            lower = page_min if more else oldest
            await self._detect_vanished({m["ts"] for m in messages}, lower, lower_inclusive=more, upper=upper)
            if more:
                self.state["scan"] = {"oldest": oldest, "latest": page_min, "top": top}
                await self._save()
                upper, cursor = page_min, next_cursor
                continue
            if top is not None:
                self.state["watermark"] = _max_ts([self.state["watermark"], top])
            self.state["scan"] = None
            self._prune()
            await self._save()
            return

    async def _process_page(self, messages: list[dict[str, Any]], horizon: str | None) -> None:
        roots = [m for m in messages if _is_root(m)]
        broadcasts = [m for m in messages if not _is_root(m)]
        for m in roots:
            await self._root(m, horizon)
        for m in broadcasts:
            await self._broadcast(m, horizon)

    def _track(self, ts: str, entry: dict[str, Any], horizon: str | None) -> None:
        # Only threads the next scan will re-read need a fingerprint; older ones are
        # re-rendered (an unchanged upsert) if a scan over them is ever resumed.
        if horizon is None or _ts_key(ts) > _ts_key(horizon):
            self.threads[ts] = entry
        else:
            self.threads.pop(ts, None)

    async def _root(self, msg: dict[str, Any], horizon: str | None) -> None:
        ts = msg["ts"]
        self.seen_roots.add(ts)
        reply_count = msg.get("reply_count")
        threaded = (isinstance(reply_count, int) and reply_count > 0) or (
            msg.get("subtype") == "tombstone"  # a deleted parent whose replies remain
        )
        if self._skipped(msg) or not (threaded or has_content(msg)):
            if ts in self.threads:
                await self._mark_deleted(ts)
            return
        fp = _fingerprint(msg)
        entry_new: dict[str, Any] = {"fp": fp, "r": 1} if threaded else {"fp": fp}
        if ts in self.refreshed:
            self._track(ts, entry_new, horizon)
            return
        entry = self.threads.get(ts)
        if entry is not None and entry.get("fp") == fp:
            self.unchanged += 1
            return
        if threaded:
            await self._refresh_thread(ts)
        else:
            await self._write([msg])
            self.refreshed.add(ts)
        self._track(ts, entry_new, horizon)

    async def _broadcast(self, msg: dict[str, Any], horizon: str | None) -> None:
        """A reply also sent to the channel: it changes its thread, not a document of its own."""
        ts, thread_ts = msg["ts"], str(msg["thread_ts"])
        fp = _fingerprint(msg)
        entry = self.threads.get(ts)
        if entry is None or entry.get("fp") != fp:
            if thread_ts not in self.seen_roots:
                await self._refresh_thread(thread_ts)
        self._track(ts, {"fp": fp, "of": thread_ts}, horizon)

    async def _detect_vanished(
        self,
        present: set[str],
        lower: str | None,
        *,
        lower_inclusive: bool,
        upper: str | None,
    ) -> None:
        """Tracked messages inside the range a page covered that it did not return were
        deleted: a root's document is marked deleted (a root that had replies is re-read
        instead: they may remain), a broadcast reply's thread re-read."""
        lo = _ts_key(lower) if lower else None
        hi = _ts_key(upper) if upper else None
        for ts in list(self.threads):
            if ts in present:
                continue
            k = _ts_key(ts)
            if lo is not None and (k < lo or (k == lo and not lower_inclusive)):
                continue
            if hi is not None and k >= hi:
                continue
            entry = self.threads.get(ts) or {}
            of = _str(entry.get("of"))
            if of:
                self.threads.pop(ts, None)
                if of not in self.seen_roots:
                    await self._refresh_thread(of)
            elif entry.get("r"):
                await self._refresh_thread(ts)
            else:
                await self._mark_deleted(ts)

    def _prune(self) -> None:
        wm = self.state["watermark"]
        if not wm:
            return
        horizon = _ts_key(_ts_minus(wm, self.lookback_seconds))
        for ts in [t for t in self.threads if _ts_key(t) <= horizon]:
            del self.threads[ts]

    # -- the job's event as a hint ---------------------------------------------------------

    async def _apply_hint(self) -> None:
        """Use the job's latest event for what the look-back window cannot show: a reply
        edited or deleted, a reply to a thread older than the window, a deleted root."""
        payload = self.job.payload if isinstance(self.job.payload, dict) else {}
        event = payload.get("event")
        if not isinstance(event, dict) or event.get("channel") != self.channel:
            return
        event_id = self.job.event_id or _str(payload.get("event_id"))
        if event_id and event_id == self.state.get("last_hint"):
            return  # this event was already applied by an earlier sync
        subtype = event.get("subtype")
        if subtype == "message_deleted":
            deleted_ts = _str(event.get("deleted_ts"))
            previous = event.get("previous_message")
            thread_ts = _str(previous.get("thread_ts")) if isinstance(previous, dict) else None
            if deleted_ts and thread_ts and thread_ts != deleted_ts:
                if thread_ts not in self.seen_roots:
                    await self._refresh_thread(thread_ts)  # a reply was deleted
            elif deleted_ts and deleted_ts not in self.seen_roots:
                had_replies = isinstance(previous, dict) and bool(previous.get("reply_count"))
                if had_replies:
                    await self._refresh_thread(deleted_ts)  # its replies may remain
                else:
                    await self._mark_deleted(deleted_ts)  # Slack deletions are final
        elif subtype == "message_changed":
            message = event.get("message")
            if isinstance(message, dict) and _str(message.get("ts")):
                ts = str(message["ts"])
                thread_ts = _str(message.get("thread_ts"))
                if message.get("subtype") == "tombstone" and ts not in self.seen_roots:
                    await self._refresh_thread(ts)  # a deleted parent: keep its live replies
                elif thread_ts and thread_ts != ts:
                    await self._refresh_thread(thread_ts)  # an edited reply
                elif ts not in self.seen_roots:
                    await self._refresh_thread(ts)  # an edited root older than the window
        else:
            new_ts = _str(event.get("ts"))
            thread_ts = _str(event.get("thread_ts"))
            if thread_ts and thread_ts != new_ts:
                if thread_ts not in self.seen_roots:
                    await self._refresh_thread(thread_ts)
            elif new_ts and new_ts not in self.seen_roots and not self._skipped(event):
                await self._refresh_thread(new_ts)  # history did not show it (yet)
        if event_id:
            self.state["last_hint"] = event_id
