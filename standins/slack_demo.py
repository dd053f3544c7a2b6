"""The demo content of the Slack stand-in (:meth:`standins.slack_api.FakeSlack.demo`), for
``debounce serve --demo``, ``debounce standins`` and the tests that use it.

Two teams: the default one (the constructor's token) with the conversation of
``examples/slack`` (a public channel), a private channel of three members
(:data:`DEMO_PRIVATE_MEMBERS`) and a DM between the bot and a person
(:data:`DEMO_DM`), and a second one, :data:`DEMO_SECOND_TEAM_ID` (bot
token :data:`DEMO_SECOND_TOKEN`), with :data:`DEMO_SECOND_CHANNEL`, so a multi-workspace
deployment can connect both.

:class:`SlackDemoEdits` makes the edit of ``examples/slack/message_changed.json`` real (the
"Hello world" message gains `` (edit N, time)``) for the demo's ``POST /_demo/edit``
(:mod:`standins.demo_edits`).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from standins.demo_edits import DemoEdit, EditCounter, NotAnEdit

if TYPE_CHECKING:
    from standins.slack_api import FakeSlack

__all__ = [
    "DEMO_CANVAS",
    "DEMO_DM",
    "DEMO_DM_USER",
    "DEMO_PRIVATE",
    "DEMO_PRIVATE_MEMBERS",
    "DEMO_SECOND_BOT_USER_ID",
    "DEMO_SECOND_CHANNEL",
    "DEMO_SECOND_TEAM_ID",
    "DEMO_SECOND_TEAM_NAME",
    "DEMO_SECOND_TOKEN",
    "SlackDemoEdits",
    "seed_demo",
]

#: The demo's second team: id, name, bot token, bot user, and its channel.
DEMO_SECOND_TEAM_ID = "T07LABS42"
DEMO_SECOND_TEAM_NAME = "Debounce Labs"
DEMO_SECOND_TOKEN = "xoxb-debounce-demo-second-team"
DEMO_SECOND_BOT_USER_ID = "U07LABSBOT"
DEMO_SECOND_CHANNEL = "C07LABS001"
#: The default team's private channel and its members (the default team's bot among them).
DEMO_PRIVATE = "G0PRIVATE1"
DEMO_PRIVATE_MEMBERS = ("U0BOTUSER", "U2147483697", "U2147483698")
#: The default team's DM between its bot and a person.
DEMO_DM = "D0DEMODM01"
DEMO_DM_USER = "U2147483699"


#: The demo's canvas: the channel canvas of C2147483705 (``examples/slack/file_change.json``).
DEMO_CANVAS = "F0DEMOCANVAS1"


def seed_demo(fake: FakeSlack) -> None:
    """Fill ``fake``'s default team and add and fill the second one."""
    c = "C2147483705"
    fake.post(
        c,
        "Standup notes for Thursday:\n• API latency back to normal\n• <@U2147483698> owns the migration",
        user="U2147483699",
        ts="1763682000.000100",
    )
    fake.post(c, "Hello world", user="U2147483697", ts="1763682934.000200")
    fake.reply(
        c,
        "1763682934.000200",
        "Replying in the thread",
        user="U2147483698",
        ts="1763683000.000300",
    )
    fake.reply(
        c,
        "1763682934.000200",
        "Agreed: see <https://example.com/runbook|the runbook> &amp; ping me",
        user="U2147483697",
        ts="1763683050.000350",
    )
    fake.post(
        c,
        "Deploy finished",
        user=None,
        bot_id="B0BOTID01",
        subtype="bot_message",
        username="deploybot",
        ts="1763683300.000600",
    )
    fake.post(c, "Release 2.4 is cut, QA starts tomorrow", user="U2147483699", ts="1763683350.000650")
    fake.reply(
        c, "1763683350.000650", "I'll take the Android pass", user="U2147483698", ts="1763683360.000660"
    )
    g = DEMO_PRIVATE
    fake.post(g, "In a private channel", user="U2147483697", ts="1763683400.000700")
    fake.post(g, "Budget review moved to Friday", user="U2147483698", ts="1763683450.000750")
    fake.set_members(g, list(DEMO_PRIVATE_MEMBERS))
    fake.add_canvas(
        DEMO_CANVAS,
        "Team handbook",
        "# Team handbook\n\n## On call\n\n- [x] Page ![](@U2147483698) for the migration\n"
        "- [ ] Update the runbook in ![](#C2147483705)\n\n| Day | Who |\n| --- | --- |\n| Mon | Ana |\n",
        channels=(c,),
        channel_canvas=True,
        updated=1_763_683_700,
    )
    fake.describe_channel(DEMO_DM, kind="im", user=DEMO_DM_USER)
    fake.post(DEMO_DM, "Can you send me the Q3 numbers?", user=DEMO_DM_USER, ts="1763683500.000800")
    _seed_second(fake)
    fake._clock = 1_763_684_000


def _seed_second(fake: FakeSlack) -> None:
    fake.add_team(DEMO_SECOND_TEAM_ID, DEMO_SECOND_TEAM_NAME, DEMO_SECOND_TOKEN, DEMO_SECOND_BOT_USER_ID)
    c = DEMO_SECOND_CHANNEL
    fake.post(
        c,
        "Lab notebook: the second team's channel",
        user="U07LABS0A1",
        ts="1763682500.000150",
        team_id=DEMO_SECOND_TEAM_ID,
    )
    fake.reply(
        c,
        "1763682500.000150",
        "Only this team's token can read it",
        user="U07LABS0A2",
        ts="1763682600.000160",
    )


class SlackDemoEdits:
    """The edits of ``POST /_demo/edit`` (:mod:`standins.demo_edits`) on the Slack stand-in:
    a ``message_changed`` example edits the message it names (``event.channel``,
    ``event.message.ts``) as a person editing it in Slack would: its text becomes the next
    edit's text (:class:`~standins.demo_edits.EditCounter`) and it gains ``edited`` (the
    stand-in's clock, :meth:`~standins.slack_api.FakeSlack.edit`). The webhook answered is the
    example with a new ``event_id``, and ``event_time``, ``event.ts``, ``event.message`` and
    ``event.previous_message`` of this edit, as Slack sends a ``message_changed`` event
    (https://docs.slack.dev/reference/events/message/message_changed)."""

    def __init__(self, fake: FakeSlack, counter: EditCounter | None = None) -> None:
        self.fake = fake
        self.counter = counter or EditCounter()

    def apply(self, envelope: Mapping[str, Any]) -> DemoEdit:
        """Apply the edit ``envelope`` describes; see the class.

        Raises:
            NotAnEdit: not a ``message_changed`` event.
            LookupError: the conversation or the message is not in the stand-in.
        """
        event = envelope.get("event")
        if not isinstance(event, dict) or event.get("subtype") != "message_changed":
            kind = event.get("subtype") or event.get("type") if isinstance(event, dict) else None
            raise NotAnEdit(f"a {kind!r} event edits no message")
        channel = str(event.get("channel", ""))
        named = event.get("message")
        ts = str(named.get("ts", "")) if isinstance(named, dict) else ""
        try:
            stored = {m["ts"]: m for m in self.fake.messages(channel)}
        except KeyError:
            raise LookupError(f"no conversation {channel!r} in the Slack stand-in") from None
        if ts not in stored:
            raise LookupError(f"no message {ts!r} in {channel} in the Slack stand-in")
        before = stored[ts]
        after, _ = self.counter.next_text(f"{channel}/{ts}", str(before.get("text", "")))
        self.fake.edit(channel, ts, after)
        (message,) = [m for m in self.fake.messages(channel) if m["ts"] == ts]
        edited_ts = str(message["edited"]["ts"])
        webhook = copy.deepcopy(dict(envelope))
        webhook.update(
            event_id="Ev" + secrets.token_hex(5).upper(), event_time=int(edited_ts.partition(".")[0])
        )
        webhook["event"] = {
            **event,
            "ts": edited_ts,
            "event_ts": edited_ts,
            "message": {
                k: message[k] for k in ("type", "user", "text", "ts", "edited", "thread_ts") if k in message
            },
            "previous_message": {
                k: before[k] for k in ("type", "user", "text", "ts", "thread_ts") if k in before
            },
        }
        return DemoEdit(
            f"edited message {ts} in {channel}: {before.get('text')!r} → {after!r}", after, webhook
        )
