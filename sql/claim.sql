-- The claim, and the idle worker's "when could I claim next" (sql/queue.sql holds every
-- other statement on sync_jobs). Times: %(now)s is a timestamptz or NULL (the database's
-- clock); tests pass it to control time. The budget parameters (%(budget_sources)s,
-- %(budget_per_minutes)s, %(budget_bursts)s, %(budget_costs)s, %(workspace_limit)s) are
-- described on the claim.

-- claim --
-- Claim up to %(limit)s due jobs (scheduled_at <= now) for one worker, fairly:
--   * a job of a workspace is claimable only while the workspace is active, not blocked by a
--     429 (blocked_until), holds budget (its token bucket's level >= one sync's cost:
--     sql/budgets.sql; the
--     source defaults given as %(budget_sources)s text[] / %(budget_per_minutes)s float8[] /
--     %(budget_bursts)s float8[], with %(budget_costs)s float8[]: the requests a typical sync of
--     the source costs) and has fewer than %(workspace_limit)s jobs in flight; each workspace
--     offers at most min(free in-flight places, whole syncs its bucket can pay now) jobs, and
--     the claim reserves those requests in the bucket (CTE reserved);
--   * workspaces are served in turn: every workspace's first job, then every second job, …
--     with live jobs (priority >= 0: webhooks, re-syncs) before bulk jobs (priority < 0:
--     backfill, reconciliation) across all workspaces, so a workspace with 10 000 due jobs
--     delays another's edit by at most one claim round;
--   * jobs of no workspace (the source's settings give the token) form one more group with
--     no budget.
-- %(sources)s (text[]) with %(rooms)s (int[]) restricts the claim to those sources, each
-- taking at most its room (the worker's per-source share of its slots); NULL: any source.
-- Rows are taken FOR UPDATE SKIP LOCKED; rows locked beyond the limit are released at commit.
-- Sets the lease, attempts + 1, and records the revision the sync will cover.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), rooms as (
    select * from unnest(%(sources)s::text[], %(rooms)s::int[]) as r(source_type, room)
), defaults as (
    select * from unnest(%(budget_sources)s::text[], %(budget_per_minutes)s::float8[],
                         %(budget_bursts)s::float8[], %(budget_costs)s::float8[])
           as d(source_type, per_minute, burst, cost)
), ws as (
    select w.id, b.rate, b.level, least(coalesce(d.cost, 1), b.burst) as cost,
           least(%(workspace_limit)s::int
                   - (select count(*) from sync_jobs p
                       where p.workspace_id = w.id and p.status = 'processing')::int,
                 case when b.rate = 0 then %(limit)s::int
                      else floor(b.level / least(coalesce(d.cost, 1), b.burst))::int end)
               as room
      from workspaces w
     cross join clock
      left join defaults d on d.source_type = w.source_type
     {{budgets._bucket}}
     where w.status = 'active'
       and (w.blocked_until is null or w.blocked_until <= clock.now)
       and (%(sources)s::text[] is null or w.source_type = any(%(sources)s::text[]))
       -- only workspaces with due work are locked (sync_jobs_claim_workspace)
       and exists (select 1 from sync_jobs j
                    where j.workspace_id = w.id and j.status = 'pending'
                      and j.scheduled_at <= clock.now)
     order by w.id
       for update of w skip locked   -- a workspace another claim is reserving from waits a round
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
         limit greatest(ws.room, 0)
           for update of j skip locked
     ) c
     where ws.room > 0
    union all
    select c.*
      from (select distinct j.source_type from sync_jobs j
             where %(sources)s::text[] is null and j.status = 'pending'
               and j.workspace_id is null
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
), reserved as (
    -- Each claimed job's requests are reserved in its workspace's bucket now, in the statement
    -- that claims it (the workspace row is locked above): a concurrent claim cannot offer the
    -- same requests again, and the sync spends its reservation first
    -- (debounce.budgets.WorkspaceMeter), so it seldom has to yield mid-page.
    update workspaces w
       set budget_tokens      = ws.level - ws.cost * c.n,
           budget_refilled_at = greatest(clock.now, coalesce(w.budget_refilled_at, clock.now))
      from ws, clock, (select workspace_id, count(*) as n from due
                        where workspace_id is not null group by workspace_id) c
     where w.id = ws.id and c.workspace_id = ws.id and ws.rate > 0
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
  from due, clock
 where j.id = due.id
returning j.*

-- seconds_until_due --
-- Seconds from the database's clock until the claim could next take a job of
-- %(source_types)s (text[], NULL: any source): negative when overdue; NULL if nothing is
-- pending. The worker sleeps this long (bounded by its poll interval). A workspace's jobs
-- count from when the workspace can take one: the end of a 429 block, or when its bucket
-- holds a request again (source defaults as in the claim); jobs of a paused or revoked
-- workspace, or of one with %(workspace_limit)s jobs in flight (a finishing sync wakes its
-- worker), are not counted.
with clock as (
    select clock_timestamp() as now
), defaults as (
    select * from unnest(%(budget_sources)s::text[], %(budget_per_minutes)s::float8[],
                         %(budget_bursts)s::float8[], %(budget_costs)s::float8[])
           as d(source_type, per_minute, burst, cost)
), ws as (
    select w.id,
           greatest(coalesce(w.blocked_until, clock.now),
                    clock.now + make_interval(secs => case
                        when b.rate = 0 or b.level >= least(coalesce(d.cost, 1), b.burst) then 0
                        else (least(coalesce(d.cost, 1), b.burst) - b.level) / b.rate end))
               as open_at
      from workspaces w
     cross join clock
      left join defaults d on d.source_type = w.source_type
     {{budgets._bucket}}
     where w.status = 'active'
       and (%(source_types)s::text[] is null or w.source_type = any(%(source_types)s::text[]))
       and (select count(*) from sync_jobs p
             where p.workspace_id = w.id and p.status = 'processing') < %(workspace_limit)s
), due as (
    select greatest(ws.open_at, m.at) as at      -- greatest() ignores NULLs: filter them
      from ws
     cross join lateral (
        select min(j.scheduled_at) as at from sync_jobs j
         where j.workspace_id = ws.id and j.status = 'pending'
           and (%(source_types)s::text[] is null
                or j.source_type = any(%(source_types)s::text[]))) m
     where m.at is not null
    union all
    select min(j.scheduled_at)
      from sync_jobs j
     where j.status = 'pending' and j.workspace_id is null
       and (%(source_types)s::text[] is null or j.source_type = any(%(source_types)s::text[]))
)
select extract(epoch from min(due.at) - min(clock.now))::float8 as seconds
  from due, clock
