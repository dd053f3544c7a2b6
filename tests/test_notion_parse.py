"""The parse half of the Notion integration: signatures, the verification handshake, and the
mapping of every example in ``examples/notion`` to its job key. No I/O, no database."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import Headers

from debounce import registry
from debounce.config import Settings
from debounce.contract import PageEvent, Syncer, WebhookError
from integrations.notion import NotionSettings, NotionSyncer, NotionWebhooks, create, normalize_id

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "notion"
SECRET = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"  # examples/notion/verification.json
PAGE = "153104cd-477e-809d-8dc4-ff2d96ae3090"
DATABASE = "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e1f"


def sign(body: bytes, secret: str = SECRET) -> dict[str, str]:
    """Headers Notion sends: ``X-Notion-Signature: sha256=<hex HMAC-SHA256(body, secret)>``."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"x-notion-signature": f"sha256={digest}", "content-type": "application/json"}


def example(name: str) -> bytes:
    return (EXAMPLES / name).read_bytes()


@pytest.fixture
def notion() -> NotionWebhooks:
    return NotionWebhooks(NotionSettings(notion_webhook_secret=SECRET))


@pytest.mark.parametrize(
    ("name", "page_id", "kinds"),
    [
        # what each event says changed (docs/notion.md, "Which event asks for what")
        ("page.created.json", PAGE, ()),
        ("page.content_updated.json", PAGE, ("content",)),
        ("page.properties_updated.json", PAGE, ("properties",)),
        ("page.deleted.json", PAGE, ("properties",)),
        ("page.undeleted.json", PAGE, ()),
        ("comment.created.json", PAGE, ("comments",)),  # data.page_id, not the comment's id
        ("database.schema_updated.json", DATABASE, ()),
        ("data_source.content_updated.json", "2a8f94f2-3b1e-4c1d-9f6a-7e2b5c3d4e20", ("rows",)),
    ],
)
def test_examples_map_to_their_page(
    notion: NotionWebhooks, name: str, page_id: str, kinds: tuple[str, ...]
) -> None:
    body = example(name)
    event = json.loads(body)
    result = notion.parse_webhook(sign(body), body)
    assert result.events == [
        PageEvent(source_page_id=page_id, event_id=event["id"], payload=event, kinds=kinds)
    ]
    assert result.verification_token is None


@pytest.mark.parametrize(
    ("event_type", "kinds"),
    [
        ("page.content_updated", ("content",)),
        ("page.properties_updated", ("properties",)),
        ("page.moved", ()),
        ("page.created", ()),
        ("page.undeleted", ()),
        ("page.deleted", ("properties",)),
        ("page.locked", ("properties",)),
        ("page.unlocked", ("properties",)),
        ("page.transcript_deleted", ("content",)),
        ("page.something_new", ()),
        ("data_source.schema_updated", ()),
        ("data_source.content_updated", ("rows",)),
    ],
)
def test_each_event_type_says_what_changed(
    notion: NotionWebhooks, event_type: str, kinds: tuple[str, ...]
) -> None:
    event = {
        "id": "e-1",
        "type": event_type,
        "timestamp": "2026-11-20T23:55:34.285Z",
        "entity": {"id": PAGE, "type": event_type.split(".")[0]},
    }
    body = json.dumps(event).encode()
    assert notion.parse_webhook(sign(body), body).events[0].kinds == kinds


def test_every_example_is_covered() -> None:
    names = {p.name for p in EXAMPLES.glob("*.json")}
    assert names == {
        "comment.created.json",
        "data_source.content_updated.json",
        "database.schema_updated.json",
        "file_upload.completed.json",
        "page.content_updated.json",
        "page.created.json",
        "page.deleted.json",
        "page.properties_updated.json",
        "page.undeleted.json",
        "verification.json",
    }


def test_file_upload_is_acknowledged_and_ignored(notion: NotionWebhooks) -> None:
    body = example("file_upload.completed.json")
    result = notion.parse_webhook(sign(body), body)
    assert result.events == []
    assert result.note == "ignored event type file_upload.completed"


def test_verification_request_needs_no_signature_before_a_secret_exists() -> None:
    notion = NotionWebhooks(NotionSettings(notion_webhook_secret=None))
    result = notion.parse_webhook({}, example("verification.json"))
    assert result.verification_token == SECRET
    assert result.note == "verification request"
    assert result.events == []


def test_unsigned_verification_request_is_refused_once_a_secret_is_set(
    notion: NotionWebhooks,
) -> None:
    """Issue 16, case 5: after setup anyone could send a handshake; it must be signed."""
    body = example("verification.json")
    with pytest.raises(WebhookError) as refused:
        notion.parse_webhook({}, body)
    assert refused.value.status == 401
    forged = json.dumps({"verification_token": "secret_attacker0000000000000000"}).encode()
    with pytest.raises(WebhookError):
        notion.parse_webhook(sign(forged, "wrong-secret"), forged)
    assert notion.parse_webhook(sign(body), body).verification_token == SECRET


@pytest.mark.parametrize(
    "token",
    [
        "secret_x\nWARNING forged line",
        "secret_\u0000nul0000000000000",
        "not-a-secret-at-all",
        "secret_" + "a" * 500,
    ],
)
def test_verification_tokens_that_do_not_look_like_notions_are_400(token: str) -> None:
    notion = NotionWebhooks(NotionSettings(notion_webhook_secret=None))
    body = json.dumps({"verification_token": token}).encode()
    with pytest.raises(WebhookError) as refused:
        notion.parse_webhook({}, body)
    assert refused.value.status == 400


def test_signature_header_is_case_insensitive(notion: NotionWebhooks) -> None:
    body = example("page.created.json")
    digest = sign(body)["x-notion-signature"]
    assert notion.parse_webhook(Headers({"X-Notion-Signature": digest}), body).events
    assert notion.parse_webhook({"X-Notion-Signature": digest}, body).events
    upper = "sha256=" + digest.removeprefix("sha256=").upper()
    assert notion.parse_webhook({"x-notion-signature": upper}, body).events


def refused(notion: NotionWebhooks, headers: dict[str, str], body: bytes) -> WebhookError:
    with pytest.raises(WebhookError) as info:
        notion.parse_webhook(headers, body)
    return info.value


def test_forged_signature_is_401(notion: NotionWebhooks) -> None:
    body = example("page.created.json")
    err = refused(notion, sign(body, "secret_not_the_right_one"), body)
    assert (err.status, err.error) == (401, "invalid_signature")
    # A valid signature of another body does not carry over.
    err = refused(notion, sign(example("page.deleted.json")), body)
    assert err.status == 401


@pytest.mark.parametrize("value", ["", "sha256=", "md5=abc", "deadbeef", "sha256=zz\u00e9"])
def test_missing_or_malformed_signature_is_401(notion: NotionWebhooks, value: str) -> None:
    body = example("page.created.json")
    headers = {"x-notion-signature": value} if value else {}
    err = refused(notion, headers, body)
    assert (err.status, err.error) == (401, "invalid_signature")


def test_unset_secret_is_503_naming_the_variable() -> None:
    notion = NotionWebhooks(NotionSettings(notion_webhook_secret=None))
    body = example("page.created.json")
    err = refused(notion, sign(body), body)
    assert (err.status, err.error) == (503, "not_configured")
    assert "NOTION_WEBHOOK_SECRET" in err.detail


def test_signature_is_checked_before_the_body_is_trusted(notion: NotionWebhooks) -> None:
    err = refused(notion, {}, b"not json")
    assert err.status == 401


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"not json", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"page.created"', "JSON object"),
        (b"[" * 100_000, "JSON"),
    ],
)
def test_malformed_body_with_valid_signature_is_400(notion: NotionWebhooks, body: bytes, needle: str) -> None:
    err = refused(notion, sign(body), body)
    assert (err.status, err.error) == (400, "malformed_body")
    assert needle in err.detail


def mutated(name: str, **changes: Any) -> bytes:
    event = json.loads(example(name))
    for key, value in changes.items():
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return json.dumps(event).encode()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (mutated("page.created.json", entity=None), "'entity'"),
        (mutated("page.created.json", entity={"type": "page"}), "'entity.id'"),
        (mutated("page.created.json", entity={"id": "", "type": "page"}), "'entity.id'"),
        (mutated("database.schema_updated.json", entity=[]), "'entity'"),
        (mutated("page.created.json", type=None), "'type'"),
        (mutated("page.created.json", type=7), "'type'"),
        (mutated("page.created.json", id=None), "'id'"),
        (mutated("comment.created.json", data={}), "'data.page_id'"),
    ],
)
def test_unusable_event_is_400_naming_the_field(notion: NotionWebhooks, body: bytes, needle: str) -> None:
    err = refused(notion, sign(body), body)
    assert (err.status, err.error) == (400, "malformed_body")
    assert needle in err.detail


def test_verification_shape_inside_an_event_is_not_a_handshake(notion: NotionWebhooks) -> None:
    # An event that also carries "verification_token" must still be signed.
    body = mutated("page.created.json", verification_token="secret_x")
    assert refused(notion, {}, body).status == 401
    assert notion.parse_webhook(sign(body), body).events


@pytest.mark.parametrize(
    "event_type",
    [
        "page.moved",
        "page.locked",
        "page.unlocked",
        "data_source.schema_updated",
        "database.deleted",
    ],
)
def test_other_entity_events_key_on_entity_id(notion: NotionWebhooks, event_type: str) -> None:
    body = mutated("page.created.json", type=event_type)
    [event] = notion.parse_webhook(sign(body), body).events
    assert event.source_page_id == PAGE


def test_ids_are_normalized_to_dashed_lower_case(notion: NotionWebhooks) -> None:
    body = mutated("page.created.json", entity={"id": PAGE.replace("-", "").upper(), "type": "page"})
    [event] = notion.parse_webhook(sign(body), body).events
    assert event.source_page_id == PAGE
    assert normalize_id(" 153104CD477E809D8DC4FF2D96AE3090 ") == PAGE
    assert normalize_id("not-a-uuid") == "not-a-uuid"


def test_registry_finds_the_notion_source() -> None:
    syncer = create(NotionSettings())
    assert syncer.source_type == "notion"
    assert isinstance(syncer, Syncer)

    assert "notion" in registry.source_types()
    assert isinstance(registry.create("notion", Settings()), NotionSyncer)
