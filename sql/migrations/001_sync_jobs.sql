-- 001: the debounced job queue.
-- One row per sync of one external page. At most one *active* (pending or processing) row per
-- page, enforced by the partial unique index below; completed and failed rows are history and
-- sit outside that index, so a page whose last job failed can always get a fresh one.

create table sync_jobs (
    id               bigint generated always as identity primary key,
    source_type      text        not null check (source_type <> ''),
    source_page_id   text        not null check (source_page_id <> ''),
    status           text        not null default 'pending'
                     check (status in ('pending', 'processing', 'completed', 'failed')),
    payload          jsonb       not null default '{}'::jsonb,   -- the latest event
    event_id         text,                                        -- the latest event's id
    event_count      integer     not null default 1 check (event_count >= 0),
    priority         integer     not null default 0,
    attempts         integer     not null default 0 check (attempts >= 0),
    max_attempts     integer     not null default 5 check (max_attempts >= 1),
    scheduled_at     timestamptz not null,                        -- due time
    first_event_at   timestamptz not null,                        -- first event of this burst
    max_wait_until   timestamptz not null,                        -- first_event_at + max wait
    retry_at         timestamptz,                                 -- set while waiting out a backoff
    lease_expires_at timestamptz,
    locked_by        text,
    lease_token      uuid,                                        -- identifies one claim
    revision         bigint      not null default 0,              -- bumped by every accepted event
    claimed_revision bigint,                                      -- revision the running sync covers
    last_error       text,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    finished_at      timestamptz,
    check ((status = 'processing') = (lease_token is not null))
);

-- One active job per page. INSERT ... ON CONFLICT must restate this predicate to infer it.
create unique index sync_jobs_active_page
    on sync_jobs (source_type, source_page_id)
    where status in ('pending', 'processing');

-- The claim: due pending rows, highest priority first, then oldest scheduled_at.
create index sync_jobs_claim
    on sync_jobs (priority desc, scheduled_at)
    where status = 'pending';

-- Expired leases of dead workers.
create index sync_jobs_lease
    on sync_jobs (lease_expires_at)
    where status = 'processing';

-- Pruning of finished rows and inspection by state.
create index sync_jobs_finished
    on sync_jobs (finished_at)
    where status in ('completed', 'failed');

-- Idempotency: every accepted event id, kept for a retention (queue.prune).
create table seen_events (
    source_type text        not null,
    event_id    text        not null,
    seen_at     timestamptz not null default now(),
    primary key (source_type, event_id)
);

create index seen_events_seen_at on seen_events (seen_at);

-- The worker's "when is the next job due" question (min(scheduled_at) of pending rows).
create index sync_jobs_due
    on sync_jobs (scheduled_at)
    where status = 'pending';
