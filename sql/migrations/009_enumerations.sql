-- 009: backfill and reconciliation. An enumeration walks what a workspace's token can see
-- (Notion search, Slack users.conversations) and enqueues bulk jobs (priority < 0) for what
-- is missing or stale. Its cursor and counts live here, so an enumeration interrupted by a
-- deploy continues where it stopped; a lease gives it to one worker at a time.
create table enumerations (
    id               bigint generated always as identity primary key,
    workspace_id     bigint      not null references workspaces (id) on delete cascade,
    source_type      text        not null,
    -- backfill: the whole listing (on connect, `debounce backfill`, POST …/backfill);
    -- reconcile: newest first down to the previous sweep's watermark; full_reconcile: the
    -- whole listing, to find what vanished (deletions), on a longer period.
    kind             text        not null check (kind in ('backfill', 'reconcile', 'full_reconcile')),
    status           text        not null default 'running'
                     check (status in ('running', 'done', 'failed', 'cancelled')),
    cursor           text,                     -- the listing's next page; NULL: the first
    listing_pages    integer     not null default 0,
    discovered       integer     not null default 0,   -- items listed
    enqueued         integer     not null default 0,   -- bulk jobs created
    current          integer     not null default 0,   -- skipped: the document is current
    active           integer     not null default 0,   -- skipped: the page had a job already
    rechecks         integer     not null default 0,   -- vanished documents re-checked
    watermark        timestamptz,              -- reconcile: stop below this last edit time
    newest_seen      timestamptz,              -- the newest last edit time listed
    error            text,
    not_before       timestamptz not null default now(),   -- a 429 or a dry budget: wait
    lease_owner      text,
    lease_expires_at timestamptz,
    started_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    finished_at      timestamptz
);

-- One running enumeration per workspace.
create unique index enumerations_running on enumerations (workspace_id) where status = 'running';
create index enumerations_workspace on enumerations (workspace_id, id desc);

-- Reconciliation per workspace: NULL reconcile = the source's default (Notion on, Slack off).
alter table workspaces add column reconcile           boolean;
alter table workspaces add column reconcile_watermark timestamptz;   -- newest edit of the last sweep
alter table workspaces add column reconciled_at       timestamptz;   -- last sweep finished
alter table workspaces add column full_reconciled_at  timestamptz;   -- last whole-listing sweep

-- When a whole listing last showed this document's page: a document its workspace's complete
-- enumeration no longer lists is re-checked once (deletions).
alter table documents add column listed_at timestamptz;
