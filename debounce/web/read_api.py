"""The read API for consumers: the change feed and the documents (docs/consumers.md).

``GET /documents/changes``, ``GET /documents`` and ``GET /documents/{source}/{document_id}``
start with :func:`require_reader`: ``Authorization: Bearer`` with ``DEBOUNCE_READ_TOKEN`` (or the
admin token, which may read too); 401 without it, 503 while neither token is configured. The
read token opens nothing else (the admin routes check the admin token only). Errors are
:class:`~debounce.web.errors.ApiError` (``{"error", "detail"}``), except the feed's 410, which
also carries the cursor to follow from.
"""

from __future__ import annotations

import hmac
import math
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from debounce.documents import audiences, feed, kinds, reads
from debounce.documents.feed_listen import read_waiting
from debounce.web.admin_api import int_param
from debounce.web.errors import ApiError
from debounce.web.inputs import source_param
from debounce.web.state import WebState, web_state

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_DOCUMENTS",
    "MAX_WAIT_SECONDS",
    "changes",
    "document_json",
    "get_document",
    "list_documents",
    "require_reader",
    "served_by",
]


#: Longest long-poll of ``GET /documents/changes`` (``wait``), seconds.
MAX_WAIT_SECONDS = 60.0
#: Default ``limit`` of the feed and of the listing.
DEFAULT_LIMIT = 100
#: Largest ``limit`` of the listing (each document carries its content).
MAX_DOCUMENTS = 500


def _bearer(request: Request) -> bytes | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip().encode("utf-8", "replace") if scheme.lower() == "bearer" else None


def require_reader(request: Request) -> WebState:
    """The app's state, if ``request`` carries the read token or the admin token.

    Raises:
        ApiError: 503 ``reads_disabled`` when neither ``DEBOUNCE_READ_TOKEN`` nor
            ``DEBOUNCE_ADMIN_TOKEN`` is set; 401 ``unauthorized`` when the bearer token is
            missing or is neither.
    """
    state = web_state(request)
    tokens = [t for t in (state.settings.read_token, state.settings.admin_token) if t]
    if not tokens:
        raise ApiError(
            503,
            "reads_disabled",
            "document reads are disabled: set DEBOUNCE_READ_TOKEN and send 'Authorization: Bearer <token>'",
        )
    given = _bearer(request)
    # Compare with every token, so the time taken does not say which one nearly matched.
    matched = [given is not None and hmac.compare_digest(given, t.encode()) for t in tokens]
    if not any(matched):
        raise ApiError(401, "unauthorized", _who_may_read(state), headers={"WWW-Authenticate": "Bearer"})
    return state


def _who_may_read(state: WebState) -> str:
    """The 401's detail: which tokens may read (by their variables, never their values)."""
    settings = state.settings
    if settings.read_token and settings.admin_token:
        which = "the read token (DEBOUNCE_READ_TOKEN) or the admin token (DEBOUNCE_ADMIN_TOKEN)"
    elif settings.read_token:
        which = "the read token (DEBOUNCE_READ_TOKEN)"
    else:
        which = (
            "the admin token (DEBOUNCE_ADMIN_TOKEN); DEBOUNCE_READ_TOKEN, unset here, "
            "sets a token that may read and nothing else"
        )
    return f"missing or wrong token: reads take {which} as 'Authorization: Bearer <token>'"


def _source(state: WebState, raw: str | None) -> str | None:
    return source_param(state.parsers, raw, code="bad_request") if raw else None


def _kind(raw: str | None) -> str | None:
    """The ``kind`` parameter: a kind of document (:mod:`debounce.documents.kinds`), or none.

    Raises:
        ApiError: 400 ``bad_request`` naming the kinds there are.
    """
    try:
        return kinds.check_kind(raw)
    except kinds.UnknownKind as exc:
        raise ApiError(
            400,
            "bad_request",
            f"kind must be a kind of document: one of {', '.join(exc.allowed)}; got {exc.given[:80]!r}",
        ) from None


def _limit(raw: str | None, maximum: int) -> int:
    limit = int_param(raw, "limit", DEFAULT_LIMIT)
    assert limit is not None
    if not 1 <= limit <= maximum:
        raise ApiError(400, "bad_request", f"limit must be between 1 and {maximum}")
    return limit


def _wait(raw: str | None) -> float:
    if raw is None or raw == "":
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        wait = math.nan
    if not 0 <= wait <= MAX_WAIT_SECONDS:  # NaN fails too
        raise ApiError(400, "bad_request", f"wait must be seconds between 0 and {MAX_WAIT_SECONDS:g}")
    return wait


def _cursor(raw: str | None) -> feed.Cursor | None:
    if raw is None or raw == "":
        return None
    try:
        return feed.Cursor.decode(raw)
    except feed.CursorError as exc:
        raise ApiError(
            400,
            "bad_request",
            f"{exc}: pass a cursor this feed returned, or no "
            "'after' to start from the oldest retained change",
        ) from None


async def changes(request: Request) -> Response:
    """``GET /documents/changes?after=&limit=&wait=&source=&workspace_id=&kind=``: changes in
    feed order, ``{"changes": [...], "next": cursor}``, each with its document's ``kind``
    (``kind=`` keeps one kind of document; its ``op`` is the kind of change); with ``wait`` (seconds, at most
    :data:`MAX_WAIT_SECONDS`) it long-polls until a change comes, or until the wait or
    ``DEBOUNCE_FEED_MAX_WAIT_SECONDS``, whichever is shorter, is up. 410 ``cursor_gone`` with
    ``cursor`` (the head) when ``after`` cannot be followed."""
    state = require_reader(request)
    params = request.query_params
    after = _cursor(params.get("after"))
    limit = _limit(params.get("limit"), feed.MAX_LIMIT)
    # held at most DEBOUNCE_FEED_MAX_WAIT_SECONDS: within the idle limit of a platform's router
    wait = min(_wait(params.get("wait")), state.settings.feed_max_wait_seconds)
    source_type = _source(state, params.get("source"))
    workspace_id = int_param(params.get("workspace_id"), "workspace_id")
    document_kind = _kind(params.get("kind"))
    try:
        page = await read_waiting(
            state.read_db,
            state.feed_signal(),
            after,
            limit,
            wait,
            source_type=source_type,
            workspace_id=workspace_id,
            document_kind=document_kind,
            primary=state.primary_if_replica,
        )
    except feed.CursorGone as gone:
        return JSONResponse(
            {
                "error": "cursor_gone",
                "detail": gone.explain(),
                "reason": gone.reason,
                "cursor": gone.head.encode(),
            },
            status_code=410,
        )
    return JSONResponse(
        {"changes": [c.to_json() for c in page.changes], "next": page.next.encode()}, headers=served_by(page)
    )


def served_by(page: feed.FeedPage) -> dict[str, str]:
    """The feed answer's headers: which kind of server answered (``Debounce-Served-By``:
    ``primary`` or ``standby``), its replay lag (``Debounce-Replica-Lag-Seconds``) and, when
    it had not replayed the cursor's transaction yet, ``Debounce-Behind: 1``."""
    headers = {
        "Debounce-Served-By": "standby" if page.standby else "primary",
        "Debounce-Replica-Lag-Seconds": f"{page.replica_lag:.3f}",
    }
    if page.behind:
        headers["Debounce-Behind"] = "1"
    return headers


def document_json(row: Any) -> dict[str, Any]:
    """A ``documents`` row as the read API's JSON object (``updated_at``/``deleted_at`` ISO
    8601 UTC, ``deleted_at`` null unless the document is a tombstone; ``kind``: its kind of
    document, :mod:`debounce.documents.kinds`; ``sections``: its sections,
    :mod:`debounce.documents.sections`, null when not cut yet)."""
    return {
        "source": row["source_type"],
        "document_id": row["document_id"],
        "kind": row["kind"],
        "source_page_id": row["source_page_id"],
        "workspace_id": row["workspace_id"],
        "title": row["title"],
        "url": row["url"],
        "content": row["content"],
        "content_sha256": row["content_sha256"],
        "metadata": row["metadata"],
        "updated_at": row["updated_at"].isoformat(),
        "deleted_at": row["deleted_at"].isoformat() if row["deleted_at"] else None,
        "audience": audiences.audience_json(row),
        "sections": row["sections"],
    }


def _listing_filters(state: WebState, request: Request) -> dict[str, Any]:
    """The listing's filters as the query's parameters (``None``: any)."""
    params = request.query_params
    raw_after = params.get("updated_after")
    updated_after = None
    if raw_after:
        try:
            updated_after = datetime.fromisoformat(raw_after)
        except ValueError:
            updated_after = None
        if updated_after is None or updated_after.tzinfo is None:
            raise ApiError(
                400,
                "bad_request",
                "updated_after must be an ISO 8601 time with its offset, e.g. 2026-11-24T12:00:00+00:00",
            )
    filters = {
        "source_type": _source(state, params.get("source")),
        "workspace_id": int_param(params.get("workspace_id"), "workspace_id"),
        "updated_after": updated_after,
        "visible_to": params.get("visible_to") or None,
        "document_kind": _kind(params.get("kind")),
    }
    if filters["visible_to"] is not None:
        if filters["workspace_id"] is None:
            raise ApiError(
                400,
                "bad_request",
                "visible_to needs workspace_id: the "
                "workspace_id of the documents (as GET /documents?source=slack "
                "shows it) whose user it names",
            )
        # Only a source whose documents carry audiences (Source.audiences) can say who reads
        # them; with no source given, the one such source registered.
        with_audiences = sorted(state.audience_sources)
        source = filters["source_type"]
        if source is None and len(with_audiences) == 1:
            source = with_audiences[0]
        if source not in with_audiences:
            raise ApiError(
                400,
                "bad_request",
                "visible_to names a user of a source whose "
                "documents carry their audience (source="
                f"{' or '.join(with_audiences) or 'none registered'})",
            )
        filters["source_type"] = source
    return filters


def _listing_cursor(raw: str | None) -> int:
    """The listing's ``cursor``: a ``next_cursor`` of an earlier answer (the text of a whole
    number, the last document's row id), or none."""
    try:
        after_id = int_param(raw, "cursor", 0)
    except ApiError:
        raise ApiError(
            400,
            "bad_request",
            "cursor must be the next_cursor of an earlier "
            "answer of GET /documents, passed back unchanged (or none to start "
            "from the first document)",
        ) from None
    assert after_id is not None
    return after_id


async def list_documents(request: Request) -> Response:
    """``GET /documents?source=&workspace_id=&updated_after=&kind=&visible_to=&cursor=&limit=``:
    documents in id order with their content, kind and audience (``kind``: one kind of
    document, :mod:`debounce.documents.kinds`), deleted ones included
    (``deleted_at`` set), ``{"documents": [...], "next_cursor": text or null}`` (null: no
    more). ``visible_to`` (a user id of a source whose documents carry audiences — Slack —
    with ``workspace_id``): only that source's documents the user may read
    (``debounce.documents.audiences.list_visible``)."""
    state = require_reader(request)
    filters = _listing_filters(state, request)
    limit = _limit(request.query_params.get("limit"), MAX_DOCUMENTS)
    after_id = _listing_cursor(request.query_params.get("cursor"))
    if filters["visible_to"] is not None:
        rows = await audiences.list_visible(
            state.read_db,
            source_type=filters["source_type"],
            workspace_id=filters["workspace_id"],
            user_id=filters["visible_to"],
            after_id=after_id,
            limit=limit,
            include_deleted=True,
            updated_after=filters["updated_after"],
            document_kind=filters["document_kind"],
        )
    else:
        rows = await reads.list_documents(
            state.read_db,
            after_id=after_id,
            limit=limit,
            source_type=filters["source_type"],
            workspace_id=filters["workspace_id"],
            updated_after=filters["updated_after"],
            document_kind=filters["document_kind"],
        )
    next_cursor = str(rows[-1]["id"]) if len(rows) == limit else None
    return JSONResponse({"documents": [document_json(r) for r in rows], "next_cursor": next_cursor})


async def get_document(request: Request) -> Response:
    """``GET /documents/{source}/{document_id}``: one document (the id may contain ``/``, raw
    or as ``%2F``) with its ``sections`` (:mod:`debounce.documents.sections`: ``id``, ``path``,
    ``start``/``end`` character offsets, ``sha256``; ``null``: not cut yet); 404 when there is
    none."""
    state = require_reader(request)
    source = source_param(state.parsers, request.path_params["source"])
    document_id = request.path_params["document_id"]
    row = await reads.get_document(state.read_db, source, document_id)
    if row is None:
        raise ApiError(404, "not_found", f"no {source} document {document_id[:200]!r}")
    return JSONResponse({"document": document_json(row)})
