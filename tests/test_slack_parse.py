"""Parse half of the Slack integration: signature checks and event mapping (no I/O).

Signatures are computed here independently of slack_sdk, following
https://docs.slack.dev/authentication/verifying-requests-from-slack:
``v0=`` + hex HMAC-SHA256 of ``v0:<timestamp>:<raw body>`` keyed by the signing secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import Headers

from debounce import registry
from debounce.config import Settings
from debounce.contract import Syncer, WebhookError, WebhookResult
from integrations.slack import SlackSettings, SlackSyncer, SlackWebhooks

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "slack"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_763_683_600


def sign(body: bytes, ts: int | str = NOW, secret: str = SECRET) -> dict[str, str]:
    """Headers Slack would send with ``body`` at Unix time ``ts``."""
    base = f"v0:{ts}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": f"v0={digest}",
    }


def slack(**settings: Any) -> SlackWebhooks:
    values: dict[str, Any] = {"slack_signing_secret": SECRET}
    values.update(settings)
    return SlackWebhooks(SlackSettings(**values), clock=lambda: float(NOW))


def example(name: str) -> bytes:
    return (EXAMPLES / f"{name}.json").read_bytes()


def refused(parser: SlackWebhooks, headers: dict[str, str], body: bytes) -> WebhookError:
    with pytest.raises(WebhookError) as info:
        parser.parse_webhook(headers, body)
    return info.value


# --------------------------------------------------------------------------- examples

MESSAGE_EXAMPLES = {
    "message": ("C2147483705", "Ev0PV52K21"),
    "thread_reply": ("C2147483705", "Ev0PV52K22"),
    "message_changed": ("C2147483705", "Ev0PV52K23"),
    "message_deleted": ("C2147483705", "Ev0PV52K24"),
    "bot_message": ("C2147483705", "Ev0PV52K25"),
    "private_channel_message": ("G0PRIVATE1", "Ev0PV52K26"),
}


def test_every_example_is_covered() -> None:
    names = {p.stem for p in EXAMPLES.glob("*.json")}
    assert names == set(MESSAGE_EXAMPLES) | {
        "url_verification",
        "reaction_added",
        "app_rate_limited",
        "member_joined_channel",
        "member_left_channel",
        "file_change",
    }


def test_the_canvas_example_is_a_canvas_job() -> None:
    body = example("file_change")
    result = slack().parse_webhook(sign(body), body)
    assert [(e.source_page_id, e.event_id) for e in result.events] == [("canvas:F0DEMOCANVAS1", "Ev0PV52K41")]


@pytest.mark.parametrize("name", sorted(MESSAGE_EXAMPLES))
def test_message_examples_become_one_event_for_the_channel(name: str) -> None:
    body = example(name)
    result = slack().parse_webhook(sign(body), body)
    channel, event_id = MESSAGE_EXAMPLES[name]
    assert len(result.events) == 1
    event = result.events[0]
    assert event.source_page_id == channel
    assert event.event_id == event_id
    assert event.payload == json.loads(body)
    assert result.reply is None and result.warning is None


def test_url_verification_answers_the_challenge() -> None:
    body = example("url_verification")
    result = slack().parse_webhook(sign(body), body)
    assert result.reply == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert result.events == []


def test_reaction_added_is_acknowledged_and_ignored() -> None:
    body = example("reaction_added")
    result = slack().parse_webhook(sign(body), body)
    assert result.events == []
    assert result.note == "ignored event type reaction_added"


def test_app_rate_limited_is_a_warning_without_events() -> None:
    body = example("app_rate_limited")
    result = slack().parse_webhook(sign(body), body)
    assert result.events == []
    assert result.warning is not None and "T061EG9R6" in result.warning
    assert "app_rate_limited" in result.warning
    assert result.note == "app_rate_limited"


@pytest.mark.parametrize("subtype", ["channel_join", "channel_leave", "group_join", "bot_add", "pinned_item"])
def test_system_notices_without_content_are_acknowledged_without_a_job(subtype: str) -> None:
    envelope = json.loads(example("message"))
    envelope["event"].update(subtype=subtype, text="<@U2147483697> has joined the channel")
    body = json.dumps(envelope).encode()
    result = slack().parse_webhook(sign(body), body)
    assert result.events == []
    assert result.note == f"ignored message subtype {subtype} (no content)"


@pytest.mark.parametrize("subtype", ["channel_topic", "channel_purpose", "channel_name"])
def test_topic_purpose_and_name_changes_are_content(subtype: str) -> None:
    envelope = json.loads(example("message"))
    envelope["event"].update(subtype=subtype, text="<@U2147483697> set the channel topic: QA")
    body = json.dumps(envelope).encode()
    assert len(slack().parse_webhook(sign(body), body).events) == 1


def test_retry_delivery_has_the_same_event_id() -> None:
    body = example("message")
    parser = slack()
    first = parser.parse_webhook(sign(body), body)
    retry_headers = {
        **sign(body, NOW + 4),
        "X-Slack-Retry-Num": "1",
        "X-Slack-Retry-Reason": "http_timeout",
    }
    retry = parser.parse_webhook(retry_headers, body)
    assert [e.event_id for e in retry.events] == [e.event_id for e in first.events] == ["Ev0PV52K21"]


def test_starlette_headers_and_lower_case_dicts_work() -> None:
    body = example("message")
    headers = sign(body)
    assert slack().parse_webhook(Headers(headers), body).events
    assert slack().parse_webhook({k.lower(): v for k, v in headers.items()}, body).events


# --------------------------------------------------------------------------- our own bot


def test_bot_message_of_another_bot_is_content() -> None:
    body = example("bot_message")
    assert slack(slack_bot_user_id="B0OTHER").parse_webhook(sign(body), body).events


def test_our_own_bot_id_from_settings_is_ignored() -> None:
    body = example("bot_message")
    result = slack(slack_bot_user_id="B0BOTID01").parse_webhook(sign(body), body)
    assert result.events == []
    assert result.note is not None and "own bot" in result.note


def test_a_message_by_the_installed_bot_user_is_ignored() -> None:
    envelope = json.loads(example("message"))
    envelope["event"]["user"] = "U0BOTUSER"  # authorizations[0].user_id, is_bot: true
    body = json.dumps(envelope).encode()
    result = slack().parse_webhook(sign(body), body)
    assert result.events == []
    assert result.note is not None and "U0BOTUSER" in result.note


def test_an_edit_of_our_own_message_is_ignored() -> None:
    envelope = json.loads(example("message_changed"))
    envelope["event"]["message"]["user"] = "U0OURBOT"
    body = json.dumps(envelope).encode()
    assert slack(slack_bot_user_id="U0OURBOT").parse_webhook(sign(body), body).events == []


# --------------------------------------------------------------------------- refusals


def test_unset_secret_is_503_naming_the_variable() -> None:
    body = example("message")
    parser = SlackWebhooks(SlackSettings(), clock=lambda: float(NOW))
    err = refused(parser, sign(body), body)
    assert (err.status, err.error) == (503, "not_configured")
    assert "SLACK_SIGNING_SECRET" in err.detail


def test_forged_signature_is_401() -> None:
    body = example("message")
    err = refused(slack(), sign(body, secret="not-the-secret"), body)
    assert (err.status, err.error) == (401, "invalid_signature")


def test_tampered_body_is_401() -> None:
    body = example("message")
    headers = sign(body)
    err = refused(slack(), headers, body.replace(b"Hello world", b"Hello w0rld"))
    assert (err.status, err.error) == (401, "invalid_signature")


def test_missing_signature_is_401() -> None:
    body = example("message")
    headers = sign(body)
    del headers["X-Slack-Signature"]
    err = refused(slack(), headers, body)
    assert (err.status, err.error) == (401, "missing_signature")


def test_missing_timestamp_is_401() -> None:
    body = example("message")
    headers = sign(body)
    del headers["X-Slack-Request-Timestamp"]
    err = refused(slack(), headers, body)
    assert (err.status, err.error) == (401, "missing_timestamp")


@pytest.mark.parametrize("offset", [-360, 360])
def test_stale_timestamp_is_401_even_when_correctly_signed(offset: int) -> None:
    body = example("message")
    err = refused(slack(), sign(body, NOW + offset), body)
    assert (err.status, err.error) == (401, "stale_timestamp")


def test_just_inside_the_window_is_accepted() -> None:
    body = example("message")
    assert slack().parse_webhook(sign(body, NOW - 299), body).events


@pytest.mark.parametrize("stamp", ["yesterday", "", "1.5e9", "17636836OO"])
def test_non_numeric_timestamp_is_401(stamp: str) -> None:
    body = example("message")
    headers = sign(body, stamp)
    err = refused(slack(), headers, body)
    assert err.status == 401
    assert err.error in ("invalid_timestamp", "missing_timestamp")


def test_non_utf8_body_is_401_not_a_crash() -> None:
    body = b"\xff\xfe{}"
    err = refused(slack(), sign(body), body)
    assert err.status == 401


def test_non_json_body_is_400_after_the_signature() -> None:
    body = b"token=abc&challenge=def"
    err = refused(slack(), sign(body), body)
    assert (err.status, err.error) == (400, "malformed_body")
    assert "JSON" in err.detail
    # unsigned garbage is refused as unsigned, not as malformed
    assert refused(slack(), {}, body).status == 401


def test_json_that_is_not_an_object_is_400() -> None:
    body = b'["event_callback"]'
    err = refused(slack(), sign(body), body)
    assert (err.status, err.error) == (400, "malformed_body")
    assert "object" in err.detail


@pytest.mark.parametrize(
    ("path", "field"),
    [(("event",), "event"), (("event_id",), "event_id"), (("event", "channel"), "channel")],
)
def test_event_callback_missing_a_field_is_400_naming_it(path: tuple[str, ...], field: str) -> None:
    envelope = json.loads(example("message"))
    target = envelope
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    body = json.dumps(envelope).encode()
    err = refused(slack(), sign(body), body)
    assert (err.status, err.error) == (400, "malformed_body")
    assert field in err.detail


def test_unknown_envelope_type_is_acknowledged() -> None:
    body = b'{"type": "something_new"}'
    result = slack().parse_webhook(sign(body), body)
    assert result == WebhookResult(note="ignored envelope type something_new")


# --------------------------------------------------------------------------- registry, speed


def test_registry_finds_the_slack_source() -> None:
    syncer = registry.create("slack", Settings(slack_signing_secret=SECRET))
    assert isinstance(syncer, SlackSyncer)
    assert isinstance(syncer, Syncer)
    assert syncer.source_type == "slack"
    assert "slack" in registry.source_types()


def test_parsing_is_fast() -> None:
    body = example("thread_reply")
    headers = sign(body)
    parser = slack()
    start = time.perf_counter()
    for _ in range(500):
        parser.parse_webhook(headers, body)
    assert (time.perf_counter() - start) / 500 < 0.005  # far inside Slack's 3 s
