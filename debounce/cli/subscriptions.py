"""``debounce subscriptions ...``: push delivery's endpoints (docs/consumers.md, "Push
delivery"): ``add URL`` (prints the secret, once), ``list``, ``show ID``, ``rotate ID``,
``disable ID``, ``enable ID``, ``replay ID --from X``, ``remove ID``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from debounce import delivery, registry
from debounce.cli.errors import fail
from debounce.config import Settings
from debounce.documents.kinds import DOCUMENT_KINDS

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add ``subscriptions`` and its actions to the ``debounce`` parser's subcommands."""
    text = "push delivery: endpoints that receive the change feed, signed (Standard Webhooks)"
    p = sub.add_parser("subscriptions", help=text, description=text)
    acts = p.add_subparsers(dest="subscription_command", required=True, metavar="ACTION")
    sp = acts.add_parser(
        "add",
        help="register an endpoint; prints its secret (shown once)",
        description="Register an endpoint that receives the change feed in "
        "feed order, in batches; prints its id and its secret (whsec_…, "
        "shown this once: the receiver verifies with it).",
    )
    sp.add_argument("url", help="the endpoint (http or https)")
    sp.add_argument("--source", choices=registry.source_types(), help="only this source")
    sp.add_argument("--workspace", type=int, metavar="ID", help="only this workspace")
    sp.add_argument(
        "--kinds",
        default="",
        help=f"only these kinds of change, comma-separated ({', '.join(delivery.KINDS)}; default every kind)",
    )
    sp.add_argument(
        "--document-kinds",
        default="",
        help="only the changes of these kinds of document, comma-separated "
        f"({', '.join(DOCUMENT_KINDS)}; default every kind)",
    )
    sp.add_argument(
        "--full-content",
        action="store_true",
        help="send each document's title, url and content with its change (when "
        "it fits the 20 kB body); default thin (ids, kinds, hashes, cursor)",
    )
    sp.add_argument("--description", default="", help="a note for the operator")
    sp.add_argument(
        "--from",
        dest="start",
        default="head",
        metavar="START",
        help="head (the changes written from now on; default), oldest (every "
        "change retained) or a feed cursor",
    )
    sp = acts.add_parser("list", help="every subscription: status, lag, last answer")
    sp.add_argument("--json", action="store_true", help="JSON with every field")
    for name, what in (
        ("show", "one subscription (JSON)"),
        ("disable", "stop delivering (the position is kept)"),
        ("enable", "deliver again from where it stopped"),
        ("remove", "remove the subscription"),
    ):
        sp = acts.add_parser(name, help=what, description=what)
        sp.add_argument("id", type=int)
    sp = acts.add_parser(
        "rotate", help="a new secret (printed once); the current one signs too during the overlap"
    )
    sp.add_argument("id", type=int)
    sp.add_argument(
        "--overlap-seconds",
        type=float,
        default=86400.0,
        help="how long the current secret keeps signing (default a day)",
    )
    sp = acts.add_parser("replay", help="deliver again from a position")
    sp.add_argument("id", type=int)
    sp.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="START",
        help="head, oldest or a feed cursor (a change's `cursor`)",
    )


def _line(s: delivery.Subscription) -> str:
    state = s.status if s.status == "active" else f"disabled ({s.disabled_reason})"
    lag = f"{s.lag_changes}{'+' if s.lag_changes > 10000 else ''} changes, {s.lag_seconds:.1f} s"
    last = f"last answer {s.last_status or s.last_error or '-'}" + (
        f", {s.attempts} failed attempts, next {s.next_attempt_at.isoformat()}" if s.attempts else ""
    )
    return f"{s.id}  {s.url}  {state}  lag {lag}  delivered {s.delivered_changes}  {last}"


async def run(args: argparse.Namespace, settings: Settings, pool: Any) -> int:
    """Run ``debounce subscriptions ACTION``; returns the exit code."""
    action = args.subscription_command
    try:
        if action == "add":
            start = await delivery.parse_start(pool, args.start)
            kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
            document_kinds = [k.strip() for k in args.document_kinds.split(",") if k.strip()]
            sub, secret = await delivery.create(
                pool,
                args.url,
                start=start,
                source_type=args.source,
                workspace_id=args.workspace,
                kinds=kinds,
                document_kinds=document_kinds,
                full_content=args.full_content,
                description=args.description,
            )
            print(f"subscription {sub.id}: {sub.url}")
            print(f"secret: {secret}")
            print("(shown this once: the receiver verifies each delivery with it)")
            return 0
        if action == "list":
            subs = await delivery.list_subscriptions(pool)
            if args.json:
                print(json.dumps([s.to_json() for s in subs], indent=2))
            elif not subs:
                print("no subscriptions (add one: debounce subscriptions add URL)")
            for s in subs if not args.json else ():
                print(_line(s))
            return 0
        if action == "show":
            print(json.dumps((await delivery.get(pool, args.id)).to_json(), indent=2))
            return 0
        if action == "rotate":
            sub, secret = await delivery.rotate(pool, args.id, args.overlap_seconds)
            print(f"subscription {sub.id}: new secret: {secret}")
            print(f"(the previous secret signs too until {sub.previous_secret_until})")
            return 0
        if action == "replay":
            sub = await delivery.replay(pool, args.id, await delivery.parse_start(pool, args.start))
        elif action == "disable":
            sub = await delivery.disable(pool, args.id)
        elif action == "enable":
            sub = await delivery.enable(pool, args.id)
        else:
            await delivery.remove(pool, args.id)
            print(f"subscription {args.id} removed")
            return 0
    except delivery.SubscriptionNotFound as exc:
        return fail(str(exc))
    except ValueError as exc:
        return fail(str(exc), 2)
    print(_line(sub))
    return 0
