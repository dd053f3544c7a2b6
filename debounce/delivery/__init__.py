"""Push delivery (issue 40, docs/consumers.md "Push delivery"): subscriptions, each an endpoint
that receives the change feed in feed order, in batches, signed per Standard Webhooks.

:mod:`.subscriptions` (the operator's side: register, rotate, disable, enable, replay, and
each one's lag), :mod:`.deliverer` (the worker's side: one deliverer per subscription at a
time, leased in Postgres), :mod:`.payload` (a batch's body), :mod:`.schedule` (retries) and
:mod:`.signing` (secrets and signatures); their SQL is ``sql/queries/delivery.sql``.
"""

from debounce.delivery.subscriptions import (
    KINDS,
    Start,
    Subscription,
    SubscriptionNotFound,
    create,
    disable,
    enable,
    get,
    list_subscriptions,
    parse_start,
    remove,
    replay,
    rotate,
)

__all__ = [
    "KINDS",
    "Start",
    "Subscription",
    "SubscriptionNotFound",
    "create",
    "disable",
    "enable",
    "get",
    "list_subscriptions",
    "parse_start",
    "remove",
    "replay",
    "rotate",
]
