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
-- pull it earlier. A settled job leaves sync_jobs (migration 034): a finished one (completed,
-- failed) moves into finished_jobs, one that goes on is inserted back under its id. Every
-- decision reads the row the DELETE returns, never a CTE's snapshot of sync_jobs: a DELETE
-- whose row a concurrent enqueue changed re-reads the version that enqueue committed
-- (EvalPlanQual) and returns that one, whereas a value computed from a scan in a CTE would
-- miss the edit; and the DELETE's filter reads only what an enqueue never changes (id, lease
-- token). Only claims still held match (the lease fence: an outcome whose token no longer
-- matches changes nothing). Rows are locked once, in (source_type, source_page_id) order like
-- every multi-row statement; the line moves once for all the jobs settled.
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
), gone as (
    -- every job settled leaves sync_jobs: the DELETE locks nothing new (held has the rows)
    -- and returns each row as it is now (an enqueue that committed before held locked it
    -- included: the DELETE re-reads the newest version, EvalPlanQual), so every decision below
    -- reads that version; the jobs that go on are inserted back, the others into finished_jobs
    delete from sync_jobs j
     using held, input i
     where j.id = held.id and i.id = j.id and j.lease_token = i.lease_token
       and i.outcome <> 'renewed'
    returning j.*, i.done, i.error, i.retry_time, i.keep_place, i.checkpoint as kept_checkpoint,
              -- ends: no retry (completed; failed permanently or with its attempts spent and
              -- not rate limited)
              (i.done or i.permanent or (i.retry_after is null and j.attempts >= j.max_attempts))
                  as ends,
              i.retry_after
), finished as (
    insert into finished_jobs
    select g.id, g.source_type, g.source_page_id,
           case when g.done then 'completed' else 'failed' end, g.payload, g.event_id,
           g.event_count, g.priority, g.attempts, g.max_attempts, g.scheduled_at,
           g.first_event_at, g.max_wait_until, null, null, null, null, g.revision,
           g.claimed_revision, g.error, g.created_at, clock.now, clock.now, g.workspace_id,
           null, g.change_kinds
      from gone g, clock
     where g.ends and g.revision = g.claimed_revision
    returning *
), again as (
    insert into sync_jobs overriding system value
    select g.id, g.source_type, g.source_page_id, 'pending', g.payload, g.event_id,
           g.event_count, g.priority,
           case when g.ends then 0   -- here: an event arrived during the sync
                when g.retry_after is not null then greatest(g.attempts - 1, 0)
                else g.attempts end,
           g.max_attempts,
           case when g.ends or g.keep_place then g.scheduled_at
                when g.revision <> g.claimed_revision
                then greatest(g.retry_time, g.scheduled_at)
                else g.retry_time end,
           g.first_event_at, g.max_wait_until,
           case when g.ends or g.keep_place then null else g.retry_time end,
           null, null, null, g.revision, g.claimed_revision, g.error, g.created_at, clock.now,
           null, g.workspace_id,
           case when g.ends then null else g.kept_checkpoint end, g.change_kinds
      from gone g, clock
     where not (g.ends and g.revision = g.claimed_revision)
    returning *
), settled as (
    select * from finished
    union all
    select * from again
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
-- Jobs whose lease ran out (their worker died): back to pending, due now, or failed (moved
-- into finished_jobs) when their attempts are spent and no event is waiting (an event during
-- the lost run still gets a follow-up with fresh attempts).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), expired as (
    select j.id
      from sync_jobs j, clock
     where j.status = 'processing' and j.lease_expires_at < clock.now
     order by j.lease_expires_at
     limit %(limit)s
     for update of j skip locked
), gone as (
    -- the rows leave sync_jobs; a failed one moves into finished_jobs, the others come back
    -- pending (as settle does, migration 034); the DELETE returns each row's newest version
    delete from sync_jobs j
     using expired
     where j.id = expired.id
    returning j.*, (j.attempts >= j.max_attempts and j.revision = j.claimed_revision) as final,
              'lease expired: worker ' || coalesce(j.locked_by, '?')
              || ' stopped renewing it (crashed or stuck)' as reason
), finished as (
    insert into finished_jobs
    select g.id, g.source_type, g.source_page_id, 'failed', g.payload, g.event_id,
           g.event_count, g.priority, g.attempts, g.max_attempts,
           least(g.scheduled_at, clock.now), g.first_event_at, g.max_wait_until, g.retry_at,
           null, null, null, g.revision, g.claimed_revision, g.reason, g.created_at, clock.now,
           clock.now, g.workspace_id, g.checkpoint, g.change_kinds
      from gone g, clock
     where g.final
    returning *
), again as (
    insert into sync_jobs overriding system value
    select g.id, g.source_type, g.source_page_id, 'pending', g.payload, g.event_id,
           g.event_count, g.priority,
           case when g.attempts >= g.max_attempts then 0 else g.attempts end, g.max_attempts,
           least(g.scheduled_at, clock.now), g.first_event_at, g.max_wait_until, g.retry_at,
           null, null, null, g.revision, g.claimed_revision, g.reason, g.created_at, clock.now,
           null, g.workspace_id, g.checkpoint, g.change_kinds
      from gone g, clock
     where not g.final
    returning *
), settled as (
    select * from finished
    union all
    select * from again
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
-- Manual retry of a failed job: it moves back from finished_jobs into sync_jobs under its id
-- (migration 034), pending, due now, attempts reset. Only if its workspace is not removed and
-- the page has no other active job (a later event may already have created one: the insert
-- then does nothing and the job stays finished). Two retries at once: the first moves it, the
-- second (waiting for the row's lock) then finds it gone.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), failed as (
    select f.*
      from finished_jobs f
     where f.id = %(id)s and f.status = 'failed'
       and not exists (select 1 from workspaces w
                        where w.id = f.workspace_id and w.status = 'removed')
       for update of f
), revived as (
    insert into sync_jobs overriding system value
    select f.id, f.source_type, f.source_page_id, 'pending', f.payload, f.event_id,
           f.event_count, f.priority, 0, f.max_attempts, clock.now, f.first_event_at,
           f.max_wait_until, null, null, null, null, f.revision, f.claimed_revision,
           f.last_error, f.created_at, clock.now, null, f.workspace_id, f.checkpoint,
           f.change_kinds
      from failed f, clock
    on conflict (source_type, source_page_id) where status in ('pending', 'processing')
    do nothing
    returning *
), moved as (
    delete from finished_jobs f
     using revived r
     where f.id = r.id
    returning 1
), line_moves as (
    select r.workspace_id as ws, r.scheduled_at as due, r.priority, false as freed
      from revived r
), {{_line_upkeep}}, notify as (
    select pg_notify('debounce_jobs', source_type) from revived
)
select r.*, (select count(*) from notify) as notified, (select count(*) from line) as moved
  from revived r

-- get --
-- One job by id: active (sync_jobs) or finished (finished_jobs; a read by id looks into each
-- partition's primary key).
select * from sync_jobs where id = %(id)s
union all
select * from finished_jobs where id = %(id)s
limit 1

-- list --
-- Jobs, newest id first, filtered; %(cursor)s is the last id of the previous page (or NULL).
-- Active and finished ones (finished_jobs) alike.
select *
  from (select * from sync_jobs
        union all
        select * from finished_jobs) j
 where (%(status)s::text is null or status = %(status)s::text)
   and (%(source_type)s::text is null or source_type = %(source_type)s::text)
   and (%(source_page_id)s::text is null or source_page_id = %(source_page_id)s::text)
   and (%(cursor)s::bigint is null or id < %(cursor)s::bigint)
 order by id desc
 limit %(limit)s

-- stats --
-- Counts by source and state (finished ones in finished_jobs), and per source the age in
-- seconds of the oldest due pending job.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select j.source_type, j.status, count(*)::bigint as jobs,
       coalesce(extract(epoch from clock.now - min(j.scheduled_at)
                filter (where j.status = 'pending' and j.scheduled_at <= clock.now)), 0)::float8
           as oldest_due_age_seconds
  from (select source_type, status, scheduled_at from sync_jobs
        union all
        select source_type, status, scheduled_at from finished_jobs) j, clock
 group by j.source_type, j.status, clock.now
 order by 1, 2

-- prune --
-- Retention of finished jobs, a partition drop (migration 034): adopt the DEFAULT partition's
-- rows, make partitions of finished_jobs ahead (each %(span)s seconds wide), drop those whose
-- jobs all finished more than %(job_older_than)s seconds before %(now)s (NULL: now()); and
-- delete remembered event ids older than %(event_older_than)s seconds, at most %(limit)s
-- (NULL: all). With %(exclusive)s, only if this transaction gets the advisory lock
-- %(lock_id)s (so one worker at a time prunes; the others skip). Returns how many jobs and
-- event ids, the partitions dropped and added, the rows the DEFAULT partition held, and
-- whether it ran.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), lock as (
    select case when %(exclusive)s::bool then pg_try_advisory_xact_lock(%(lock_id)s::bigint)
                else true end as got
), retain as (
    select r.*
      from clock,
           finished_jobs_retain(clock.now, %(job_older_than)s::float8, %(span)s::float8) r
     where (select got from lock)
), events as (
    delete from seen_events e
     where (select got from lock)
       and e.ctid in (select o.ctid from seen_events o, clock
                       where o.seen_at < clock.now - make_interval(secs => %(event_older_than)s::float8)
                       limit %(limit)s)
    returning 1
)
select coalesce((select jobs from retain), 0) as jobs, (select count(*) from events) as events,
       coalesce((select dropped from retain), 0) as dropped,
       coalesce((select added from retain), 0) as added,
       coalesce((select overflow from retain), 0) as overflow,
       (select got from lock) as ran

-- cancel_removed --
-- Finish up to %(limit)s pending jobs of removed workspaces (of workspace %(workspace_id)s;
-- NULL: of any): failed, their reason in last_error, moved into finished_jobs (migration
-- 034). Only job rows no one holds (SKIP LOCKED: a statement holding one keeps it, the next
-- batch takes it), so it waits for nothing; it locks no workspace: a removed workspace is out
-- of the line, and a lane left earlier than its jobs only costs a look once it is connected
-- again (docs/claim.md). Returns their ids.
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
), gone as (
    delete from sync_jobs j
     using batch
     where j.id = batch.id
    returning j.*
), finished as (
    insert into finished_jobs
    select g.id, g.source_type, g.source_page_id, 'failed', g.payload, g.event_id,
           g.event_count, g.priority, g.attempts, g.max_attempts, g.scheduled_at,
           g.first_event_at, g.max_wait_until, null, null, null, null, g.revision,
           g.claimed_revision, 'cancelled: its workspace was removed', g.created_at, now(),
           now(), g.workspace_id, null, g.change_kinds
      from gone g
    returning id
)
select id from finished
