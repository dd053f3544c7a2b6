-- The claim, and the idle worker's "when could I claim next" (sql/queue.sql holds every
-- other statement on sync_jobs). Times: %(now)s is a timestamptz or NULL (the database's
-- clock); tests pass it to control time. The budget parameters (%(budget_sources)s,
-- %(budget_per_minutes)s, %(budget_bursts)s, %(budget_costs)s, %(workspace_limit)s) are
-- described on the claim.

-- _workspace_sources --
-- The sources of the workspaces in line (a skip scan of the two line indexes: one probe per
-- source, not one row per workspace); a relation with one column, source_type.
with recursive live_src(source_type) as (
    (select source_type from workspaces
      where status = 'active' and credentials_error is null and live_due_at is not null
      order by source_type limit 1)
    union all
    select (select w.source_type from workspaces w
             where w.status = 'active' and w.credentials_error is null
               and w.live_due_at is not null
               and w.source_type > live_src.source_type
             order by w.source_type limit 1)
      from live_src where live_src.source_type is not null
), bulk_src(source_type) as (
    (select source_type from workspaces
      where status = 'active' and credentials_error is null and bulk_due_at is not null
      order by source_type limit 1)
    union all
    select (select w.source_type from workspaces w
             where w.status = 'active' and w.credentials_error is null
               and w.bulk_due_at is not null
               and w.source_type > bulk_src.source_type
             order by w.source_type limit 1)
      from bulk_src where bulk_src.source_type is not null
)
select source_type from live_src where source_type is not null
union
select source_type from bulk_src where source_type is not null

-- _unowned_sources --
-- The sources of pending jobs of no workspace (a skip scan of sync_jobs_due_unowned).
with recursive s(source_type) as (
    (select source_type from sync_jobs
      where status = 'pending' and workspace_id is null order by source_type limit 1)
    union all
    select (select j.source_type from sync_jobs j
             where j.status = 'pending' and j.workspace_id is null
               and j.source_type > s.source_type
             order by j.source_type limit 1)
      from s where s.source_type is not null
)
select source_type from s where source_type is not null

-- claim --
-- Claim up to %(limit)s due jobs (scheduled_at <= now) for one worker, fairly, touching
-- O(limit) workspaces and jobs however many workspaces exist (migration 011):
--   * workspaces are taken from their line (workspaces_ready_live, then _bulk): active, its
--     token decrypts (credentials_error is null), with a job due in the lane, not blocked by a
--     429, not held (held_until: its bucket cannot pay yet), not at its concurrency limit
--     (at_concurrency_limit: K syncs in flight), least recently served first — up to the
--     worker's room per source, live lane first, FOR NO KEY UPDATE SKIP LOCKED: a concurrent
--     claim takes the next workspaces in line instead of coming back empty;
--   * a job of a workspace is claimable only while its token bucket's level >= one sync's cost
--     (sql/budgets.sql; the source defaults given as %(budget_sources)s text[] /
--     %(budget_per_minutes)s float8[] / %(budget_bursts)s float8[], with %(budget_costs)s
--     float8[]: the requests a typical sync of the source costs) and it has fewer than
--     %(workspace_limit)s jobs in flight; each workspace offers at most min(free in-flight
--     places, whole syncs its bucket can pay now) jobs, and the claim reserves those requests
--     in the bucket;
--   * the batch is taken in turns: every picked workspace's first job, then every second job,
--     … with live jobs (priority >= 0: webhooks, re-syncs) before bulk jobs (priority < 0:
--     backfill, reconciliation), so a workspace with 10 000 due jobs delays another's edit by
--     at most one claim round;
--   * a workspace served goes to the back of its line (last_served_at); one whose look was
--     wasted is held until its bucket can pay (or, at K, flagged until a sync of it ends), so an
--     empty bucket costs one look per refill, not one per claim;
--   * jobs of no workspace (the source's settings give the token) form one more group with
--     no budget.
-- %(sources)s (text[]) with %(rooms)s (int[]) names the sources to claim for, each taking at
-- most its room (the worker's per-source share of its slots); a caller that wants any source
-- names those of pending_sources. The choice, its row locks and what it does to workspaces are
-- the function claim_pick (migration 014, where the rules above are written out): PL/pgSQL
-- keeps its statements prepared, so a claim is not parsed and planned at every execution.
-- Rows are taken FOR UPDATE SKIP LOCKED; rows locked beyond the limit are released at commit.
-- Sets the lease, attempts + 1, and records the revision the sync will cover. Each claimed row
-- comes with what its sync needs of its workspace (NULL for a job of no workspace), read in the
-- same statement instead of one query per job: ws_status, ws_origin, ws_external_id,
-- ws_bot_user_id, ws_credentials (the encrypted token; NULL for the environment's workspace).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), due as (
    -- the choice, the row locks and the workspaces' side (migration 014)
    select array(select p.id
                   from claim_pick(%(now)s::timestamptz, %(limit)s::int, %(sources)s::text[],
                                   %(rooms)s::int[], %(budget_sources)s::text[],
                                   %(budget_per_minutes)s::float8[], %(budget_bursts)s::float8[],
                                   %(budget_costs)s::float8[], %(workspace_limit)s::int) as p(id)
               ) as ids
), claimed as (
    update sync_jobs j
       set status           = 'processing',
           attempts         = j.attempts + 1,
           locked_by        = %(worker_id)s,
           lease_token      = gen_random_uuid(),
           lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
           claimed_revision = j.revision,
           retry_at         = null,
           updated_at       = clock.now
      from clock
     where j.id = any((select ids from due)::bigint[])     -- by primary key
    returning j.*
)
select c.*, w.status as ws_status, w.origin as ws_origin, w.external_id as ws_external_id,
       w.bot_user_id as ws_bot_user_id, w.credentials as ws_credentials
  from claimed c
  left join workspaces w on w.id = c.workspace_id

-- pending_sources --
-- The sources with work pending, in a workspace line or of no workspace (index skip scans):
-- one column, source_type. A claim for any source claims for these.
select source_type from ({{_workspace_sources}}) s
union
select source_type from ({{_unowned_sources}}) u

-- refresh_ready --
-- The self-healing path of the workspace lines (migration 011), for workspaces with id >
-- %(after)s, at most %(batch)s of them: recompute their lanes' due times from their pending
-- jobs, and end the K hold of those with fewer than %(workspace_limit)s jobs in flight. The
-- triggers keep both exact at every commit; this repairs rows that statements run with
-- triggers disabled left behind (a restore with session_replication_role = replica). Locks the
-- batch's rows before reading the jobs (workspaces_ready_refresh), so it never overwrites a
-- newer value with an older one. Returns how many rows changed and the batch's last id.
with batch as (
    select w.id,
           w.at_concurrency_limit
           and (select count(*) from sync_jobs p
                 where p.workspace_id = w.id and p.status = 'processing')
               < %(workspace_limit)s::int as free
      from workspaces w
     where w.id > %(after)s::bigint
     order by w.id
     limit %(batch)s::int
)
select workspaces_ready_refresh(array(select id from batch),
                                array(select id from batch where free)) as changed,
       (select max(id) from batch) as last_id

-- seconds_until_due --
-- Seconds from the database's clock until the claim could next take a job of
-- %(source_types)s (text[], NULL: any source): negative (or zero) when a job is claimable
-- now; NULL if nothing is pending. The worker sleeps this long (bounded by its poll
-- interval). Read from the head of each workspace line (sql/claim.sql, claim): a
-- workspace's jobs count from when it can take one — the end of a 429 block, or when the
-- last claim that looked at it said its bucket would pay for a sync again; jobs of a paused or
-- revoked workspace, of one whose token a worker could not decrypt (credentials_error), or of
-- one with K jobs in flight (a finishing sync wakes its worker), are
-- not counted. A bucket drained by charges since the last claim looked costs one wasted
-- claim, which then holds the workspace until the refill (the claim applies the budgets and
-- K when it looks; this query needs neither). Constant cost: one index probe per source and
-- lane.
with clock as (
    select clock_timestamp() as now
), sources as (
    select unnest(%(source_types)s::text[]) as source_type
     where %(source_types)s::text[] is not null
    union all
    select source_type from ({{_workspace_sources}}) s
     where %(source_types)s::text[] is null
    union
    select source_type from ({{_unowned_sources}}) u
     where %(source_types)s::text[] is null
), due as (
    select (select greatest(w.live_due_at, w.blocked_until, w.held_until, w.last_served_at)
              from workspaces w
             where w.source_type = s.source_type and w.status = 'active'
               and w.credentials_error is null
               and w.live_due_at is not null and not w.at_concurrency_limit
             order by greatest(w.live_due_at, w.blocked_until, w.held_until, w.last_served_at)
             limit 1) as at
      from sources s
    union all
    select (select greatest(w.bulk_due_at, w.blocked_until, w.held_until, w.last_served_at)
              from workspaces w
             where w.source_type = s.source_type and w.status = 'active'
               and w.credentials_error is null
               and w.bulk_due_at is not null and not w.at_concurrency_limit
             order by greatest(w.bulk_due_at, w.blocked_until, w.held_until, w.last_served_at)
             limit 1)
      from sources s
    union all
    select (select min(j.scheduled_at) from sync_jobs j
             where j.status = 'pending' and j.workspace_id is null
               and j.source_type = s.source_type)
      from sources s
)
select extract(epoch from min(due.at) - (select now from clock))::float8 as seconds
  from due
 where due.at is not null                -- NULL: nothing pending in that line
