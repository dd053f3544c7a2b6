"""Slack: Events API webhooks in, one Markdown document per thread out.

The package's modules: ``webhook.py`` (verify, parse), ``client.py`` (the Web API client, 429s and
error codes), ``render.py`` (thread documents, which of a message's text/blocks/attachments to
show, fingerprints), ``mrkdwn.py`` (Slack text, escaping, references, titles), ``blocks.py``
(Block Kit, attachments, files), ``sync.py`` (:class:`SlackSyncer` and the channel sync),
``backfill.py`` (``users.conversations``: the conversations the bot is in, one backfill page per call),
``source.py`` (:data:`SOURCE`, what its entry point names: ``debounce.registry`` loads it).

**Parse half** (web process, no I/O). Every delivery is verified with Slack's request signing
(``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>">`` keyed by the app's
signing secret, ``X-Slack-Request-Timestamp`` within 5 minutes;
https://docs.slack.dev/authentication/verifying-requests-from-slack). ``url_verification``
is answered with its challenge (https://docs.slack.dev/reference/events/url_verification);
``app_rate_limited`` is a warning (https://docs.slack.dev/apis/events-api/#rate-limiting);
an ``event_callback`` whose event is a ``message`` (any subtype; channels, private channels,
DMs; https://docs.slack.dev/reference/events/message) becomes one job keyed by the
conversation id, deduplicated by the envelope's ``event_id`` (stable across Slack's retries,
which carry ``X-Slack-Retry-Num``). Other event types are acknowledged and ignored.

**Sync half** (worker). The job key is a conversation. The sync reads
``conversations.history`` (https://docs.slack.dev/reference/methods/conversations.history)
from the conversation's stored watermark minus a look-back window, newest first, following
``response_metadata.next_cursor``; threads whose ``reply_count``/``latest_reply`` (or root
text) changed are read with ``conversations.replies``
(https://docs.slack.dev/reference/methods/conversations.replies). One document per thread,
``document_id = "<channel>/<thread_ts>"`` (a message without replies is a thread of one).
The job's latest event payload is used as a hint for what the window cannot see: an edited
or deleted reply, a reply to an old thread, a deleted root. The per-conversation state
(``sync_state``) holds the watermark, an in-progress scan and a fingerprint per recent thread;
it is written only after the documents it describes. See ``docs/slack.md`` for the choices.
"""

from integrations.slack.client import SlackApiFailure
from integrations.slack.render import SOURCE_TYPE, render_thread
from integrations.slack.settings import SlackSettings
from integrations.slack.source import SOURCE
from integrations.slack.sync import SlackSyncer, create
from integrations.slack.webhook import SlackWebhooks

__all__ = [
    "SOURCE",
    "SOURCE_TYPE",
    "SlackApiFailure",
    "SlackSettings",
    "SlackSyncer",
    "SlackWebhooks",
    "create",
    "render_thread",
]
