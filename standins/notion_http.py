"""HTTP plumbing shared by the modules of the Notion stand-in: ids, error bodies, faults.

Errors of the REST API are ``{"object": "error", "status": int, "code": str, "message": str,
"request_id": str}`` (https://developers.notion.com/reference/status-codes); the OAuth token
endpoint answers in the OAuth 2.0 shape instead (see :mod:`standins.notion_workspaces`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

__all__ = [
    "DEFAULT_CODES",
    "DEFAULT_MESSAGES",
    "DEFAULT_TIME",
    "DEFAULT_USER",
    "Fault",
    "compact",
    "error_response",
    "norm_id",
    "not_found",
    "take_fault",
]

#: The person who created and last edited the objects built without saying otherwise, and when.
DEFAULT_USER = "c7c11cca-1d73-471d-9b6e-bdef51470190"
DEFAULT_TIME = "2026-11-20T23:55:00.000Z"

#: Default ``code`` of an injected fault per HTTP status
#: (https://developers.notion.com/reference/status-codes).
DEFAULT_CODES: dict[int, str] = {
    400: "validation_error",
    401: "unauthorized",
    403: "restricted_resource",
    404: "object_not_found",
    409: "conflict_error",
    429: "rate_limited",
    500: "internal_server_error",
    503: "service_unavailable",
    504: "gateway_timeout",
}
#: Notion's messages for those codes.
DEFAULT_MESSAGES: dict[str, str] = {
    "validation_error": "body failed validation.",
    "unauthorized": "API token is invalid.",
    "restricted_resource": "Insufficient permissions for this endpoint.",
    "object_not_found": (
        "Could not find object. Make sure the relevant pages and databases are shared with your integration."
    ),
    "conflict_error": "Conflict occurred while saving. Please try again.",
    "rate_limited": "You have been rate limited. Please try again in a few minutes.",
    "internal_server_error": "Unexpected error occurred.",
    "service_unavailable": "Notion is unavailable, please try again later.",
    "gateway_timeout": "Notion timed out while processing the request.",
}


@dataclass
class Fault:
    """An injected answer for the next ``remaining`` requests to ``endpoint`` (``"*"``: any)
    about ``object_id`` (``None``: any object).

    ``status`` is the HTTP status; ``code``/``message`` the Notion error body; ``headers``
    extra response headers (``Retry-After`` for a 429). A status of 502 answers a non-JSON
    gateway page, as a proxy in front of Notion does.
    """

    endpoint: str
    status: int
    code: str
    message: str
    remaining: int
    object_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        endpoint: str,
        status: int,
        times: int,
        code: str | None,
        message: str | None,
        retry_after: float | str | None,
        object_id: str | None,
    ) -> Fault:
        """A fault whose ``code`` and ``message`` default from ``status`` and whose
        ``retry_after`` (seconds, or an HTTP date) becomes a ``Retry-After`` header."""
        resolved = code or DEFAULT_CODES.get(status, "internal_server_error")
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        return cls(
            endpoint=endpoint,
            status=status,
            code=resolved,
            message=message or DEFAULT_MESSAGES.get(resolved, "Unexpected error occurred."),
            remaining=times,
            object_id=object_id or None,
            headers=headers,
        )


def take_fault(faults: list[Fault], endpoint: str, object_id: str) -> Fault | None:
    """The first pending fault of ``faults`` for ``endpoint`` and ``object_id``, counted down
    (and dropped when spent); ``None`` if none applies."""
    for fault in faults:
        if fault.endpoint not in ("*", endpoint):
            continue
        if fault.object_id is not None and fault.object_id != object_id:
            continue
        fault.remaining -= 1
        if fault.remaining <= 0:
            faults.remove(fault)
        return fault
    return None


def norm_id(raw: str) -> str | None:
    """Canonical dashed lower-case form of a Notion id (dashed or compact), or ``None``."""
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def compact(object_id: str) -> str:
    """A Notion id without dashes, as in ``notion.so`` URLs."""
    return object_id.replace("-", "")


def error_response(
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    additional_data: Mapping[str, Any] | None = None,
) -> Response:
    """A Notion error answer (with a fresh ``request_id``); ``additional_data`` is the
    error's optional details object (a 429's ``rate_limit_reason``,
    https://developers.notion.com/reference/request-limits)."""
    body: dict[str, Any] = {
        "object": "error",
        "status": status,
        "code": code,
        "message": message,
        "request_id": str(uuid.uuid4()),
    }
    if additional_data is not None:
        body["additional_data"] = dict(additional_data)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def not_found(object_id: str) -> Response:
    """404 ``object_not_found``, as Notion answers for an object that does not exist *or is
    not shared with the token's integration* (another workspace's page looks the same)."""
    return error_response(
        404,
        "object_not_found",
        f"Could not find object with ID: {object_id}. Make sure the relevant pages and "
        "databases are shared with your integration.",
    )
