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
--     429, not held (held_until: its bucket cannot pay
--     yet, or K syncs in flight), least recently served first — up to the worker's room per
--     source, live lane first, FOR NO KEY UPDATE SKIP LOCKED: a concurrent claim takes the
--     next workspaces in line instead of coming back empty;
--   * a job of a workspace is claimable only while its token bucket's level >= one sync's cost
--     (sql/budgets.sql; the source defaults given as %(budget_sources)s text[] /
--     %(budget_per_minutes)s float8[] / %(budget_bursts)s float8[], with %(budget_costs)s
--     float8[]: the requests a typical sync of the source costs) and it has fewer than
--     %(workspace_limit)s jobs in flight; each workspace offers at most min(free in-flight
--     places, whole syncs its bucket can pay now) jobs, and the claim reserves those requests
--     in the bucket (CTE served);
--   * the batch is taken in turns: every picked workspace's first job, then every second job,
--     … with live jobs (priority >= 0: webhooks, re-syncs) before bulk jobs (priority < 0:
--     backfill, reconciliation), so a workspace with 10 000 due jobs delays another's edit by
--     at most one claim round;
--   * a workspace served goes to the back of its line (last_served_at); one whose look was
--     wasted is held until its bucket can pay (or, at K, until a sync of it ends), so an
--     empty bucket costs one look per refill, not one per claim;
--   * jobs of no workspace (the source's settings give the token) form one more group with
--     no budget.
-- %(sources)s (text[]) with %(rooms)s (int[]) restricts the claim to those sources, each
-- taking at most its room (the worker's per-source share of its slots); NULL: any source.
-- Rows are taken FOR UPDATE SKIP LOCKED; rows locked beyond the limit are released at commit.
-- Sets the lease, attempts + 1, and records the revision the sync will cover. Each claimed row
-- comes with what its sync needs of its workspace (NULL for a job of no workspace), read in the
-- same statement instead of one query per job: ws_status, ws_origin, ws_external_id,
-- ws_bot_user_id, ws_credentials (the encrypted token; NULL for the environment's workspace).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), rooms as (
    select * from unnest(%(sources)s::text[], %(rooms)s::int[]) as r(source_type, room)
), defaults as (
    select * from unnest(%(budget_sources)s::text[], %(budget_per_minutes)s::float8[],
                         %(budget_bursts)s::float8[], %(budget_costs)s::float8[])
           as d(source_type, per_minute, burst, cost)
), lines as (
    -- the sources to serve, with how many workspaces each may take and the clock
    select r.source_type, least(r.room, %(limit)s::int) as n, clock.now
      from rooms r cross join clock
     where r.room > 0
    union all
    select s.source_type, %(limit)s::int, clock.now
      from ({{_workspace_sources}}) s cross join clock
     where %(sources)s::text[] is null
), live as (
    select l.source_type, w.id
      from lines l
     cross join lateral (
        select w.id from workspaces w
         where w.source_type = l.source_type and w.status = 'active'
           and w.credentials_error is null   -- a worker could not decrypt its token: parked
           and w.live_due_at is not null
           and greatest(w.live_due_at, w.blocked_until, w.held_until, w.last_served_at) <= l.now
         order by greatest(w.live_due_at, w.blocked_until, w.held_until, w.last_served_at),
                  w.served_seq
         limit l.n
           for no key update skip locked
     ) w
), bulk as (
    -- the bulk lane fills what the live lane left of each source's room
    select l.source_type, w.id
      from (select l.*, array(select v.id from live v where v.source_type = l.source_type)
                       as taken
              from lines l) l
     cross join lateral (
        select w.id from workspaces w
         where w.source_type = l.source_type and w.status = 'active'
           and w.credentials_error is null   -- a worker could not decrypt its token: parked
           and w.bulk_due_at is not null
           and greatest(w.bulk_due_at, w.blocked_until, w.held_until, w.last_served_at) <= l.now
           and w.id <> all(l.taken)
         order by greatest(w.bulk_due_at, w.blocked_until, w.held_until, w.last_served_at),
                  w.served_seq
         limit greatest(l.n - cardinality(l.taken), 0)
           for no key update skip locked
     ) w
), ws as (
    select w.id, b.rate, b.level, least(coalesce(d.cost, 1), b.burst) as cost,
           (select count(*) from sync_jobs p
             where p.workspace_id = w.id and p.status = 'processing')::int as in_flight,
           greatest(least(%(workspace_limit)s::int
                            - (select count(*) from sync_jobs p
                                where p.workspace_id = w.id and p.status = 'processing')::int,
                          case when b.rate = 0 then %(limit)s::int
                               else floor(b.level / least(coalesce(d.cost, 1), b.burst))::int
                          end), 0) as room
      from workspaces w
     cross join clock
      left join defaults d on d.source_type = w.source_type
     {{budgets._bucket}}
     where w.id in (select id from live union all select id from bulk)
), picked as (
    select c.*
      from ws
     cross join lateral (
        select j.id, j.source_type, j.workspace_id, j.priority, j.scheduled_at
          from sync_jobs j, clock
         where j.workspace_id = ws.id
           and j.status = 'pending'
           and j.scheduled_at <= clock.now
           and (%(sources)s::text[] is null or j.source_type = any(%(sources)s::text[]))
         order by j.priority desc, j.scheduled_at
         limit ws.room
           for update of j skip locked
     ) c
     where ws.room > 0
    union all
    select c.*
      from (select source_type from ({{_unowned_sources}}) u where %(sources)s::text[] is null
            union
            select source_type from rooms) s
     cross join lateral (
        select j.id, j.source_type, j.workspace_id, j.priority, j.scheduled_at
          from sync_jobs j, clock
         where j.status = 'pending'
           and j.workspace_id is null
           and j.source_type = s.source_type
           and j.scheduled_at <= clock.now
         order by j.priority desc, j.scheduled_at
         limit %(limit)s
           for update of j skip locked
     ) c
), turns as (
    select p.*, row_number() over (partition by p.workspace_id, p.source_type
                                   order by p.priority desc, p.scheduled_at) as turn
      from picked p
), ordered as (
    select t.*, row_number() over (partition by t.source_type
                                   order by t.priority < 0, t.turn, t.priority desc,
                                            t.scheduled_at) as source_turn
      from turns t
), due as (
    select o.id, o.workspace_id
      from ordered o
      left join rooms r on r.source_type = o.source_type
     where %(sources)s::text[] is null or o.source_turn <= r.room
     order by o.priority < 0, o.turn, o.priority desc, o.scheduled_at
     limit %(limit)s
), served as (
    -- Every workspace looked at: each claimed job's requests are reserved in its bucket now,
    -- in the statement that claims it (the row is locked above), so a concurrent claim cannot
    -- offer the same requests again and the sync spends its reservation first
    -- (debounce.budgets.WorkspaceMeter); a workspace served goes to the back of its line; one
    -- left unable to take a job is held until its bucket pays for a sync (or 'infinity' at K:
    -- a sync of it ending frees it, sql/011_claim_ready.sql).
    update workspaces w
       set budget_tokens      = case when ws.rate > 0 and c.n > 0 then ws.level - ws.cost * c.n
                                     else w.budget_tokens end,
           budget_refilled_at = case when ws.rate > 0 and c.n > 0
                                     then greatest(clock.now,
                                                   coalesce(w.budget_refilled_at, clock.now))
                                     else w.budget_refilled_at end,
           -- served, or looked at with room and found no due job it could lock (its lanes
           -- were stale, or its one job is being written this instant): back of the line
           last_served_at     = case when c.n > 0 or (ws.room > 0 and f.n is null)
                                     then clock.now else w.last_served_at end,
           served_seq         = case when c.n > 0 or (ws.room > 0 and f.n is null)
                                     then nextval('workspaces_served_seq')
                                     else w.served_seq end,
           held_until         = case
               when ws.in_flight + coalesce(c.n, 0) >= %(workspace_limit)s::int
                   then 'infinity'::timestamptz
               when ws.rate > 0 and ws.level - ws.cost * coalesce(c.n, 0) < ws.cost
                   then clock.now + make_interval(secs => (ws.cost - (ws.level
                                                   - ws.cost * coalesce(c.n, 0))) / ws.rate)
               else null end
      from ws
     cross join clock
      left join (select workspace_id, count(*)::int as n from due
                  where workspace_id is not null group by workspace_id) c
        on c.workspace_id = ws.id
      left join (select workspace_id, count(*)::int as n from picked
                  where workspace_id is not null group by workspace_id) f
        on f.workspace_id = ws.id
     where w.id = ws.id
       and w.id = any(array(select id from ws))   -- by primary key, never a scan of all
    returning w.id
)
update sync_jobs j
   set status           = 'processing',
       attempts         = j.attempts + 1,
       locked_by        = %(worker_id)s,
       lease_token      = gen_random_uuid(),
       lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
       claimed_revision = j.revision,
       retry_at         = null,
       updated_at       = clock.now
  from due
 cross join clock
  left join lateral (select w.status, w.origin, w.external_id, w.bot_user_id, w.credentials
                       from workspaces w where w.id = due.workspace_id) w on true
 where j.id = due.id
returning j.*, w.status as ws_status, w.origin as ws_origin, w.external_id as ws_external_id,
          w.bot_user_id as ws_bot_user_id, w.credentials as ws_credentials

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
           w.held_until = 'infinity'
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
               and w.live_due_at is not null
             order by greatest(w.live_due_at, w.blocked_until, w.held_until, w.last_served_at)
             limit 1) as at
      from sources s
    union all
    select (select greatest(w.bulk_due_at, w.blocked_until, w.held_until, w.last_served_at)
              from workspaces w
             where w.source_type = s.source_type and w.status = 'active'
               and w.credentials_error is null
               and w.bulk_due_at is not null
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
 where due.at < 'infinity'                -- NULL (nothing pending) and K-held lines left out
