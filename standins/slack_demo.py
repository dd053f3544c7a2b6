"""The demo content of the Slack stand-in (:meth:`standins.slack_api.FakeSlack.demo`), for
``debounce serve --demo``, ``debounce standins`` and the tests that use it.

Two teams: the default one (the constructor's token) with the conversation of
``examples/slack`` (a public channel), a private channel of three members
(:data:`DEMO_PRIVATE_MEMBERS`) and a DM between the bot and a person
(:data:`DEMO_DM`), and a second one, :data:`DEMO_SECOND_TEAM_ID` (bot
token :data:`DEMO_SECOND_TOKEN`), with :data:`DEMO_SECOND_CHANNEL`, so a multi-workspace
deployment can connect both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from standins.slack_api import FakeSlack

__all__ = [
    "DEMO_DM",
    "DEMO_DM_USER",
    "DEMO_PRIVATE",
    "DEMO_PRIVATE_MEMBERS",
    "DEMO_SECOND_BOT_USER_ID",
    "DEMO_SECOND_CHANNEL",
    "DEMO_SECOND_TEAM_ID",
    "DEMO_SECOND_TEAM_NAME",
    "DEMO_SECOND_TOKEN",
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


def seed_demo(fake: FakeSlack) -> None:
    """Fill ``fake``'s default team and add and fill the second one."""
    c = "C2147483705"
    fake.post(
        c,
        "Standup notes for Thursday:\n• API latency back to normal\n• <@U2147483698> owns "
        "the migration",
        user="U2147483699",
        ts="1763682000.000100",
    )
    fake.post(c, "Hello world", user="U2147483697", ts="1763682934.000200")
    fake.reply(
        c, "1763682934.000200", "Replying in the thread", user="U2147483698",
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
    fake.post(c, "Release 2.4 is cut, QA starts tomorrow", user="U2147483699",
              ts="1763683350.000650")
    fake.reply(c, "1763683350.000650", "I'll take the Android pass", user="U2147483698",
               ts="1763683360.000660")
    g = DEMO_PRIVATE
    fake.post(g, "In a private channel", user="U2147483697", ts="1763683400.000700")
    fake.post(g, "Budget review moved to Friday", user="U2147483698", ts="1763683450.000750")
    fake.set_members(g, list(DEMO_PRIVATE_MEMBERS))
    fake.describe_channel(DEMO_DM, kind="im", user=DEMO_DM_USER)
    fake.post(DEMO_DM, "Can you send me the Q3 numbers?", user=DEMO_DM_USER,
              ts="1763683500.000800")
    _seed_second(fake)
    fake._clock = 1_763_684_000


def _seed_second(fake: FakeSlack) -> None:
    fake.add_team(DEMO_SECOND_TEAM_ID, DEMO_SECOND_TEAM_NAME, DEMO_SECOND_TOKEN,
                  DEMO_SECOND_BOT_USER_ID)
    c = DEMO_SECOND_CHANNEL
    fake.post(c, "Lab notebook: the second team's channel", user="U07LABS0A1",
              ts="1763682500.000150", team_id=DEMO_SECOND_TEAM_ID)
    fake.reply(c, "1763682500.000150", "Only this team's token can read it", user="U07LABS0A2",
               ts="1763682600.000160")
