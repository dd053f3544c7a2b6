"""A stand-in for the hosts that serve the sources' files, as they behave (issue 39):

- ``/s3/{key}``: Notion-hosted files, as S3 presigned GET URLs (:meth:`FileHost.presign`) that
  expire (403 ``AccessDenied`` after ``X-Amz-Expires`` seconds from ``X-Amz-Date``) and answer
  HEAD with 403 (the signature covers the method);
- ``/files-pri/{team}-{id}/{name}``: Slack's ``url_private``: the file for a bearer token that
  has ``files:read``, and **200 with an HTML sign-in page** for anything else, as Slack does;
- ``/remote/{key}``: a third party's host (Slack remote files, Notion ``external`` files);
- ``/chunked/{key}``: a body without ``Content-Length`` (the cap must count the bytes);
  ``/redirect?to=URL``: a 302.

Every request's path and headers are kept in :attr:`FileHost.requests` for tests to read.
Time is a parameter (``now``) so expiry is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["AMZ_DATE", "SIGN_IN_PAGE", "FileHost"]

#: The form of ``X-Amz-Date`` (ISO 8601 basic, UTC), as AWS signs it.
AMZ_DATE = "%Y%m%dT%H%M%SZ"
#: What Slack answers ``url_private`` without a token that has ``files:read``.
SIGN_IN_PAGE = (
    "<!DOCTYPE html><html><head><title>Slack</title></head><body>"
    "<h1>Sign in to your workspace</h1></body></html>"
)


@dataclass
class FileHost:
    """The files served (key -> ``(bytes, media type)``), the tokens that may read Slack's
    private URLs, and a clock (``now``, seconds since the epoch)."""

    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    tokens_with_scope: set[str] = field(default_factory=set)
    now: Callable[[], float] = time.time
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    base_url: str = ""

    def add(self, key: str, data: bytes, media_type: str) -> None:
        """Serve ``data`` under ``key``."""
        self.files[key] = (data, media_type)

    def presign(self, key: str, *, expires_in: int = 3600, now: float | None = None) -> str:
        """A presigned GET URL of ``key``, valid ``expires_in`` seconds from ``now``."""
        signed_at = datetime.fromtimestamp(int(self.now() if now is None else now), UTC)
        stamp = signed_at.strftime(AMZ_DATE)
        return (
            f"{self.base_url}/s3/{key}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date={stamp}"
            f"&X-Amz-Expires={expires_in}&X-Amz-Signature=standin"
        )

    def _record(self, request: Request) -> None:
        self.requests.append((request.method, request.url.path, dict(request.headers)))

    async def _s3(self, request: Request) -> Response:
        self._record(request)
        if request.method != "GET":
            return PlainTextResponse("SignatureDoesNotMatch", status_code=403)
        params = request.query_params
        try:  # AWS's form, as Notion's URLs (and standins.notion_content.resign_files) carry it
            signed = datetime.strptime(params.get("X-Amz-Date", ""), AMZ_DATE).replace(tzinfo=UTC)
            expires = signed.timestamp() + int(params.get("X-Amz-Expires", "0"))
        except ValueError:
            return PlainTextResponse("AuthorizationQueryParametersError", status_code=400)
        if self.now() > expires:
            return PlainTextResponse("AccessDenied: Request has expired", status_code=403)
        return self._file(request.path_params["key"])

    def _file(self, key: str) -> Response:
        if key not in self.files:
            return PlainTextResponse("NoSuchKey", status_code=404)
        data, media_type = self.files[key]
        return Response(data, media_type=media_type)

    async def _private(self, request: Request) -> Response:
        self._record(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.tokens_with_scope:
            return HTMLResponse(SIGN_IN_PAGE)
        return self._file(request.path_params["file"])

    async def _remote(self, request: Request) -> Response:
        self._record(request)
        return self._file(request.path_params["key"])

    async def _chunked(self, request: Request) -> Response:
        self._record(request)
        data, media_type = self.files[request.path_params["key"]]

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(data), 65536):
                yield data[start : start + 65536]

        return StreamingResponse(chunks(), media_type=media_type)

    async def _redirect(self, request: Request) -> Response:
        self._record(request)
        return RedirectResponse(request.query_params["to"], status_code=302)

    def app(self) -> Any:
        """The ASGI app."""
        return Starlette(
            routes=[
                Route("/s3/{key:path}", self._s3, methods=["GET", "HEAD"]),
                Route("/files-pri/{file}/{name}", self._private),
                Route("/remote/{key:path}", self._remote),
                Route("/chunked/{key:path}", self._chunked),
                Route("/redirect", self._redirect),
            ]
        )
