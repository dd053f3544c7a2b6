"""The Slack syncer: what a Slack job key names, synced.

A conversation's key (``C…``, ``G…``, ``D…``) syncs it into one document per thread
(:mod:`integrations.slack.conversation`, ``docs/slack.md`` for the choices); ``members:<id>``
refreshes a conversation's audience (:mod:`integrations.slack.audience`); ``canvas:<file id>``
syncs one canvas (:mod:`integrations.slack.canvases`). The syncer is also the source's
backfill (:mod:`integrations.slack.backfill`) and the refresher of its files' URLs.
"""

from __future__ import annotations

from debounce.contract import (
    BackfillPage,
    FileRef,
    PermanentError,
    SyncContext,
    SyncJob,
    SyncResult,
)
from integrations.slack.audience import MEMBERS_KEY_PREFIX, AudienceKeeper
from integrations.slack.backfill import SlackBackfill
from integrations.slack.canvases import CANVAS_KEY_PREFIX, sync_canvas
from integrations.slack.client import SlackClient, _ChannelGone
from integrations.slack.conversation import ConversationSync
from integrations.slack.files import file_ref
from integrations.slack.render import SOURCE_TYPE
from integrations.slack.settings import SlackSettings

__all__ = ["DEFAULT_LOOKBACK_SECONDS", "DEFAULT_PAGE_LIMIT", "SlackSyncer", "create"]

#: Default look-back below the watermark re-read on every sync, in seconds, so recent edits
#: and deletions are seen (overridable per instance).
DEFAULT_LOOKBACK_SECONDS = 3600.0
#: Messages per ``conversations.history``/``replies`` page. Slack recommends no more than 200
#: (https://docs.slack.dev/apis/web-api/pagination).
DEFAULT_PAGE_LIMIT = 200


class SlackSyncer:
    """The Slack syncer (worker; see the module docstring), also the source's
    :class:`~debounce.contract.Backfillable` (``users.conversations``).

    Built from its typed settings, it composes what it needs: the Web API clients
    (:class:`~integrations.slack.client.SlackClient`) and the listing
    (:class:`~integrations.slack.backfill.SlackBackfill`).
    ``lookback_seconds``: how far below the watermark each sync re-reads history (default
    ``settings.slack_lookback_seconds``, 3600). ``page_limit``: messages per history/replies
    call (default 200).
    """

    source_type = SOURCE_TYPE

    def __init__(
        self,
        settings: SlackSettings,
        *,
        lookback_seconds: float | None = None,
        page_limit: int = DEFAULT_PAGE_LIMIT,
    ) -> None:
        self.settings = settings
        if lookback_seconds is None:
            lookback_seconds = settings.slack_lookback_seconds
        self.lookback_seconds = max(0.0, lookback_seconds)
        self.page_limit = max(1, min(page_limit, 999))
        self.client = SlackClient(settings)
        self.audiences = AudienceKeeper(self.client, settings.slack_audience_max_age_seconds)
        self.backfill = SlackBackfill(self.client, audiences=self.audiences)

    async def backfill_page(
        self, cursor: str | None, context: SyncContext, *, newest_first: bool = False
    ) -> BackfillPage:
        """One page of the conversations the bot is in
        (:meth:`~integrations.slack.backfill.SlackBackfill.backfill_page`)."""
        return await self.backfill.backfill_page(cursor, context, newest_first=newest_first)

    async def aclose(self) -> None:
        """Close the HTTP session of the Web API clients (if one was opened)."""
        await self.client.aclose()

    def file_token(self, context: SyncContext) -> str | None:
        """The token a file job sends to Slack's file hosts: the workspace's, else
        ``SLACK_BOT_TOKEN`` (:class:`~debounce.contract.FileTokenSource`)."""
        return self.client.token(context)

    async def refresh_file(self, ref: FileRef, context: SyncContext) -> FileRef:
        """``ref`` as ``files.info`` shows it now (one request; a fresh upload whose URL the
        message did not carry yet, a URL that failed); ``url`` ``None`` when the token cannot
        read the file any more (:class:`~debounce.contract.FileRefresher`).

        Raises:
            RateLimited, BudgetExhausted, PermanentError, SlackApiFailure: as :meth:`sync`.
        """
        data = await self.client.bind(context).call("files.info", file=ref.file_id)
        fresh = data.get("file") if data is not None else None
        now = file_ref(fresh, ref.parent_document_id) if isinstance(fresh, dict) else None
        return ref.with_url(None) if now is None else now

    async def sync(self, job: SyncJob, context: SyncContext) -> SyncResult:
        """Sync one conversation (``job.source_page_id``) into per-thread documents in
        ``context.store``, with the context's token, meter and checkpoint; every document
        carries the conversation's audience (:mod:`integrations.slack.audience`, cached in
        ``context.audiences``). A job keyed ``members:<conversation>`` (a member joined or
        left) only refreshes that conversation's audience and its documents'; a job keyed
        ``canvas:<file id>`` syncs one canvas (:mod:`integrations.slack.canvases`).

        Raises:
            RateLimited: Slack answered 429 (``Retry-After`` seconds).
            PermanentError: no token, or ``invalid_auth``, ``token_revoked``,
                ``account_inactive``, ``not_in_channel``, ``channel_not_found`` (the last also
                marks the conversation's documents deleted) and similar.
            SlackApiFailure: 5xx or another Slack error worth retrying.
            aiohttp.ClientError, TimeoutError: network trouble (retried by the queue).
        """
        store = context.writer()
        if not self.client.token(context):
            raise PermanentError(
                "SLACK_BOT_TOKEN is not set: set it to the app's Bot User OAuth Token (xoxb-…) "
                "to sync Slack conversations"
            )
        if job.source_page_id.startswith(MEMBERS_KEY_PREFIX):
            return await self._refresh_members(job, context)
        if job.source_page_id.startswith(CANVAS_KEY_PREFIX):
            return await self._sync_canvas(job, context)
        run = ConversationSync(
            store,
            self.client.bind(context),
            job,
            settings=self.settings,
            audiences=self.audiences,
            lookback_seconds=self.lookback_seconds,
            page_limit=self.page_limit,
        )
        return await run.run()

    async def _sync_canvas(self, job: SyncJob, context: SyncContext) -> SyncResult:
        file_id = job.source_page_id.removeprefix(CANVAS_KEY_PREFIX)
        return await sync_canvas(
            SOURCE_TYPE, self.client.bind(context), context.writer(), self.audiences, file_id
        )

    async def _refresh_members(self, job: SyncJob, context: SyncContext) -> SyncResult:
        channel = job.source_page_id.removeprefix(MEMBERS_KEY_PREFIX)
        try:
            await self.audiences.learn(self.client.bind(context), channel, context.audiences)
        except _ChannelGone as gone:
            raise PermanentError(
                f"Slack {gone.method}: channel_not_found for {channel} (deleted, or the app is "
                "not in it): its member list was not refreshed"
            ) from None
        return SyncResult()


def create(settings: SlackSettings) -> SlackSyncer:
    """The source's syncer factory (``Source.create``)."""
    return SlackSyncer(settings)
