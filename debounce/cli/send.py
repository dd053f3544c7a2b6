"""Signing webhook bodies the way each source signs them, and ``debounce send``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

import integrations
from debounce.config import Settings

__all__ = ["secret_for", "send", "sign_request"]


def sign_request(source: str, body: bytes, secret: str, *, timestamp: int | None = None) -> dict[str, str]:
    """Headers that sign ``body`` the way ``source`` does (its :class:`~debounce.contract.Source`
    ``sign``); ``timestamp`` in Unix seconds, default now, for sources that sign one.

    Raises:
        ValueError: unknown source, or a source that does not sign its webhooks.
    """
    spec = integrations.sources().get(source)
    if spec is None or spec.sign is None:
        raise ValueError(f"unknown source {source!r}, or it does not sign webhooks")
    return spec.sign(body, secret, timestamp)


def secret_for(settings: Settings, source: str, *, demo: bool = False) -> tuple[str, str]:
    """The signing secret ``debounce send`` uses and where it came from (for the operator):
    the configured one (named by its variable), else — only with ``demo`` — the demo one.

    Raises:
        SystemExit: one line: the source does not sign, or its secret is unset and ``demo``
            is false.
    """
    spec = integrations.sources().get(source)
    if spec is None or spec.sign is None:
        raise SystemExit(f"error: source {source!r} does not sign its webhooks")
    configured = spec.signing_secret(settings)
    if configured:
        return configured, spec.secret_env() or "the configured secret"
    if demo and spec.demo_secret:
        return spec.demo_secret, "the demo secret of `debounce serve --demo`"
    raise SystemExit(f"error: {spec.secret_env() or 'the signing secret'} is not set: set it, "
                     "pass --secret, or pass --demo to sign with the demo secret of "
                     "`debounce serve --demo`")


async def send(source: str, files: list[str], url: str, secret: str | None,
               settings: Settings, *, demo: bool = False) -> int:
    """Post each of ``files`` (raw webhook bodies) to ``url``'s ``/webhooks/{source}``, signed
    with ``secret`` (default: :func:`secret_for`; which one is said on stderr). Returns 0, or
    1 if any was refused or a file cannot be read."""
    failures = 0
    key, origin = (secret, "--secret") if secret else secret_for(settings, source, demo=demo)
    print(f"signing with {origin}", file=sys.stderr)
    async with httpx.AsyncClient(timeout=10) as client:
        for file in files:
            try:
                body = await asyncio.to_thread(Path(file).read_bytes)
            except OSError as exc:
                print(f"{file}: cannot read: {exc.strerror or exc}", file=sys.stderr)
                failures += 1
                continue
            target = f"{url.rstrip('/')}/webhooks/{source}"
            try:
                resp = await client.post(target, content=body, headers=sign_request(source, body, key))
            except httpx.HTTPError as exc:
                print(f"{file}: cannot reach {target}: {exc}", file=sys.stderr)
                return 1
            print(f"{file}: {resp.status_code} {resp.text}")
            failures += resp.status_code >= 300
    return 1 if failures else 0
