-- Every statement on sync_jobs. Times: %(now)s is a timestamptz or NULL (NULL: the database's
-- now()); tests pass it to control time. Durations are float seconds. Each is one round trip.
-- pg_notify('debounce_jobs', source_type) is sent only when a job becomes due now, never for an
-- ordinary debounced event (NOTIFY serialises commits); the web's enqueue does not notify in
-- its statement: the application sends `wake` after the batch committed, debounced across
-- batches (debounce/queue/wakeups.py). A statement that changes jobs of
-- workspaces ends by moving their line (the claim's index of who has due work,
-- docs/claim.md): its CTE line_moves lists the jobs it changed and _line_upkeep calls
-- workspaces_line_move with them; the call's arguments are aggregates of every changed job
-- row, so it runs (and locks workspace rows) only after the statement's last job lock.

-- _line_upkeep --
-- The CTE line: the line's upkeep of a statement, from its CTE line_moves (ws, due:
-- scheduled_at of a job pending now, else NULL; priority; freed: the job left 'processing'):
-- one call of workspaces_line_move (migration 022), whose arguments need every changed job
-- row, so the workspace rows are locked after the job rows; no call when no job of a
-- workspace changed.
line as (
    select workspaces_line_move(array_agg(m.ws), array_agg(m.due), array_agg(m.priority),
                                array_agg(m.freed)) as moved
      from line_moves m
     where m.ws is not null
    having count(*) > 0
)

-- _settled --
-- The tail shared by the statements that end a claim (settle, release,
-- requeue_expired), over their CTEs clock and settled (the job rows they changed): the line
-- moves (a lane earlier to a job pending again, the concurrency flag off), idle workers are
-- woken for a job due now, and the rows are returned with how many of each.
line_moves as (
    select s.workspace_id as ws, case when s.status = 'pending' then s.scheduled_at end as due,
           s.priority, true as freed
      from settled s
), {{_line_upkeep}}, notify as (
    select pg_notify('debounce_jobs', n.source_type)
      from (select distinct s.source_type from settled s, clock
             where s.status = 'pending' and s.scheduled_at <= clock.now) n
)
select s.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from settled s

-- enqueue --
-- The debounce upsert for a batch of events, one statement. Events are deduplicated by
-- (source_type, event_id) against seen_events (idempotency), events of one page inside the batch
-- are merged first (latest payload wins, counts add up), then each page's one active job is
-- created or updated:
--   pending    → payload/event id replaced, event_count += n, scheduled_at pushed to
--                now + debounce but never past max_wait_until, and never before a retry backoff
--                (retry_at); a job raised by a manual re-sync (higher priority) keeps its earlier
--                due time;
--   processing → payload replaced, revision bumped: complete() then turns the row back to
--                pending instead of completed (the follow-up sync). The first event after the
--                claim opens a new burst (first_event_at, max_wait_until).
-- An event of a removed workspace (a web process's routes are up to a few seconds old)
-- enqueues nothing: outcome workspace_removed.
-- ON CONFLICT restates the partial index predicate so Postgres infers the partial index.
-- Returns one row per input event (ord = 1-based position) with only what the webhook's answer
-- and metrics use: outcome, job id, due time (NULL for a duplicate whose page has no active
-- job); not the job's row (its payload would travel back and be parsed again).
-- No NOTIFY here (a NOTIFY takes a global lock at commit, which serialised concurrent
-- enqueues): the caller learns from the due times which sources have a job due soon and sends
-- `wake` after the commit (debounce/queue/wakeups.py).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as (
    select *
      from unnest(%(source_types)s::text[], %(source_page_ids)s::text[], %(payloads)b::jsonb[],
                  %(event_ids)s::text[], %(debounce_seconds)s::float8[],
                  %(max_wait_seconds)s::float8[], %(priorities)s::int[], %(max_attempts)s::int[],
                  %(workspace_ids)s::bigint[], %(change_kinds)s::text[])
           with ordinality
           as i(source_type, source_page_id, payload, event_id, debounce_seconds,
                max_wait_seconds, priority, max_attempts, workspace_id, kinds, ord)
), dedup as (
    select distinct on (source_type, coalesce(event_id, '#' || ord)) *
      from input
     order by source_type, coalesce(event_id, '#' || ord), ord
), fresh as (
    insert into seen_events (source_type, event_id, seen_at)
    select d.source_type, d.event_id, clock.now
      from dedup d cross join clock
     where d.event_id is not null
     order by d.source_type, d.event_id
    on conflict do nothing
    returning source_type, event_id
), accepted as (
    select d.*
      from dedup d
     where d.event_id is null
        or exists (select 1 from fresh f
                    where f.source_type = d.source_type and f.event_id = d.event_id)
), kept as (
    -- the events of no workspace or of one not removed; the others enqueue nothing (outcome
    -- workspace_removed). A removal that commits after this read leaves its job pending and
    -- inert: the claim serves active workspaces only, and cancel_removed finishes it.
    select a.*
      from accepted a
     where a.workspace_id is null
        or not exists (select 1 from workspaces w
                        where w.id = a.workspace_id and w.status = 'removed')
), merged as (
    select source_type, source_page_id,
           (array_agg(payload order by ord desc))[1]          as payload,
           (array_agg(event_id order by ord desc))[1]         as event_id,
           count(*)::int                                      as n,
           max(priority)                                      as priority,
           (array_agg(debounce_seconds order by ord desc))[1] as debounce_seconds,
           (array_agg(max_wait_seconds order by ord desc))[1] as max_wait_seconds,
           max(max_attempts)                                  as max_attempts,
           (array_agg(workspace_id order by ord desc))[1]     as workspace_id,
           -- what the events said changed (migration 018): '' → '{}', "everything", absorbs
           debounce_union_kinds(coalesce(string_to_array(kinds, ','), '{}'))
                                                              as change_kinds
      from kept
     group by source_type, source_page_id
), moved_from as (
    -- a job in flight that an event of another workspace takes over leaves its workspace
    -- (whose concurrency flag then ends, as when the sync ends)
    select j.workspace_id
      from merged m
      join sync_jobs j on j.source_type = m.source_type and j.source_page_id = m.source_page_id
                      and j.status = 'processing'
     where m.workspace_id is not null and j.workspace_id <> m.workspace_id
), upsert as (
    insert into sync_jobs as j
           (source_type, source_page_id, status, payload, event_id, event_count, priority,
            max_attempts, scheduled_at, first_event_at, max_wait_until, revision,
            created_at, updated_at, workspace_id, change_kinds)
    select m.source_type, m.source_page_id, 'pending', m.payload, m.event_id, m.n, m.priority,
           m.max_attempts,
           least(clock.now + make_interval(secs => m.debounce_seconds),
                 clock.now + make_interval(secs => m.max_wait_seconds)),
           clock.now,
           clock.now + make_interval(secs => m.max_wait_seconds),
           m.n, clock.now, clock.now, m.workspace_id, m.change_kinds
      from merged m cross join clock
     order by m.source_type, m.source_page_id   -- one lock order for every batch: no deadlocks
    on conflict (source_type, source_page_id) where status in ('pending', 'processing')
    do update set
        payload        = excluded.payload,
        event_id       = excluded.event_id,
        -- The latest event's workspace syncs the page (a Slack Connect channel seen by two
        -- installed teams is one job, read with the token of the team that spoke last).
        workspace_id   = coalesce(excluded.workspace_id, j.workspace_id),
        event_count    = j.event_count + excluded.event_count,
        change_kinds   = debounce_merge_kinds(j.change_kinds, excluded.change_kinds),
        priority       = greatest(j.priority, excluded.priority),
        max_attempts   = greatest(j.max_attempts, excluded.max_attempts),
        revision       = j.revision + excluded.revision,
        first_event_at = case when j.status = 'processing' and j.revision = j.claimed_revision
                              then excluded.first_event_at else j.first_event_at end,
        max_wait_until = case when j.status = 'processing' and j.revision = j.claimed_revision
                              then excluded.max_wait_until else j.max_wait_until end,
        scheduled_at   = (
            select case when j.priority > excluded.priority then least(j.scheduled_at, t.due)
                        else t.due end
              from (select greatest(
                               case when j.status = 'pending' then j.retry_at end,
                               least(excluded.scheduled_at,
                                     case when j.status = 'processing'
                                               and j.revision = j.claimed_revision
                                          then excluded.max_wait_until
                                          else j.max_wait_until end)) as due) t),
        updated_at     = excluded.updated_at
    returning j.id, j.source_type, j.source_page_id, j.status, j.scheduled_at, j.workspace_id,
              j.priority, (j.xmax = 0) as inserted
), line_moves as (
    select u.workspace_id as ws, u.scheduled_at as due, u.priority, false as freed
      from upsert u where u.status = 'pending'
    union all
    select f.workspace_id, null, 0, true from moved_from f
), {{_line_upkeep}}, result as (
    select a.ord,
           case when u.inserted then 'created'
                when u.status = 'processing' then 'requeued_after_running'
                else 'debounced' end as outcome,
           u.id, u.scheduled_at
      from kept a
      join upsert u on u.source_type = a.source_type and u.source_page_id = a.source_page_id
    union all
    select a.ord, 'workspace_removed', null, null
      from accepted a
     where not exists (select 1 from kept k where k.ord = a.ord)
    union all
    select i.ord, 'duplicate', s.id, s.scheduled_at
      from input i
      left join sync_jobs s on s.source_type = i.source_type
                           and s.source_page_id = i.source_page_id
                           and s.status in ('pending', 'processing')
     where not exists (select 1 from accepted a where a.ord = i.ord)
)
select r.*, (select count(*) from line) as moved
  from result r order by r.ord

-- wake --
-- Wake idle workers: one notification on debounce_jobs per source of %(sources)s (text[]), sent
-- by the application after an enqueue committed with jobs of those sources due soon
-- (debounce/queue/wakeups.py). In autocommit, its own short transaction: the global lock a
-- NOTIFY takes at commit is held by this statement alone, not by the enqueue's row locks.
-- Returns how many were sent.
select count(pg_notify('debounce_jobs', s.source)) as sent
  from unnest(%(sources)s::text[]) as s(source)

-- settle --
-- The outcomes of claimed jobs, one statement for a batch (the worker's flush,
-- debounce/worker/completions.py): per job %(ids)s (bigint[]) with its %(lease_tokens)s (uuid[])
-- and %(outcomes)s (text[]), at most one outcome per claim:
--   'completed' → completed if no event arrived since its claim (revision = claimed_revision),
--                 else pending again at the due time its events gave it, with fresh attempts
--                 (the follow-up sync);
--   'failed'    → with %(errors)s (text[]), %(retry_afters)s (float8[], NULL when not rate
--                 limited), %(permanents)s (bool[]), %(backoffs)s (float8[]: this attempt's
--                 backoff, seconds), %(checkpoints)s (jsonb[]: what a sync that yielded had
--                 fetched, kept while the row stays pending; NULL clears it), %(keep_places)s
--                 (bool[]: a sync that yielded to its workspace's budget keeps its due time and
--                 place in line; the claim's budget check holds it back):
--                   permanent, or attempts spent (and not rate limited) → failed;
--                   rate limited → pending at now + retry_after, the attempt given back;
--                   otherwise    → pending at now + backoff;
--   'renewed'   → the sync still runs: its lease pushed to now + %(lease_seconds)s.
-- Revision rule: if an event arrived during the sync, a completion or a final failure still
-- leaves a follow-up (pending at its due time, attempts reset), and a retry waits for the later
-- of its backoff and the events' due time. retry_at remembers the backoff so later events cannot
-- pull it earlier. Every decision reads the target row j inside the UPDATE, never a CTE's
-- snapshot: an UPDATE that waited for a concurrent enqueue's row lock re-evaluates its SET list
-- on the row version that enqueue committed (EvalPlanQual), whereas a value computed in a CTE
-- would miss the edit. Only claims still held match (the lease fence: an outcome whose token no
-- longer matches changes nothing). Rows are locked once, in (source_type, source_page_id)
-- order like every multi-row statement; the line moves once for all the jobs settled.
-- Returns the rows changed: the settled ones, then the renewed ones (notified, moved: 0).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as (
    select i.*, i.outcome = 'completed' as done,
           (select now from clock)
             + make_interval(secs => coalesce(i.retry_after, i.backoff)) as retry_time
      from unnest(%(ids)s::bigint[], %(lease_tokens)s::uuid[], %(outcomes)s::text[],
                  %(errors)s::text[], %(retry_afters)s::float8[], %(permanents)s::bool[],
                  %(backoffs)s::float8[], %(checkpoints)s::jsonb[], %(keep_places)s::bool[])
           as i(id, lease_token, outcome, error, retry_after, permanent, backoff, checkpoint,
                keep_place)
), held as (
    select j.id
      from sync_jobs j
      join input i on j.id = i.id and j.lease_token = i.lease_token
     order by j.source_type, j.source_page_id
       for update of j
), renewed as (
    update sync_jobs j
       set lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
           updated_at = clock.now
      from held, input i, clock
     where j.id = held.id and i.id = j.id and j.lease_token = i.lease_token
       and i.outcome = 'renewed'
    returning j.*
), settled as (
    update sync_jobs j
       set (status, attempts, scheduled_at, retry_at, finished_at, checkpoint) = (
               select case when not v.ends or j.revision <> j.claimed_revision then 'pending'
                           when i.done then 'completed' else 'failed' end,
                      case when v.ends
                           then case when j.revision <> j.claimed_revision then 0
                                     else j.attempts end
                           when i.retry_after is not null then greatest(j.attempts - 1, 0)
                           else j.attempts end,
                      case when v.ends or i.keep_place then j.scheduled_at
                           when j.revision <> j.claimed_revision
                           then greatest(i.retry_time, j.scheduled_at)
                           else i.retry_time end,
                      case when v.ends or i.keep_place then null else i.retry_time end,
                      case when v.ends and j.revision = j.claimed_revision then clock.now end,
                      case when v.ends then null else i.checkpoint end
                 -- ends: no retry (completed; failed permanently or with its attempts spent
                 -- and not rate limited)
                 from (select i.done
                              or i.permanent
                              or (i.retry_after is null and j.attempts >= j.max_attempts)
                              as ends) v),
           last_error       = i.error,
           lease_token      = null,
           lease_expires_at = null,
           locked_by        = null,
           updated_at       = clock.now
      from held, input i, clock
     where j.id = held.id and i.id = j.id and j.lease_token = i.lease_token
       and i.outcome <> 'renewed'
    returning j.*
), {{_settled}}
union all
select r.*, 0, 0 from renewed r

-- release --
-- Give claimed jobs back untouched (worker shutdown): pending again at their due time, the
-- attempt not counted, lease cleared. Wakes idle workers: these jobs are due. Rows are locked
-- in (source_type, source_page_id) order.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), held as (
    select id from sync_jobs
     where lease_token = any(%(lease_tokens)s::uuid[])
     order by source_type, source_page_id
       for update
), settled as (
    update sync_jobs j
       set status = 'pending',
           attempts = greatest(j.attempts - 1, 0),
           lease_token = null,
           lease_expires_at = null,
           locked_by = null,
           updated_at = clock.now
      from held, clock
     where j.id = held.id
    returning j.*
), {{_settled}}

-- requeue_expired --
-- Jobs whose lease ran out (their worker died): back to pending, due now, or failed when
-- their attempts are spent and no event is waiting (an event during the lost run still gets a
-- follow-up with fresh attempts).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), expired as (
    select j.id
      from sync_jobs j, clock
     where j.status = 'processing' and j.lease_expires_at < clock.now
     order by j.lease_expires_at
     limit %(limit)s
     for update of j skip locked
), settled as (
    update sync_jobs j
       set status = case when j.attempts >= j.max_attempts and j.revision = j.claimed_revision
                         then 'failed' else 'pending' end,
           attempts = case when j.attempts >= j.max_attempts and j.revision <> j.claimed_revision
                           then 0 else j.attempts end,
           scheduled_at = least(j.scheduled_at, clock.now),
           finished_at = case when j.attempts >= j.max_attempts and j.revision = j.claimed_revision
                              then clock.now end,
           last_error = 'lease expired: worker ' || coalesce(j.locked_by, '?')
                        || ' stopped renewing it (crashed or stuck)',
           lease_token = null,
           lease_expires_at = null,
           locked_by = null,
           updated_at = clock.now
      from expired, clock
     where j.id = expired.id
    returning j.*
), {{_settled}}

-- resync --
-- Manual re-sync: the page's active job becomes due now with at least %(priority)s; a page
-- without one (never seen, completed, or failed) gets a fresh job, of workspace
-- %(workspace_id)s when given, else of the workspace its document was written by (its token
-- can read the page; no document: no workspace, the environment's token). An active job keeps
-- its workspace. A processing job gets a follow-up due now (revision bumped). No row: that
-- workspace is removed; nothing changed.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), wanted as (
    select coalesce(%(workspace_id)s::bigint,
                    (select d.workspace_id from documents d
                      where d.source_type = %(source_type)s
                        and d.source_page_id = %(source_page_id)s
                        and d.workspace_id is not null
                      order by d.synced_at desc limit 1)) as ws
), up as (
    insert into sync_jobs as j
           (source_type, source_page_id, status, payload, event_id, event_count, priority,
            max_attempts, scheduled_at, first_event_at, max_wait_until, revision,
            created_at, updated_at, workspace_id)
    select %(source_type)s, %(source_page_id)s, 'pending', %(payload)s::jsonb, null, 0,
           %(priority)s, %(max_attempts)s, clock.now, clock.now, clock.now, 1,
           clock.now, clock.now, w.ws
      from clock, wanted w
     where w.ws is null
        or not exists (select 1 from workspaces x where x.id = w.ws and x.status = 'removed')
    on conflict (source_type, source_page_id) where status in ('pending', 'processing')
    do update set
        priority       = greatest(j.priority, excluded.priority),
        scheduled_at   = least(j.scheduled_at, excluded.scheduled_at),
        max_wait_until = least(j.max_wait_until, excluded.max_wait_until),
        retry_at       = null,
        revision       = j.revision + case when j.status = 'processing' then 1 else 0 end,
        updated_at     = excluded.updated_at
    returning j.*, (j.xmax = 0) as inserted
), line_moves as (
    select u.workspace_id as ws, u.scheduled_at as due, u.priority, false as freed
      from up u where u.status = 'pending'
), {{_line_upkeep}}, notify as (
    select pg_notify('debounce_jobs', source_type) from up
)
select u.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from up u

-- retry --
-- Manual retry of a failed job: pending, due now, attempts reset. Only if the page has no
-- other active job (a later event may already have created one) and its workspace is not
-- removed.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), revived as (
    update sync_jobs j
       set status = 'pending', attempts = 0, scheduled_at = clock.now, retry_at = null,
           finished_at = null, updated_at = clock.now
      from clock
     where j.id = %(id)s and j.status = 'failed'
       and not exists (select 1 from workspaces w
                        where w.id = j.workspace_id and w.status = 'removed')
       and not exists (select 1 from sync_jobs a
                        where a.source_type = j.source_type
                          and a.source_page_id = j.source_page_id
                          and a.status in ('pending', 'processing'))
    returning j.*
), line_moves as (
    select r.workspace_id as ws, r.scheduled_at as due, r.priority, false as freed
      from revived r
), {{_line_upkeep}}, notify as (
    select pg_notify('debounce_jobs', source_type) from revived
)
select r.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from revived r

-- get --
-- One job by id.
select * from sync_jobs where id = %(id)s

-- list --
-- Jobs, newest id first, filtered; %(cursor)s is the last id of the previous page (or NULL).
select * from sync_jobs
 where (%(status)s::text is null or status = %(status)s::text)
   and (%(source_type)s::text is null or source_type = %(source_type)s::text)
   and (%(source_page_id)s::text is null or source_page_id = %(source_page_id)s::text)
   and (%(cursor)s::bigint is null or id < %(cursor)s::bigint)
 order by id desc
 limit %(limit)s

-- stats --
-- Counts by source and state, and per source the age in seconds of the oldest due pending job.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select j.source_type, j.status, count(*)::bigint as jobs,
       coalesce(extract(epoch from clock.now - min(j.scheduled_at)
                filter (where j.status = 'pending' and j.scheduled_at <= clock.now)), 0)::float8
           as oldest_due_age_seconds
  from sync_jobs j, clock
 group by j.source_type, j.status, clock.now
 order by 1, 2

-- prune --
-- Delete finished jobs older than %(job_older_than)s seconds and remembered event ids older
-- than %(event_older_than)s seconds, at most %(limit)s of each (NULL: all). With
-- %(exclusive)s, only if this transaction gets the advisory lock %(lock_id)s (so one worker at a
-- time prunes; the others skip). Returns how many of each, and whether it ran.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), lock as (
    select case when %(exclusive)s::bool then pg_try_advisory_xact_lock(%(lock_id)s::bigint)
                else true end as got
), jobs as (
    delete from sync_jobs j
     where (select got from lock)
       and j.id in (select f.id from sync_jobs f, clock
                     where f.status in ('completed', 'failed')
                       and f.finished_at < clock.now - make_interval(secs => %(job_older_than)s::float8)
                     order by f.finished_at
                     limit %(limit)s
                       for update of f skip locked)   -- never waits
    returning 1
), events as (
    delete from seen_events e
     where (select got from lock)
       and e.ctid in (select o.ctid from seen_events o, clock
                       where o.seen_at < clock.now - make_interval(secs => %(event_older_than)s::float8)
                       limit %(limit)s)
    returning 1
)
select (select count(*) from jobs) as jobs, (select count(*) from events) as events,
       (select got from lock) as ran

-- cancel_removed --
-- Finish up to %(limit)s pending jobs of removed workspaces (of workspace %(workspace_id)s;
-- NULL: of any): failed, their reason in last_error. Only job rows no one holds (SKIP LOCKED:
-- a statement holding one keeps it, the next batch takes it), so it waits for nothing; it
-- locks no workspace: a removed workspace is out of the line, and a lane left earlier than its
-- jobs only costs a look once it is connected again (docs/claim.md). Returns their ids.
with batch as (
    select j.id
      from sync_jobs j
     where j.status = 'pending'
       and j.workspace_id = any(array(select w.id from workspaces w
                                       where w.status = 'removed'
                                         and (%(workspace_id)s::bigint is null
                                              or w.id = %(workspace_id)s::bigint)))
     order by j.source_type, j.source_page_id
     limit %(limit)s
       for update of j skip locked
)
update sync_jobs j
   set status = 'failed', finished_at = now(), updated_at = now(), retry_at = null,
       checkpoint = null, last_error = 'cancelled: its workspace was removed'
  from batch
 where j.id = batch.id
returning j.id
