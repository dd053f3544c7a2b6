"""Slack rendering (no I/O): Block Kit, attachments, files, Slack's escaping and references,
titles, messages without content. Fixtures: ``standins.slack_messages`` (written from Slack's
message, Block Kit and attachment references); each renders to exact Markdown."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.slack import render_thread
from integrations.slack.render import has_content
from standins.slack_messages import MESSAGES, message

C = "C2147483705"
TS = "1763683200.000100"
HEAD = "**{author}** · 2025-11-21 00:00:00 UTC\n\n"

EXPECTED = {
    "rich_text": (
        "Plan for #release with @U2147483698 @here 🚀\n"
        "\n"
        "- **ship** it\n"
        "- *test* it\n"
        "  1. on Android\n"
        "\n"
        "> careful \\<now>\n"
        "\n"
        "```\n"
        "make deploy && echo ok\n"
        "```\n"
    ),
    "rich_text_elements": (
        "**bold** *it* ~~gone~~ `x < y` [docs](https://example.com/a?b=1&c=2) "
        "<https://example.com> @S0ONCALL @T061EG9R6 Nov 21 #FF8800 :partyparrot: 👍🏼 "
        "\\*literal\\* \\[x](y)\n"
        "\n"
        "1. first\n"
        "   - detail\n"
        "2. second\n"
    ),
    "poll": (
        "New poll: Where do we eat?\n"
        "\n"
        ":pizza: Pizza `2`\n"
        "@U2147483697, @U2147483698\n"
        "\n"
        "[Vote]\n"
        "\n"
        ":ramen: Ramen `0`\n"
        "\n"
        "[Vote]\n"
        "\n"
        "Polly · Created by @U2147483699 with /poll\n"
        "\n"
        "[Add option] · [Results](https://polly.example/r/1) · [Close after ▾] · [2025-11-21 ▾]\n"
    ),
    "app_blocks": (
        "### Deploy v2.4 finished\n"
        "\n"
        "- *Service:*\n"
        "  api\n"
        "- *Took:*\n"
        "  4 min\n"
        "- Region: eu-west-1\n"
        "\n"
        "![green check](https://example.com/ok.png)\n"
        "\n"
        "Latency after deploy\n"
        "\n"
        "![latency graph](https://example.com/graph.png)\n"
        "\n"
        "☑ Smoke tests, ☐ Notify QA · ◉ Keep, ○ Roll back · [@U2147483698 ▾]\n"
        "\n"
        "Notes: [What went wrong?]\n"
        "\n"
        "_(file: deploy-log-2.4)_\n"
        "\n"
        "[Release walkthrough](https://example.com/v)\n"
        "\n"
        "Three minutes\n"
        "\n"
        "**Summary**: all *green*\n"
        "\n"
        "| check | result |\n"
        "| --- | --- |\n"
        "| p99 \\| ms | 120 |\n"
        "\n"
        "eu-west-1 · 12:04\n"
    ),
    "attachment": (
        "Alert from [Grafana](https://grafana.example)\n"
        "\n"
        "> [Grafana](https://grafana.example)\n"
        ">\n"
        "> **[\\[FIRING\\] High error rate](https://grafana.example/alert/1)**\n"
        ">\n"
        "> Error rate > 5% for 10 min on #api\n"
        ">\n"
        "> - **Severity**: critical\n"
        "> - **Owner**: @U2147483699\n"
        ">\n"
        "> [Silence](https://grafana.example/s)\n"
        ">\n"
        "> Grafana v11\n"
    ),
    "unfurl": (
        "Look: <https://github.com/slackapi/python-slack-sdk>\n"
        "\n"
        "> GitHub\n"
        ">\n"
        "> **[slackapi/python-slack-sdk](https://github.com/slackapi/python-slack-sdk)**\n"
        ">\n"
        "> Slack Developer Kit for Python\n"
    ),
    "attachment_fallback": ("> Build #42 passed & deployed\n"),
    "file_share": (
        "_(file: [q3 \\[draft\\].pdf]"
        "(https://debounce-demo.slack.com/files/U2147483697/F0AAA/q3_draft.pdf)"
        " · document `file:F0AAA`)_\n"
    ),
    "file_deleted": (""),
    "escaping": (
        "\\<MARQUEE> \\&amp; \\&copy; \\[not](a link) # not a heading @channel @oncall @bob "
        "#C0API Nov 21 [mail ops](mailto:ops@example.com) <mailto:ops@example.com> `<b>` C:\\\\*\n"
    ),
    "me_message": ("is out today\n"),
    "channel_topic": ("@U2147483697 set the channel topic: Releases & QA\n"),
    "channel_purpose": ("@U2147483697 set the channel purpose: Ship it\n"),
    "channel_name": ('@U2147483697 has renamed the channel from "rel" to "releases"\n'),
    "channel_join": (""),
    "channel_leave": (""),
    "channel_archive": (""),
    "huddle_thread": ("_(huddle)_\n"),
    "tombstone": ("_(message deleted)_\n"),
    "empty": (""),
}


def test_every_fixture_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MESSAGES)


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_each_message_feature_renders_exactly(name: str) -> None:
    doc = render_thread(C, [message(name, TS)])
    body = doc.content.split("\n\n", 1)[1] if doc.content else ""
    assert body == EXPECTED[name]
    assert has_content(MESSAGES[name]) == (bool(EXPECTED[name]) and name != "tombstone")


# --------------------------------------------------------------------------- 6. Block Kit


def test_rich_text_replaces_its_text_fallback() -> None:
    doc = render_thread(C, [message("rich_text", TS)])
    assert doc.content.startswith("**U2147483697** (ann) · 2025-11-21 00:00:00 UTC\n\n")
    assert "• " not in doc.content and "&gt;" not in doc.content  # the fallback is not repeated
    assert doc.content.count("on Android") == 1


def test_text_that_says_something_else_is_kept_and_blocks_follow_without_repeats() -> None:
    msg = {
        "ts": TS,
        "user": "U1",
        "text": "Deploy done: see the checks below",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "Deploy done"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "all 12 checks green"}]},
        ],
    }
    assert render_thread(C, [msg]).content == (
        HEAD.format(author="U1") + "Deploy done: see the checks below\n\nall 12 checks green\n"
    )


def test_an_attachment_that_repeats_the_text_is_not_repeated() -> None:
    msg = {
        "ts": TS,
        "user": "U1",
        "text": "Build #42 passed",
        "attachments": [
            {"fallback": "Build #42 passed", "text": "Build #42 passed"},
            {"title": "Coverage 91%"},
        ],
    }
    assert render_thread(C, [msg]).content == (
        HEAD.format(author="U1") + "Build #42 passed\n\n> **Coverage 91%**\n"
    )


# --------------------------------------------------------------------------- 8. escaping


def test_slack_entities_become_text_not_html_in_body_and_title() -> None:
    msg = {"ts": TS, "user": "U1", "text": "&lt;MARQUEE&gt;hi&lt;/MARQUEE&gt; &amp; <b>"}
    doc = render_thread(C, [msg])
    assert doc.content == HEAD.format(author="U1") + "\\<MARQUEE>hi\\</MARQUEE> & \\<b>\n"
    assert doc.title == "\\<MARQUEE>hi\\</MARQUEE> & \\<b>"


def test_references_read_as_in_slack() -> None:
    text = (
        "<!here> <@U1|ann> <@U2> in <#C1|general> and <#C2>: see <https://x.test/a?b=1&amp;c=2|docs> "
        "or <https://y.test> &lt;3 <!subteam^S1|@oncall> <!subteam^S2> <!date^1763683200^{date}|"
        "Friday> <!date^1763683200^{time}> <mailto:a@b.test|mail us> <!channel> <!everyone>"
    )
    assert render_thread(C, [{"ts": TS, "user": "U9", "text": text}]).content == (
        HEAD.format(author="U9")
        + "@here @ann @U2 in #general and #C2: see [docs](https://x.test/a?b=1&c=2) or "
        "<https://y.test> \\<3 @oncall @S2 Friday 2025-11-21 00:00 UTC [mail us](mailto:a@b.test) "
        "@channel @everyone\n"
    )


def test_a_name_given_anywhere_in_the_thread_is_used_for_mentions() -> None:
    root = {
        "ts": TS,
        "user": "U1",
        "text": "ping <@U2>",
        "blocks": [
            {
                "type": "rich_text",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [{"type": "text", "text": "ping "}, {"type": "user", "user_id": "U2"}],
                    }
                ],
            }
        ],
    }
    reply = {
        "ts": "1763683201.000100",
        "user": "U2",
        "text": "here",
        "user_profile": {"real_name": "Bob Builder", "display_name": ""},
    }
    doc = render_thread(C, [root, reply])
    assert doc.content == (
        HEAD.format(author="U1") + "ping @Bob Builder\n\n"
        "**U2** (Bob Builder) · 2025-11-21 00:00:01 UTC\n\nhere\n"
    )


# --------------------------------------------------------------------------- 9. titles, nothing


def test_the_title_is_cut_on_plain_text_at_a_word_boundary_never_inside_a_link() -> None:
    text = (
        "Release notes for the *winter* build are in "
        "<https://wiki.example.com/spaces/ENG/pages/123456789/Release+notes|the team wiki page> today"
    )
    doc = render_thread(C, [{"ts": TS, "user": "U1", "text": text}])
    assert doc.title == "Release notes for the winter build are in the team wiki page today"
    long = "word " * 15 + "<https://x.test/" + "a" * 80 + "|a link label> &lt;tail&gt;"
    title = render_thread(C, [{"ts": TS, "user": "U1", "text": long}]).title
    assert title == ("word " * 15).strip() + " a…"
    assert len(title) <= 80 and "](" not in title and "https" not in title
    escaped = render_thread(C, [{"ts": TS, "user": "U1", "text": "x " * 36 + "&lt;b&gt; more words"}])
    assert escaped.title == "x " * 36 + "\\<b>…"


def test_a_thread_whose_parent_is_deleted_takes_its_title_from_the_first_reply() -> None:
    root = message("tombstone", TS, thread_ts=TS, reply_count=1)
    reply = {
        "ts": "1763683201.000100",
        "thread_ts": TS,
        "user": "U2",
        "parent_user_id": "U1",
        "text": "the answer",
    }
    doc = render_thread(C, [root, reply])
    assert doc.title == "the answer"
    assert doc.content == (
        HEAD.format(author="U1") + "_(message deleted)_\n\n**U2** · 2025-11-21 00:00:01 UTC\n\nthe answer\n"
    )
    assert doc.metadata["authors"] == ["U1", "U2"]


@pytest.mark.parametrize("name", ["empty", "file_deleted", "channel_join", "channel_leave"])
def test_a_message_without_content_has_no_line_of_its_own(name: str) -> None:
    root = {"ts": TS, "user": "U1", "text": "question", "reply_count": 1}
    nothing: dict[str, Any] = message(name, "1763683201.000100", thread_ts=TS)
    answer = {"ts": "1763683202.000100", "user": "U2", "text": "answer", "thread_ts": TS}
    doc = render_thread(C, [root, nothing, answer])
    assert doc.content == (
        HEAD.format(author="U1") + "question\n\n**U2** · 2025-11-21 00:00:02 UTC\n\nanswer\n"
    )
    assert not has_content(nothing)


def test_newer_layout_blocks_render_their_titles_and_text() -> None:
    from integrations.slack.blocks import block
    from integrations.slack.mrkdwn import md_of

    def p(text: str) -> dict[str, str]:
        return {"type": "plain_text", "text": text}

    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "alert", "text": {"type": "mrkdwn", "text": "*Heads up*"}}, "*Heads up*"),
        (
            {
                "type": "card",
                "title": p("Card"),
                "subtitle": p("sub"),
                "body": {"type": "mrkdwn", "text": "body"},
                "actions": [{"type": "button", "text": p("Go")}],
            },
            "**Card**\n\nsub\n\nbody\n\n[Go]",
        ),
        (
            {
                "type": "container",
                "title": p("Box"),
                "child_blocks": [{"type": "section", "text": p("inside")}],
            },
            "**Box**\n\ninside",
        ),
        (
            {
                "type": "plan",
                "title": "Plan",
                "tasks": [{"type": "task_card", "task_id": "1", "title": "Do it", "status": "complete"}],
            },
            "**Plan**\n\n- [x] Do it",
        ),
        ({"type": "call", "call_id": "R1"}, ""),
        ({"type": "mystery"}, ""),
    ]
    for blk, expected in cases:
        assert md_of(block(blk, {})) == expected
