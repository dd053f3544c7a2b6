-- 008: API budgets shared by every worker process, fair claims, and checkpoints of syncs that
-- yield their slot.
--
-- A workspace's budget is a token bucket (debounce/workspaces/budgets.py, sql/queries/budgets.sql): burst =
-- capacity, per_minute = refill rate. NULL budget_per_minute / budget_burst: the source's
-- default (<SOURCE>_BUDGET_PER_MINUTE, <SOURCE>_BUDGET_BURST). The bucket is refilled lazily
-- from the database clock by the statement that charges it: budget_tokens is its level at
-- budget_refilled_at (NULL: full).
alter table workspaces add column budget_per_minute  float8 check (budget_per_minute >= 0);
alter table workspaces add column budget_burst       float8 check (budget_burst >= 1);
alter table workspaces add column budget_tokens      float8;
alter table workspaces add column budget_refilled_at timestamptz;

-- The responses a sync had received when it yielded its slot (budget exhausted, 429):
-- {"revision": n, "responses": {...}}, served back to the resumed sync of the same revision.
alter table sync_jobs add column checkpoint jsonb;

-- The fair claim walks each workspace's due jobs (live before bulk: priority desc), and the
-- jobs of no workspace on their own.
create index sync_jobs_claim_workspace
    on sync_jobs (workspace_id, priority desc, scheduled_at)
    where status = 'pending';
create index sync_jobs_claim_unowned
    on sync_jobs (source_type, priority desc, scheduled_at)
    where status = 'pending' and workspace_id is null;
