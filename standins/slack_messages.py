"""Slack message objects of every feature the renderer handles, in the documented shapes.

Written from Slack's references, not recorded: the message object and its subtypes
(https://docs.slack.dev/reference/objects/message-object,
https://docs.slack.dev/reference/events/message), Block Kit blocks and elements
(https://docs.slack.dev/reference/block-kit/blocks,
https://docs.slack.dev/reference/block-kit/block-elements), ``rich_text`` and its sub-elements
(https://docs.slack.dev/reference/block-kit/blocks/rich-text-block), legacy attachments
(https://docs.slack.dev/legacy/legacy-messaging/legacy-secondary-message-attachments) and file
objects (https://docs.slack.dev/reference/objects/file-object). Used by the render tests (one
exact Markdown expectation each) and by :meth:`standins.slack_api.FakeSlack.demo`.

``MESSAGES`` maps a feature name to a message as ``conversations.history`` returns it, without
``ts`` (callers stamp one). Use :func:`message` for a deep copy.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["MESSAGES", "message"]


def _t(text: str, **style: bool) -> dict[str, Any]:
    el: dict[str, Any] = {"type": "text", "text": text}
    if style:
        el["style"] = style
    return el


def _section(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rich_text_section", "elements": list(elements)}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _md(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


MESSAGES: dict[str, dict[str, Any]] = {
    # A person's message from the composer: ``text`` is the mrkdwn fallback of ``rich_text``.
    "rich_text": {
        "type": "message",
        "user": "U2147483697",
        "user_profile": {"display_name": "ann", "real_name": "Ann Example", "name": "ann.e"},
        "text": "Plan for <#C0RELEASE|release> with <@U2147483698> <!here> :rocket:\n"
        "• *ship* it\n• _test_ it\n    1. on Android\n&gt; careful &lt;now&gt;\n"
        "```make deploy &amp;&amp; echo ok```",
        "blocks": [
            {
                "type": "rich_text",
                "block_id": "Ax1",
                "elements": [
                    _section(
                        _t("Plan for "),
                        {"type": "channel", "channel_id": "C0RELEASE"},
                        _t(" with "),
                        {"type": "user", "user_id": "U2147483698"},
                        _t(" "),
                        {"type": "broadcast", "range": "here"},
                        _t(" "),
                        {"type": "emoji", "name": "rocket", "unicode": "1f680"},
                        _t("\n"),
                    ),
                    {
                        "type": "rich_text_list",
                        "style": "bullet",
                        "indent": 0,
                        "elements": [
                            _section(_t("ship", bold=True), _t(" it")),
                            _section(_t("test", italic=True), _t(" it")),
                        ],
                    },
                    {
                        "type": "rich_text_list",
                        "style": "ordered",
                        "indent": 1,
                        "elements": [_section(_t("on Android"))],
                    },
                    {"type": "rich_text_quote", "elements": [_t("careful <now>")]},
                    {"type": "rich_text_preformatted", "elements": [_t("make deploy && echo ok")]},
                ],
            }
        ],
    },
    # Every inline element of a rich_text section, and an ordered list resumed with ``offset``.
    "rich_text_elements": {
        "type": "message",
        "user": "U2147483697",
        "text": "",
        "blocks": [
            {
                "type": "rich_text",
                "elements": [
                    _section(
                        _t("bold", bold=True),
                        _t(" "),
                        _t("it", italic=True),
                        _t(" "),
                        _t("gone", strike=True),
                        _t(" "),
                        _t("x < y", code=True),
                        _t(" "),
                        {"type": "link", "url": "https://example.com/a?b=1&c=2", "text": "docs"},
                        _t(" "),
                        {"type": "link", "url": "https://example.com"},
                        _t(" "),
                        {"type": "usergroup", "usergroup_id": "S0ONCALL"},
                        _t(" "),
                        {"type": "team", "team_id": "T061EG9R6"},
                        _t(" "),
                        {
                            "type": "date",
                            "timestamp": 1763683200,
                            "format": "{date_short}",
                            "fallback": "Nov 21",
                        },
                        _t(" "),
                        {"type": "color", "value": "#FF8800"},
                        _t(" "),
                        {"type": "emoji", "name": "partyparrot"},
                        _t(" "),
                        {"type": "emoji", "name": "+1", "unicode": "1f44d", "skin_tone": 3},
                        _t(" *literal* [x](y)"),
                    ),
                    {"type": "rich_text_list", "style": "ordered", "elements": [_section(_t("first"))]},
                    {
                        "type": "rich_text_list",
                        "style": "bullet",
                        "indent": 1,
                        "elements": [_section(_t("detail"))],
                    },
                    {
                        "type": "rich_text_list",
                        "style": "ordered",
                        "offset": 1,
                        "elements": [_section(_t("second"))],
                    },
                ],
            }
        ],
    },
    # A poll app: ``text`` is a notification summary, the blocks carry the poll.
    "poll": {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B0POLLAPP",
        "username": "Polly",
        "text": "New poll: Where do we eat?",
        "blocks": [
            {
                "type": "section",
                "text": _md("*Where do we eat?*"),
                "accessory": {"type": "overflow", "options": [{"text": _plain("Delete"), "value": "d"}]},
            },
            {"type": "divider"},
            {
                "type": "section",
                "text": _md(":pizza: Pizza `2`\n<@U2147483697>, <@U2147483698>"),
                "accessory": {"type": "button", "text": _plain("Vote"), "value": "pizza"},
            },
            {
                "type": "section",
                "text": _md(":ramen: Ramen `0`"),
                "accessory": {"type": "button", "text": _plain("Vote"), "value": "ramen"},
            },
            {
                "type": "context",
                "elements": [
                    {"type": "image", "image_url": "https://example.com/polly.png", "alt_text": "Polly"},
                    _md("Created by <@U2147483699> with /poll"),
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": _plain("Add option"), "action_id": "add"},
                    {"type": "button", "text": _plain("Results"), "url": "https://polly.example/r/1"},
                    {
                        "type": "static_select",
                        "placeholder": _plain("Close after"),
                        "options": [{"text": _plain("1 hour"), "value": "1h"}],
                    },
                    {"type": "datepicker", "initial_date": "2025-11-21"},
                ],
            },
        ],
    },
    # An app message whose blocks say more than ``text``: section fields, header, image, input.
    "app_blocks": {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B0DEPLOY",
        "text": "Deploy v2.4 finished",
        "blocks": [
            {"type": "header", "text": _plain("Deploy v2.4 finished")},
            {
                "type": "section",
                "fields": [_md("*Service:*\napi"), _md("*Took:*\n4 min"), _plain("Region: eu-west-1")],
                "accessory": {
                    "type": "image",
                    "image_url": "https://example.com/ok.png",
                    "alt_text": "green check",
                },
            },
            {
                "type": "image",
                "image_url": "https://example.com/graph.png",
                "alt_text": "latency graph",
                "title": _plain("Latency after deploy"),
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "checkboxes",
                        "options": [
                            {"text": _plain("Smoke tests"), "value": "s"},
                            {"text": _plain("Notify QA"), "value": "q"},
                        ],
                        "initial_options": [{"text": _plain("Smoke tests"), "value": "s"}],
                    },
                    {
                        "type": "radio_buttons",
                        "options": [
                            {"text": _plain("Keep"), "value": "k"},
                            {"text": _plain("Roll back"), "value": "r"},
                        ],
                        "initial_option": {"text": _plain("Keep"), "value": "k"},
                    },
                    {"type": "users_select", "initial_user": "U2147483698"},
                ],
            },
            {
                "type": "input",
                "label": _plain("Notes"),
                "element": {"type": "plain_text_input", "placeholder": _plain("What went wrong?")},
            },
            {"type": "file", "external_id": "deploy-log-2.4", "source": "remote"},
            {
                "type": "video",
                "alt_text": "walkthrough",
                "title": _plain("Release walkthrough"),
                "title_url": "https://example.com/v",
                "video_url": "https://example.com/v.mp4",
                "thumbnail_url": "https://example.com/v.png",
                "description": _plain("Three minutes"),
            },
            {"type": "markdown", "text": "**Summary**: all *green*"},
            {
                "type": "table",
                "rows": [
                    [{"type": "raw_text", "text": "check"}, {"type": "raw_text", "text": "result"}],
                    [{"type": "raw_text", "text": "p99 | ms"}, {"type": "raw_text", "text": "120"}],
                ],
            },
            {"type": "context", "elements": [_plain("eu-west-1 · 12:04")]},
        ],
    },
    # A bot's legacy attachment: every field Slack draws.
    "attachment": {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B0ALERTS",
        "username": "alerts",
        "text": "",
        "attachments": [
            {
                "id": 1,
                "color": "d50200",
                "fallback": "[FIRING] High error rate on api",
                "pretext": "Alert from <https://grafana.example|Grafana>",
                "author_name": "Grafana",
                "author_link": "https://grafana.example",
                "title": "[FIRING] High error rate",
                "title_link": "https://grafana.example/alert/1",
                "text": "Error rate &gt; 5% for 10 min on <#C0API|api>",
                "fields": [
                    {"title": "Severity", "value": "critical", "short": True},
                    {"title": "Owner", "value": "<@U2147483699>", "short": True},
                ],
                "actions": [{"type": "button", "text": "Silence", "url": "https://grafana.example/s"}],
                "footer": "Grafana v11",
                "ts": 1763683200,
            }
        ],
    },
    # A link unfurl: ``text`` has the link, the attachment its preview.
    "unfurl": {
        "type": "message",
        "user": "U2147483698",
        "text": "Look: <https://github.com/slackapi/python-slack-sdk>",
        "attachments": [
            {
                "id": 1,
                "from_url": "https://github.com/slackapi/python-slack-sdk",
                "original_url": "https://github.com/slackapi/python-slack-sdk",
                "service_name": "GitHub",
                "title": "slackapi/python-slack-sdk",
                "title_link": "https://github.com/slackapi/python-slack-sdk",
                "text": "Slack Developer Kit for Python",
                "fallback": "GitHub: slackapi/python-slack-sdk",
                "image_url": "https://opengraph.githubassets.com/1/slackapi/python-slack-sdk",
            }
        ],
    },
    # An attachment with nothing but its fallback.
    "attachment_fallback": {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B0LEGACY",
        "text": "",
        "attachments": [{"id": 1, "fallback": "Build #42 passed &amp; deployed"}],
    },
    # Files shared without text; a deleted file shows nothing.
    "file_share": {
        "type": "message",
        "subtype": "file_share",
        "user": "U2147483697",
        "text": "",
        "upload": False,
        "files": [
            {
                "id": "F0AAA",
                "name": "q3 [draft].pdf",
                "title": "Q3 plan",
                "permalink": "https://debounce-demo.slack.com/files/U2147483697/F0AAA/q3_draft.pdf",
            },
            {"id": "F0BBB", "mode": "tombstone"},
        ],
    },
    "file_deleted": {
        "type": "message",
        "subtype": "file_share",
        "user": "U2147483697",
        "text": "",
        "files": [{"id": "F0CCC", "mode": "tombstone"}],
    },
    # Slack's escaping and every reference kind in ``text``.
    "escaping": {
        "type": "message",
        "user": "U2147483697",
        "text": "&lt;MARQUEE&gt; &amp;amp; &amp;copy; [not](a link) # not a heading <!channel> "
        "<!subteam^S0ONCALL|@oncall> <@U2147483698|bob> <#C0API> <!date^1763683200^{date}|Nov 21> "
        "<mailto:ops@example.com|mail ops> <mailto:ops@example.com> `&lt;b&gt;` C:\\*",
    },
    "me_message": {"type": "message", "subtype": "me_message", "user": "U2147483697", "text": "is out today"},
    "channel_topic": {
        "type": "message",
        "subtype": "channel_topic",
        "user": "U2147483697",
        "text": "<@U2147483697> set the channel topic: Releases &amp; QA",
        "topic": "Releases & QA",
    },
    "channel_purpose": {
        "type": "message",
        "subtype": "channel_purpose",
        "user": "U2147483697",
        "text": "<@U2147483697> set the channel purpose: Ship it",
        "purpose": "Ship it",
    },
    "channel_name": {
        "type": "message",
        "subtype": "channel_name",
        "user": "U2147483697",
        "text": '<@U2147483697> has renamed the channel from "rel" to "releases"',
        "old_name": "rel",
        "name": "releases",
    },
    "channel_join": {
        "type": "message",
        "subtype": "channel_join",
        "user": "U2147483700",
        "text": "<@U2147483700> has joined the channel",
        "inviter": "U2147483697",
    },
    "channel_leave": {
        "type": "message",
        "subtype": "channel_leave",
        "user": "U2147483700",
        "text": "<@U2147483700> has left the channel",
    },
    "channel_archive": {
        "type": "message",
        "subtype": "channel_archive",
        "user": "U2147483697",
        "text": "<@U2147483697> archived the channel",
        "members": ["U2147483697"],
    },
    "huddle_thread": {
        "type": "message",
        "subtype": "huddle_thread",
        "user": "U2147483697",
        "text": "",
        "channel": "C2147483705",
        "no_notifications": True,
        "room": {"id": "R0HUDDLE", "name": "", "media_server": "", "participants": []},
    },
    "tombstone": {
        "type": "message",
        "subtype": "tombstone",
        "hidden": True,
        "user": "USLACKBOT",
        "text": "This message was deleted.",
    },
    "empty": {"type": "message", "user": "U2147483697", "text": ""},
}


def message(name: str, ts: str, **extra: Any) -> dict[str, Any]:
    """A deep copy of ``MESSAGES[name]`` stamped with ``ts`` (and ``extra`` fields)."""
    msg = copy.deepcopy(MESSAGES[name])
    msg["ts"] = ts
    msg.update(extra)
    return msg
