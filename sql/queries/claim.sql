-- The claim, the idle worker's "when could I claim next", and the line's repair. What the claim
-- guarantees, the data it reads and why each piece exists: docs/claim.md. The choice itself is
-- the function claim_jobs (migration 019, as sql/schema.sql shows it). %(now)s is a
-- timestamptz or NULL (the database's clock); tests pass it to control time.

-- claim --
-- Claim up to %(limit)s due jobs for worker %(worker_id)s (docs/claim.md): %(sources)s text[]
-- with %(source_slots)s int[] (at most that many jobs of each source); the sources' budget defaults
-- as parallel arrays %(budget_sources)s text[], %(budget_per_minutes)s float8[] (NULL:
-- unmetered), %(budget_bursts)s float8[], %(budget_costs)s float8[] (requests of one sync);
-- at most %(workspace_concurrency)s syncs in flight per workspace. claim_jobs chooses, locks and marks
-- the jobs (processing, a lease of %(lease_seconds)s, attempts + 1, the revision the sync
-- covers); each row is the job with what its sync needs of its workspace (NULL for a job of
-- no workspace).
select (c.job).*, c.ws_status, c.ws_origin, c.ws_external_id, c.ws_bot_user_id,
       c.ws_credentials
  from claim_jobs(%(now)s::timestamptz, %(worker_id)s::text, %(lease_seconds)s::float8,
                  %(limit)s::int, %(sources)s::text[], %(source_slots)s::int[],
                  %(budget_sources)s::text[], %(budget_per_minutes)s::float8[],
                  %(budget_bursts)s::float8[], %(budget_costs)s::float8[],
                  %(workspace_concurrency)s::int) c

-- repair_lines --
-- The line's safety net (docs/claim.md, "Keeping the line"), for workspaces with id >
-- %(after)s, at most %(batch)s of them: their lanes set from their pending jobs, and the
-- at_concurrency_limit cleared where fewer than %(workspace_concurrency)s syncs are in flight
-- (workspaces_line_repair locks them in id order, then reads the jobs). Repairs what a
-- statement that bypassed the queue's left (a hand-written UPDATE, a restore). Returns how many
-- rows changed and the batch's last id.
with batch as (
    select w.id from workspaces w where w.id > %(after)s::bigint order by w.id
     limit %(batch)s::int
)
select workspaces_line_repair(array(select id from batch),
                              %(workspace_concurrency)s::int) as changed,
       (select max(id) from batch) as last_id

-- seconds_until_due --
-- Seconds from the database's clock until the claim could next take a job of
-- %(source_types)s (text[]): zero or negative when one is claimable now; NULL if nothing is
-- pending. The heads of the lines and the earliest job of no workspace, one index probe per
-- source and lane (docs/claim.md, "When to claim next").
with sources as (
    select unnest(%(source_types)s::text[]) as source_type
), due as (
    select (select min(w.live_line_at) from workspaces w
             where w.source_type = s.source_type) as at
      from sources s
    union all
    select (select min(w.bulk_line_at) from workspaces w where w.source_type = s.source_type)
      from sources s
    union all
    select (select min(j.scheduled_at) from sync_jobs j
             where j.status = 'pending' and j.workspace_id is null
               and j.source_type = s.source_type)
      from sources s
)
select extract(epoch from min(due.at) - clock_timestamp())::float8 as seconds
  from due
