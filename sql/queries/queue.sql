-- Every statement on sync_jobs. Times: %(now)s is a timestamptz or NULL (NULL: the database's
-- now()); tests pass it to control time. Durations are float seconds. Each is one round trip.
-- pg_notify('debounce_jobs', source_type) is sent only when a job becomes due now, never for an
-- ordinary debounced event (NOTIFY serialises commits). A statement that changes jobs of
-- workspaces ends by moving their line (the claim's index of who has due work,
-- docs/claim.md): its CTE line_moves lists the jobs it changed and _line_upkeep calls
-- workspaces_line_move with them, after every job row of the statement is locked.

-- _line_upkeep --
-- The line's upkeep of a statement, from its CTE line_moves (ws, due: scheduled_at of a job
-- pending now, else NULL; priority; freed: the job left 'processing'): one call of
-- workspaces_line_move (migration 019), whose arguments need every changed job row, so the
-- workspace rows are locked after the job rows; no call when no job of a workspace changed.
line as (
    select workspaces_line_move(array_agg(m.ws), array_agg(m.due), array_agg(m.priority),
                                array_agg(m.freed)) as moved
      from line_moves m
     where m.ws is not null
    having count(*) > 0

-- _enqueue_upsert --
-- The debounce upsert of enqueue, up to its RETURNING list. %(payloads)s is text[]: each
-- event's payload as JSON text, serialised once by the caller
-- (debounce.queue.checks.payload_text) and parsed into jsonb here.
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
), referred as (
    select distinct a.workspace_id as ws from accepted a where a.workspace_id is not null
), {{workspaces._referable}}
), kept as (
    -- the events whose workspace may be referred to, or that have none; the others' workspace
    -- is being removed (or is gone): they enqueue nothing (outcome workspace_removed)
    select a.*
      from accepted a
     where (select count(*) from referable) >= 0
       and (a.workspace_id is null or a.workspace_id in (select id from referable))
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

-- _enqueue_notify --
-- The wake-up of idle workers (enqueue's NOTIFY), one CTE over the upsert's rows, and the
-- line's upkeep.
line_moves as (
    select u.workspace_id as ws, u.scheduled_at as due, u.priority, false as freed
      from upsert u where u.status = 'pending'
    union all
    select f.workspace_id, null, 0, true from moved_from f
), {{_line_upkeep}}
), notify as (
    -- At most one notification per source per batch, and only for a job due within
    -- %(notify_within)s seconds (the workers' longest idle sleep): a worker woken early
    -- re-reads the earliest due time and sleeps exactly until it, so a window shorter than
    -- its poll interval still starts on time; a long window never notifies.
    select pg_notify('debounce_jobs', u.source_type)
      from (select distinct u.source_type from upsert u, clock
             where u.status = 'pending'
               and u.scheduled_at <= clock.now
                                     + make_interval(secs => %(notify_within)s::float8)) u

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
-- An event of a workspace being removed, or gone (a web process's routes are up to a few
-- seconds old), enqueues nothing: outcome workspace_removed (_referable, sql/queries/workspaces.sql).
-- ON CONFLICT restates the partial index predicate so Postgres infers the partial index.
-- Returns one row per input event (ord = 1-based position) with only what the webhook's answer
-- and metrics use: outcome, job id, due time (NULL for a duplicate whose page has no active
-- job); not the job's row (its payload would travel back and be parsed again).
-- NOTIFY: see the notify CTE.
{{_enqueue_upsert}}
    returning j.id, j.source_type, j.source_page_id, j.status, j.scheduled_at, j.workspace_id,
              j.priority, (j.xmax = 0) as inserted
), {{_enqueue_notify}}
), result as (
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
select r.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from result r order by r.ord

-- complete_many --
-- Finish claimed jobs, one statement for a batch: %(ids)s (bigint[]) with their %(lease_tokens)s
-- (uuid[]). If no event arrived since its claim (revision = claimed_revision) a row becomes
-- completed; otherwise it goes back to pending at the due time its events gave it, with fresh
-- attempts (the follow-up sync). Only claims still held match. Rows are locked in
-- (source_type, source_page_id) order, the order enqueue uses, so the two cannot deadlock.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), held as (
    select j.id
      from sync_jobs j
      join unnest(%(ids)s::bigint[], %(lease_tokens)s::uuid[]) as i(id, lease_token)
        on j.id = i.id and j.lease_token = i.lease_token
     order by j.source_type, j.source_page_id
       for update of j
), done as (
    update sync_jobs j
       set status           = case when j.revision = j.claimed_revision
                                   then 'completed' else 'pending' end,
           finished_at      = case when j.revision = j.claimed_revision then clock.now end,
           attempts         = case when j.revision = j.claimed_revision then j.attempts else 0 end,
           last_error       = null,
           checkpoint       = null,
           lease_token      = null,
           lease_expires_at = null,
           locked_by        = null,
           retry_at         = null,
           updated_at       = clock.now
      from held, clock
     where j.id = held.id
    returning j.*
), line_moves as (
    select x.workspace_id as ws, case when x.status = 'pending' then x.scheduled_at end as due,
           x.priority, true as freed
      from done x
), {{_line_upkeep}}
), notify as (
    select pg_notify('debounce_jobs', d.source_type)
      from (select distinct d.source_type from done d, clock
             where d.status = 'pending' and d.scheduled_at <= clock.now) d
)
select d.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from done d

-- fail_many --
-- Record failed syncs of claimed jobs, one statement for a batch: %(ids)s (bigint[]) with
-- their %(lease_tokens)s (uuid[]), %(errors)s (text[]), %(retry_afters)s (float8[], NULL when
-- not rate limited), %(permanents)s (bool[]), %(backoffs)s (float8[]: this attempt's
-- backoff, seconds) and %(checkpoints)s (jsonb[]: what a sync that yielded had fetched, kept
-- for its next claim while the row stays pending; NULL clears it), %(keep_places)s (bool[]: a
-- sync that yielded to its workspace's budget keeps its due time and place in line; the
-- claim's budget check holds it back). Per row:
--   permanent, or attempts spent (and not rate limited) → failed;
--   rate limited (retry_after not NULL)                 → pending at now + retry_after, the
--                                                         attempt given back;
--   otherwise                                          → pending at now + backoff.
-- Revision rule: if an event arrived during the sync, a final failure still leaves a follow-up
-- (pending at its due time, attempts reset), and a retry waits for the later of its backoff and
-- the events' due time. retry_at remembers the backoff so later events cannot pull it earlier.
-- Every decision reads the target row j inside the UPDATE, never a CTE's snapshot: an UPDATE
-- that waited for a concurrent enqueue's row lock re-evaluates its SET list on the row version
-- that enqueue committed (EvalPlanQual), whereas a value computed in a CTE would miss the edit.
-- Rows are locked in (source_type, source_page_id) order, like every multi-row statement.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as (
    select i.*,
           (select now from clock)
             + make_interval(secs => coalesce(i.retry_after, i.backoff)) as retry_time
      from unnest(%(ids)s::bigint[], %(lease_tokens)s::uuid[], %(errors)s::text[],
                  %(retry_afters)s::float8[], %(permanents)s::bool[], %(backoffs)s::float8[],
                  %(checkpoints)s::jsonb[], %(keep_places)s::bool[])
           as i(id, lease_token, error, retry_after, permanent, backoff, checkpoint, keep_place)
), held as (
    select j.id
      from sync_jobs j
      join input i on j.id = i.id and j.lease_token = i.lease_token
     order by j.source_type, j.source_page_id
       for update of j
), failed as (
    update sync_jobs j
       set status           = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                        and j.revision = j.claimed_revision
                                   then 'failed' else 'pending' end,
           attempts         = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                   then case when j.revision <> j.claimed_revision then 0
                                             else j.attempts end
                                   when i.retry_after is not null
                                   then greatest(j.attempts - 1, 0)
                                   else j.attempts end,
           scheduled_at     = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                   then j.scheduled_at
                                   when i.keep_place then j.scheduled_at
                                   when j.revision <> j.claimed_revision
                                   then greatest(i.retry_time, j.scheduled_at)
                                   else i.retry_time end,
           retry_at         = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                        or i.keep_place
                                   then null else i.retry_time end,
           finished_at      = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                        and j.revision = j.claimed_revision
                                   then clock.now end,
           last_error       = i.error,
           checkpoint       = case when (i.permanent
                                         or (i.retry_after is null and j.attempts >= j.max_attempts))
                                   then null else i.checkpoint end,
           lease_token      = null,
           lease_expires_at = null,
           locked_by        = null,
           updated_at       = clock.now
      from held, input i, clock
     where j.id = held.id and i.id = j.id and j.lease_token = i.lease_token
    returning j.*
), line_moves as (
    select x.workspace_id as ws, case when x.status = 'pending' then x.scheduled_at end as due,
           x.priority, true as freed
      from failed x
), {{_line_upkeep}}
), notify as (
    select pg_notify('debounce_jobs', f.source_type)
      from (select distinct f.source_type from failed f, clock
             where f.status = 'pending' and f.scheduled_at <= clock.now) f
)
select f.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from failed f

-- extend_leases --
-- Push the lease of running syncs to now + %(lease_seconds)s. Only claims still held
-- (lease_token matches) are extended; returns their ids and new expiry. Rows are locked in
-- (source_type, source_page_id) order, like every statement that locks several jobs.
with held as (
    select id from sync_jobs
     where lease_token = any(%(lease_tokens)s::uuid[])
     order by source_type, source_page_id
       for update
)
update sync_jobs j
   set lease_expires_at = coalesce(%(now)s::timestamptz, now())
                          + make_interval(secs => %(lease_seconds)s::float8),
       updated_at = coalesce(%(now)s::timestamptz, now())
  from held
 where j.id = held.id
returning j.id, j.lease_expires_at

-- release --
-- Give claimed jobs back untouched (worker shutdown): pending again at their due time, the
-- attempt not counted, lease cleared. Wakes idle workers: these jobs are due. Rows are locked
-- in (source_type, source_page_id) order.
with held as (
    select id from sync_jobs
     where lease_token = any(%(lease_tokens)s::uuid[])
     order by source_type, source_page_id
       for update
), released as (
    update sync_jobs j
       set status = 'pending',
           attempts = greatest(j.attempts - 1, 0),
           lease_token = null,
           lease_expires_at = null,
           locked_by = null,
           updated_at = coalesce(%(now)s::timestamptz, now())
      from held
     where j.id = held.id
    returning j.*
), line_moves as (
    select x.workspace_id as ws, case when x.status = 'pending' then x.scheduled_at end as due,
           x.priority, true as freed
      from released x
), {{_line_upkeep}}
), notify as (
    select pg_notify('debounce_jobs', source_type) from (select distinct source_type from released) r
)
select r.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from released r

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
), requeued as (
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
), line_moves as (
    select x.workspace_id as ws, case when x.status = 'pending' then x.scheduled_at end as due,
           x.priority, true as freed
      from requeued x
), {{_line_upkeep}}
), notify as (
    select pg_notify('debounce_jobs', source_type)
      from (select distinct source_type from requeued where status = 'pending') r
)
select r.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from requeued r

-- resync --
-- Manual re-sync: the page's active job becomes due now with at least %(priority)s; a page
-- without one (never seen, completed, or failed) gets a fresh job, of workspace
-- %(workspace_id)s when given, else of the workspace its document was written by (its token
-- can read the page; no document: no workspace, the environment's token). An active job keeps
-- its workspace. A processing job gets a follow-up due now (revision bumped). No row: that
-- workspace is being removed (_referable, sql/queries/workspaces.sql); nothing changed.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), wanted as (
    select coalesce(%(workspace_id)s::bigint,
                    (select d.workspace_id from documents d
                      where d.source_type = %(source_type)s
                        and d.source_page_id = %(source_page_id)s
                        and d.workspace_id is not null
                      order by d.synced_at desc limit 1)) as ws
), referred as (
    select ws from wanted where ws is not null
), {{workspaces._referable}}
), up as (
    insert into sync_jobs as j
           (source_type, source_page_id, status, payload, event_id, event_count, priority,
            max_attempts, scheduled_at, first_event_at, max_wait_until, revision,
            created_at, updated_at, workspace_id)
    select %(source_type)s, %(source_page_id)s, 'pending', %(payload)s::jsonb, null, 0,
           %(priority)s, %(max_attempts)s, clock.now, clock.now, clock.now, 1,
           clock.now, clock.now, w.ws
      from clock, wanted w
     where (select count(*) from referable) >= 0
       and (w.ws is null or w.ws in (select id from referable))
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
), {{_line_upkeep}}
), notify as (
    select pg_notify('debounce_jobs', source_type) from up
)
select u.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from up u

-- retry --
-- Manual retry of a failed job: pending, due now, attempts reset. Only if the page has no
-- other active job (a later event may already have created one) and its workspace is not
-- being removed (_referable, sql/queries/workspaces.sql).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), referred as (
    select workspace_id as ws from sync_jobs where id = %(id)s and workspace_id is not null
), {{workspaces._referable}}
), revived as (
    update sync_jobs j
       set status = 'pending', attempts = 0, scheduled_at = clock.now, retry_at = null,
           finished_at = null, updated_at = clock.now
      from clock
     where j.id = %(id)s and j.status = 'failed'
       and (select count(*) from referable) >= 0
       and (j.workspace_id is null or j.workspace_id in (select id from referable))
       and not exists (select 1 from sync_jobs a
                        where a.source_type = j.source_type
                          and a.source_page_id = j.source_page_id
                          and a.status in ('pending', 'processing'))
    returning j.*
), line_moves as (
    select r.workspace_id as ws, r.scheduled_at as due, r.priority, false as freed
      from revived r
), {{_line_upkeep}}
), notify as (
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
                       for update of f skip locked)   -- never waits: a removal's cascade
                                                      -- may hold some (docs/claim.md)
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
