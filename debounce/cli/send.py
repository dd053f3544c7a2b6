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
    """Headers that sign ``body`` the way ``source`` does (its :class:`~integrations.base.Source`
    ``sign``); ``timestamp`` in Unix seconds, default now, for sources that sign one.

    Raises:
        ValueError: unknown source, or a source that does not sign its webhooks.
    """
    spec = integrations.sources().get(source)
    if spec is None or spec.sign is None:
        raise ValueError(f"unknown source {source!r}, or it does not sign webhooks")
    return spec.sign(body, secret, timestamp)


def secret_for(settings: Settings, source: str) -> str:
    """The signing secret ``debounce send`` uses: the configured one, else the demo one.

    Raises:
        SystemExit: the source has neither.
    """
    spec = integrations.sources().get(source)
    secret = (spec.signing_secret(settings) or spec.demo_secret) if spec is not None else None
    if not secret:
        raise SystemExit(f"don't know how to sign for source {source!r}")
    return secret


async def send(source: str, files: list[str], url: str, secret: str | None,
               settings: Settings) -> int:
    """Post each of ``files`` (raw webhook bodies) to ``url``'s ``/webhooks/{source}``, signed
    with ``secret`` (default: :func:`secret_for`). Returns 0, or 1 if any was refused."""
    failures = 0
    key = secret or secret_for(settings, source)
    async with httpx.AsyncClient(timeout=10) as client:
        for file in files:
            body = await asyncio.to_thread(Path(file).read_bytes)
            target = f"{url.rstrip('/')}/webhooks/{source}"
            try:
                resp = await client.post(target, content=body, headers=sign_request(source, body, key))
            except httpx.HTTPError as exc:
                print(f"{file}: cannot reach {target}: {exc}", file=sys.stderr)
                return 1
            print(f"{file}: {resp.status_code} {resp.text}")
            failures += resp.status_code >= 300
    return 1 if failures else 0
