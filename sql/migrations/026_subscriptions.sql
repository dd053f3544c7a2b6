-- 026: push delivery (issue 40, point 1): subscriptions, each an endpoint that receives the
-- change feed in feed order, in batches, signed per Standard Webhooks (docs/consumers.md,
-- "Push delivery"). One row per endpoint holds everything its deliverer needs, so a worker
-- that takes the subscription over after a crash resumes exactly where the last one stood:
--
-- after_xid/after_seq  the feed position delivered up to (the cursor of the next batch; NULL:
--                     from the oldest change retained), in
--   epoch             the database cluster the position belongs to (debounce.documents.feed)
-- batch_*             the batch in flight (NULL: none): its webhook-id, its exact body (each
--                     retry sends the same bytes under the same id) and the position after it;
--                     the cursor moves there only after a 2xx, and only for the lease holder
-- attempts, next_attempt_at, failing_since   the retry schedule of the batch in flight
-- lease_*             the one deliverer at a time (a worker process): a token that fences
--                     every write of the deliverer, and until when it holds
-- workspace_id        a filter, not a reference: removing a workspace leaves its
--                     subscriptions (they then match nothing new)
create table subscriptions (
    id                    bigint generated always as identity primary key,
    url                   text        not null check (url ~ '^https?://'),
    description           text        not null default '',
    source_type           text,
    workspace_id          bigint,
    kinds                 text[]      not null default '{}'
                              check (kinds <@ array['upsert', 'delete']::text[]),
    full_content          boolean     not null default false,
    secret                text        not null check (secret like 'whsec_%'),
    previous_secret       text        check (previous_secret like 'whsec_%'),
    previous_secret_until timestamptz,
    status                text        not null default 'active'
                              check (status in ('active', 'disabled')),
    disabled_reason       text,
    disabled_at           timestamptz,
    epoch                 text,
    after_xid             xid8,
    after_seq             bigint,
    batch_id              text,
    batch_body            text,
    batch_xid             xid8,
    batch_seq             bigint,
    batch_changes         integer,
    attempts              integer     not null default 0,
    next_attempt_at       timestamptz not null default now(),
    failing_since         timestamptz,
    last_status           integer,
    last_error            text,
    last_attempt_at       timestamptz,
    last_success_at       timestamptz,
    delivered_changes     bigint      not null default 0,
    delivered_batches     bigint      not null default 0,
    lease_token           uuid,
    leased_by             text,
    lease_until           timestamptz,
    created_at            timestamptz not null default now(),
    check ((batch_id is null) = (batch_body is null) and (batch_id is null) = (batch_xid is null)),
    -- no infinity in a time column (psycopg cannot load one; tests/test_liveness.py)
    constraint subscriptions_times_finite check (
        isfinite(previous_secret_until) and isfinite(disabled_at) and isfinite(next_attempt_at)
        and isfinite(failing_since) and isfinite(last_attempt_at) and isfinite(last_success_at)
        and isfinite(lease_until) and isfinite(created_at))
);

-- The deliverers' look for a subscription to take: active ones, by lease expiry.
create index subscriptions_to_lease on subscriptions (lease_until) where status = 'active';
