"""Load generator (its own process): signed Slack and Notion webhooks at fixed concurrency.

``python -m bench.loadgen --url http://127.0.0.1:PORT --events N --pages P --concurrency C``
sends N webhooks shaped like ``examples/notion/page.content_updated.json`` and
``examples/slack/message.json`` — every one with a unique event id — over P pages (even page
numbers are Notion pages, odd ones Slack channels; ``--hot`` sends every event to one Notion
page), signed with ``debounce.cli.sign_request``. Bodies and signatures are prepared before the
clock starts. Prints one JSON object: requests/s, latency percentiles (ms), non-2xx count.
Bounded: N requests at most, and ``--deadline`` seconds of wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from debounce.cli import sign_request

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTION_SECRET = "bench-notion-secret"
SLACK_SECRET = "bench-slack-signing-secret"


def notion_page_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def slack_channel(i: int) -> str:
    return f"CBENCH{i:06d}"


class Bodies:
    def __init__(self) -> None:
        self.notion = json.loads((EXAMPLES / "notion" / "page.content_updated.json").read_text())
        self.slack = json.loads((EXAMPLES / "slack" / "message.json").read_text())

    def notion_event(self, page: str) -> tuple[str, bytes]:
        body = dict(self.notion, id=str(uuid.uuid4()), entity={"id": page, "type": "page"})
        return "notion", json.dumps(body).encode()

    def slack_event(self, channel: str) -> tuple[str, bytes]:
        ev = dict(self.slack["event"], channel=channel, client_msg_id=str(uuid.uuid4()))
        body = dict(self.slack, event=ev, event_id="Ev" + uuid.uuid4().hex[:16].upper())
        return "slack", json.dumps(body).encode()

    def make(self, i: int, pages: int, hot: bool) -> tuple[str, bytes, dict[str, str]]:
        if hot:
            source, body = self.notion_event(notion_page_id(0))
        else:
            page = i % pages
            source, body = (
                self.notion_event(notion_page_id(page))
                if page % 2 == 0
                else self.slack_event(slack_channel(page))
            )
        secret = NOTION_SECRET if source == "notion" else SLACK_SECRET
        return source, body, sign_request(source, body, secret)


class _AiohttpClient:
    """The subset of httpx.AsyncClient used here, on aiohttp (a cheaper client per request)."""

    def __init__(self, base_url: str, concurrency: int) -> None:
        import aiohttp

        self.base_url = base_url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency), timeout=aiohttp.ClientTimeout(total=10)
        )

    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> Any:
        async with self.session.post(self.base_url + path, data=content, headers=headers) as resp:
            await resp.read()
            return type("R", (), {"status_code": resp.status})()

    async def get(self, path: str) -> Any:
        async with self.session.get(self.base_url + path) as resp:
            await resp.read()
            return type("R", (), {"status_code": resp.status})()

    async def __aenter__(self) -> _AiohttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()


async def run(
    url: str,
    events: int,
    pages: int,
    concurrency: int,
    hot: bool,
    warmup: int,
    deadline: float,
    client_kind: str = "httpx",
    trivial: str | None = None,
) -> dict[str, Any]:
    bodies = Bodies()
    warm = [bodies.make(i, pages, False) for i in range(warmup)]
    work = [bodies.make(i, pages, hot) for i in range(events)]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    import aiohttp

    client_cm: Any = (
        httpx.AsyncClient(base_url=url, limits=limits, timeout=10.0)
        if client_kind == "httpx"
        else _AiohttpClient(url, concurrency)
    )
    async with client_cm as client:

        async def drain(items: list[tuple[str, bytes, dict[str, str]]], record: bool, stop_at: float) -> None:
            it = iter(items)

            async def one_client() -> None:
                for source, body, headers in it:
                    if time.monotonic() > stop_at:
                        return
                    t0 = time.perf_counter()
                    try:
                        if trivial is not None:  # the same client's cost on a route doing nothing
                            resp = await client.get(trivial)
                        else:
                            resp = await client.post(f"/webhooks/{source}", content=body, headers=headers)
                        code = resp.status_code
                    except (httpx.HTTPError, aiohttp.ClientError, TimeoutError) as exc:
                        errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                        continue
                    if record:
                        latencies.append((time.perf_counter() - t0) * 1000)
                        statuses[code] = statuses.get(code, 0) + 1

            await asyncio.gather(*(one_client() for _ in range(concurrency)))

        await drain(warm, False, time.monotonic() + 30)
        started = time.perf_counter()
        await drain(work, True, time.monotonic() + deadline)
        elapsed = time.perf_counter() - started
    lat = sorted(latencies)

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 2) if lat else float("nan")

    sent = len(latencies)
    return {
        "requests": sent,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(sent / elapsed, 1) if elapsed else 0.0,
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": round(lat[-1], 2) if lat else float("nan"),
        "non_2xx": sum(n for code, n in statuses.items() if not 200 <= code < 300),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "client_errors": errors,
        "unsent": events - sent - sum(errors.values()),
        "client": client_kind,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments every load generator takes (this one and ``bench.wrkload``)."""
    p.add_argument("--url", required=True)
    p.add_argument("--events", type=int, required=True)
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--hot", action="store_true")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--deadline", type=float, default=120.0)
    p.add_argument(
        "--trivial",
        metavar="PATH",
        help="GET PATH instead of posting webhooks (a route that does nothing: the "
        "server's and the client's own cost per request)",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen")
    add_arguments(p)
    p.add_argument(
        "--client",
        choices=["httpx", "aiohttp"],
        default="httpx",
        help="HTTP client (httpx: the reference; aiohttp: cheaper per request, to see "
        "past the client's own CPU cost on a small machine)",
    )
    a = p.parse_args(argv)
    if not a.url.startswith(("http://127.0.0.1", "http://localhost")):
        raise SystemExit("loopback only")
    result = asyncio.run(
        run(a.url, a.events, a.pages, a.concurrency, a.hot, a.warmup, a.deadline, a.client, a.trivial)
    )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
