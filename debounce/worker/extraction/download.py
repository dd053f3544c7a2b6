"""Downloading a file safely: the size cap on the bytes, the token only to the source's hosts,
nothing from outside unless the operator allows the host — and never from a private address.

- **Size**: the body is streamed to a file and counted; past ``max_bytes`` the download stops
  (a declared ``Content-Length`` over the cap stops it before the body; a lying or absent one
  changes nothing). Notion's presigned URLs answer 403 to HEAD (the method is signed), so the
  GET's own length is the only size there is.
- **Tokens**: a bearer token goes only to https ``slack.com``, ``slack-gov.com`` and their
  subdomains (Slack: a remote file's URL "can point to any host. Don't send Slack tokens or
  cookies to it", files.remote.info; slack-go GHSA-3q3v-34v2-g88f), plus hosts the caller names
  (the configured API host of a stand-in). Redirects are followed by hand, at most
  :data:`MAX_REDIRECTS`, each hop checked again; the token is dropped on a hop it may not take.
- **External files** (a Notion ``external`` file, a Slack remote file): fetched only when the
  operator allows the host (:attr:`FetchPolicy.external_hosts`, off by default), and then only
  from public addresses: the resolver refuses a name that resolves to a loopback, private,
  link-local, multicast or reserved address (checked on the addresses connected to, so a DNS
  answer cannot change between the check and the connection), and an IP literal is checked
  before anything is sent.
- **Sign-in pages**: Slack answers ``url_private`` without the ``files:read`` scope with 200
  and an HTML sign-in page; an HTML answer where a file of another type was expected is the
  workspace's missing scope, not a document.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from debounce.worker.extraction.limits import ExtractionFailed, megabytes

__all__ = [
    "MAX_REDIRECTS",
    "TOKEN_DOMAINS",
    "Downloaded",
    "FetchPolicy",
    "download",
    "external_allowed",
    "token_allowed",
]

#: The domains (and their subdomains) a Slack token may be sent to, over https only.
TOKEN_DOMAINS = ("slack.com", "slack-gov.com")
#: Redirects followed, each checked like the first request.
MAX_REDIRECTS = 5
_CHUNK = 256 * 1024


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def _within(host: str, domains: tuple[str, ...] | frozenset[str]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def external_allowed(url: str, policy: FetchPolicy) -> bool:
    """Whether an external file at ``url`` may be downloaded at all: its host is one of
    ``policy.external_hosts`` or their subdomains (the download still refuses an address that
    is not public, after DNS resolution)."""
    return _within(_host(url), policy.external_hosts)


def token_allowed(url: str, extra_hosts: frozenset[str] = frozenset()) -> bool:
    """Whether a bearer token may be sent to ``url``: https on :data:`TOKEN_DOMAINS` or a
    subdomain, or a host of ``extra_hosts`` (exact ``host`` or ``host:port``; any scheme: the
    stand-ins on loopback)."""
    parts = urlsplit(url)
    host = _host(url)
    if parts.netloc.lower() in extra_hosts or host in extra_hosts:
        return True
    return parts.scheme == "https" and _within(host, TOKEN_DOMAINS)


def _public(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class _PublicOnly(AbstractResolver):
    """A resolver that answers only with public addresses, refusing a name with any other."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()
        #: Why the last name was refused (aiohttp wraps the error and drops its text).
        self.refused = ""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        refused = [a["host"] for a in answers if not _public(a["host"])]
        if refused:
            self.refused = f"refused: {host} resolves to a non-public address ({refused[0]})"
            raise OSError(self.refused)
        return answers

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True)
class FetchPolicy:
    """What a download may do. ``max_bytes``: the cap on the body (bytes). ``external_hosts``:
    hosts (and their subdomains) an external file may come from (empty: none; the operator's
    setting). ``token_hosts``: hosts a token may go to besides :data:`TOKEN_DOMAINS`
    (``host`` or ``host:port``). ``timeout_seconds``: the whole download's wall clock."""

    max_bytes: int
    external_hosts: frozenset[str] = frozenset()
    token_hosts: frozenset[str] = frozenset()
    timeout_seconds: float = 60.0


@dataclass(frozen=True)
class Downloaded:
    """A file on disk: ``size`` (bytes), ``sha256`` (hex, of the bytes: the content's
    identity, whatever URL served it), ``media_type`` (the answer's ``Content-Type`` without
    parameters; ``""`` when absent)."""

    path: str
    size: int
    sha256: str
    media_type: str


def _refuse(reason: str) -> ExtractionFailed:
    return ExtractionFailed("refused", reason)


async def download(
    url: str,
    path: str,
    policy: FetchPolicy,
    *,
    token: str | None = None,
    external: bool = False,
    expect_html: bool = False,
) -> Downloaded:
    """GET ``url`` into the file ``path`` within ``policy``.

    ``token``: a bearer token for the source's own hosts (never sent elsewhere). ``external``:
    the URL is a third party's (allowed hosts only, public addresses only). ``expect_html``:
    the file is an HTML document (otherwise an HTML answer is a sign-in page).

    Raises:
        ExtractionFailed: ``refused`` (a host not allowed, a non-public address, a token that
            would leave the source's hosts, too many redirects), ``too_large`` (declared or
            counted), ``missing_scope`` (a sign-in page: the token lacks ``files:read``),
            ``download_failed`` (an HTTP error status, a connection error, the timeout).
            ``path`` is removed on any failure.
    """
    try:
        return await _download(url, path, policy, token, external, expect_html)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        raise


def _check_hop(url: str, policy: FetchPolicy, external: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise _refuse(f"refused: {parts.scheme or 'no'} scheme in a file URL")
    if not external:
        return
    host = _host(url)
    if not _within(host, policy.external_hosts):
        raise _refuse(f"refused: external host {host} is not allowed")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return  # a name: the resolver checks what it resolves to
    if not _public(host.strip("[]")):
        raise _refuse(f"refused: {host} is not a public address")


async def _download(
    url: str, path: str, policy: FetchPolicy, token: str | None, external: bool, expect_html: bool
) -> Downloaded:
    resolver = _PublicOnly()
    connector = aiohttp.TCPConnector(resolver=resolver) if external else aiohttp.TCPConnector()
    timeout = aiohttp.ClientTimeout(total=policy.timeout_seconds)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for hop in range(MAX_REDIRECTS + 1):
            _check_hop(url, policy, external)
            headers: dict[str, str] = {}
            if token is not None:
                if token_allowed(url, policy.token_hosts):
                    headers["Authorization"] = f"Bearer {token}"
                elif hop == 0:  # a redirect elsewhere goes on without the token
                    raise _refuse(f"refused: the workspace token is never sent to {_host(url)}")
            try:
                async with session.get(url, headers=headers, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                        url = urljoin(url, response.headers["Location"])
                        continue
                    return await _body(response, url, path, policy, expect_html)
            except ExtractionFailed:
                raise
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                if resolver.refused:
                    raise _refuse(resolver.refused) from None
                reason = f"download failed: {type(exc).__name__}: {exc}"
                raise ExtractionFailed("download_failed", reason) from None
        raise _refuse(f"refused: more than {MAX_REDIRECTS} redirects")


async def _body(
    response: aiohttp.ClientResponse, url: str, path: str, policy: FetchPolicy, expect_html: bool
) -> Downloaded:
    if response.status != 200:
        reason = f"download failed: HTTP {response.status} from {_host(url)}"
        raise ExtractionFailed("download_failed", reason)
    media_type = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if media_type == "text/html" and not expect_html:
        raise ExtractionFailed(
            "missing_scope", "a sign-in page where a file was expected: the token lacks the files:read scope"
        )
    declared = response.content_length
    if declared is not None and declared > policy.max_bytes:
        limit = megabytes(policy.max_bytes)
        raise ExtractionFailed("too_large", f"too large: {megabytes(declared)} > {limit} (declared)")
    digest = hashlib.sha256()
    size = 0
    f = await asyncio.to_thread(open, path, "wb")
    try:
        async for chunk in response.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if size > policy.max_bytes:
                raise ExtractionFailed("too_large", f"too large: over {megabytes(policy.max_bytes)}")
            digest.update(chunk)
            await asyncio.to_thread(f.write, chunk)
    finally:
        await asyncio.to_thread(f.close)
    return Downloaded(path=path, size=size, sha256=digest.hexdigest(), media_type=media_type)
