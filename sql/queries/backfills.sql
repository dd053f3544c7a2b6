-- Backfill and reconciliation (migration 009): backfills of what a workspace can see, and
-- the bulk jobs they enqueue. Bulk jobs have priority %(priority)s < 0: the fair claim takes
-- them after every live job (sql/queries/claim.sql). %(now)s: a timestamptz or NULL (now()).

-- _held --
-- Backfill %(id)s while %(owner)s holds its lease (a statement of a lost lease changes nothing).
id = %(id)s and lease_owner = %(owner)s and status = 'running'

-- _guarded --
-- The CTE e: the lease holder's backfill, locked, while its workspace may be referred to (its
-- reference lock taken first, _referable in sql/queries/workspaces.sql); no row when it is being
-- removed.
referred as (
    select workspace_id as ws from enumerations where id = %(id)s
), {{workspaces._referable}}
), e as (
    select * from enumerations
     where {{_held}} and workspace_id in (select id from referable)
       for update

-- _insert_bulk_job --
-- The columns of a bulk job (priority < 0, due now, no debounce window: max_wait_until = now);
-- the statements select (source_type, page, 'pending', payload, 0, priority, max_attempts,
-- now, now, now, 1, now, now, workspace_id) into them.
insert into sync_jobs (source_type, source_page_id, status, payload, event_count, priority,
                       max_attempts, scheduled_at, first_event_at, max_wait_until,
                       revision, created_at, updated_at, workspace_id)

-- cancel_reconciliations --
-- A backfill replaces a running reconciliation of workspace %(workspace_id)s.
update enumerations
   set status = 'cancelled', finished_at = now(), updated_at = now(), lease_owner = null
 where workspace_id = %(workspace_id)s and status = 'running' and kind <> 'backfill'
returning id

-- request_backfill --
-- Start a backfill of kind %(kind)s for workspace %(workspace_id)s, unless one is
-- running (then that one is returned: requesting twice is idempotent). inserted says which.
-- No row: no such workspace, or it is being removed.
with referred as (
    select %(workspace_id)s::bigint as ws
), {{workspaces._referable}}
), ins as (
    insert into enumerations (workspace_id, source_type, kind, watermark)
    select w.id, w.source_type, %(kind)s,
           case when %(kind)s = 'reconcile' then w.reconcile_watermark end
      from workspaces w
     where w.id in (select id from referable)
    on conflict (workspace_id) where status = 'running' do nothing
    returning *
)
select ins.*, true as inserted from ins
union all
select e.*, false from enumerations e
 where e.workspace_id = %(workspace_id)s and e.status = 'running'
   and not exists (select 1 from ins)
   and e.workspace_id in (select id from referable)

-- schedule_reconciliations --
-- Start the reconciliations that are due: active workspaces of %(sources)s (text[])
-- with reconciliation on (the workspace's setting, else on for %(default_on)s text[]), whose
-- last reconciliation finished %(interval)s seconds ago or more (never: due), and no backfill
-- running. A reconciliation is a whole-list one (full_reconcile, to find deletions) when the last
-- whole list is %(full_interval)s seconds old or more. Returns the reconciliations started.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
insert into enumerations (workspace_id, source_type, kind, watermark, started_at, updated_at,
                          not_before)
select w.id, w.source_type,
       case when w.full_reconciled_at is null
                 or w.full_reconciled_at <= clock.now - make_interval(secs => %(full_interval)s)
            then 'full_reconcile' else 'reconcile' end,
       w.reconcile_watermark, clock.now, clock.now, clock.now
  from workspaces w cross join clock
 where w.status = 'active'
   and w.source_type = any(%(sources)s::text[])
   and coalesce(w.reconcile, w.source_type = any(%(default_on)s::text[]))
   and (w.reconciled_at is null
        or w.reconciled_at <= clock.now - make_interval(secs => %(interval)s))
   and not exists (select 1 from enumerations e
                    where e.workspace_id = w.id and e.status = 'running')
 order by w.id
   for key share of w     -- many workspaces: their rows, not their reference locks (migration 021)
on conflict (workspace_id) where status = 'running' do nothing
returning *

-- schedule_backfills --
-- Connecting a workspace backfills it: start a backfill for every active workspace of
-- %(sources)s (text[]) that never had a backfill, however it was connected (environment
-- token, install flow, CLI). Returns the backfills started.
insert into enumerations (workspace_id, source_type, kind)
select w.id, w.source_type, 'backfill'
  from workspaces w
 where w.status = 'active'
   and w.source_type = any(%(sources)s::text[])
   and not exists (select 1 from enumerations e where e.workspace_id = w.id)
 order by w.id
   for key share of w     -- many workspaces: their rows, not their reference locks (migration 021)
on conflict (workspace_id) where status = 'running' do nothing
returning *

-- lease_backfill --
-- Take one running backfill of %(sources)s (text[]) of an active workspace (whose token
-- decrypts: no credentials_error) for
-- %(owner)s for %(lease_seconds)s: one whose lease is free or expired and whose not_before
-- has passed; those of kind backfill first. Rows another worker is taking are skipped.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), next as (
    select e.id
      from enumerations e
      join workspaces w on w.id = e.workspace_id
     cross join clock
     where e.status = 'running'
       and e.source_type = any(%(sources)s::text[])
       and w.status = 'active'
       and w.credentials_error is null   -- its token does not decrypt here: parked
       and (w.blocked_until is null or w.blocked_until <= clock.now)
       and e.not_before <= clock.now
       and (e.lease_expires_at is null or e.lease_expires_at <= clock.now)
     order by e.kind = 'backfill' desc, e.id
     limit 1
       for update of e skip locked
)
update enumerations e
   set lease_owner = %(owner)s,
       lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
       updated_at = clock.now
  from next, clock
 where e.id = next.id
returning e.*

-- record_backfill_page --
-- One page of backfill %(id)s's listing, one statement, only while %(owner)s holds its
-- lease: the items (%(page_ids)s text[], %(edited_ats)s timestamptz[] (NULL: the listing does
-- not say), %(payloads)s jsonb[]) are judged against the documents —
--   current: a live document of the page with source_updated_at >= the item's last edit (an
--            item without one: any live document, or the sync state, of the page) → skipped;
--   stale or missing → a bulk job (priority %(priority)s, due now, no debounce window), unless
--            the page has an active job already, which it keeps (ON CONFLICT DO NOTHING:
--            backfilling twice creates nothing twice);
-- the documents of listed pages are stamped listed_at (whole-list kinds) and, when they
-- have no workspace (it was removed), attached to this enumeration's; and the
-- enumeration's cursor becomes %(cursor)s with its counts, newest_seen and lease renewed.
-- Returns the backfill row (no row: the lease was lost; nothing was written).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), {{_guarded}}
), input as (
    select distinct on (i.page_id) i.*
      from unnest(%(page_ids)s::text[], %(edited_ats)s::timestamptz[], %(payloads)s::jsonb[])
           as i(page_id, edited_at, payload)
     where exists (select 1 from e)
     order by i.page_id
), judged as (
    select i.*,
           exists (select 1 from documents d
                    where d.source_type = e.source_type and d.source_page_id = i.page_id
                      and d.deleted_at is null
                      and (i.edited_at is null or d.source_updated_at >= i.edited_at))
           or (i.edited_at is null
               and exists (select 1 from sync_state s
                            where s.source_type = e.source_type
                              and s.source_page_id = i.page_id)) as current
      from input i cross join e
), ins as (
    {{_insert_bulk_job}}
    select e.source_type, j.page_id, 'pending', j.payload, 0, %(priority)s, %(max_attempts)s,
           clock.now, clock.now, clock.now, 1, clock.now, clock.now, e.workspace_id
      from judged j cross join e cross join clock
     where not j.current
     order by j.page_id
    on conflict (source_type, source_page_id) where status in ('pending', 'processing')
    do nothing
    returning workspace_id, scheduled_at, priority
), listed_docs as (
    -- after the jobs, in id order (docs/claim.md)
    select d.id
      from documents d, input i, e
     where (e.kind <> 'reconcile' or (d.workspace_id is null and e.workspace_id is not null))
       and d.source_type = e.source_type and d.source_page_id = i.page_id
       and (select count(*) from ins) >= 0
     order by d.id
       for update of d
), listed as (
    -- Stamp listed_at (whole lists), and re-attach a document left without a workspace
    -- (its workspace was removed, then connected again as a new row) to the one listing it.
    update documents d
       set listed_at = case when e.kind <> 'reconcile' then clock.now else d.listed_at end,
           workspace_id = coalesce(d.workspace_id, e.workspace_id)
      from e, clock
     where d.id in (select id from listed_docs)
    returning d.id
), line_moves as (
    -- after the documents: the lock order is jobs, documents, workspaces (docs/claim.md)
    select i.workspace_id as ws, i.scheduled_at as due, i.priority, false as freed
      from ins i
     where (select count(*) from listed) >= 0
), {{queue._line_upkeep}}
), counts as (
    select (select count(*) from input)::int                       as n,
           (select count(*) from judged where current)::int        as current,
           (select count(*) from ins)::int                         as enqueued,
           (select max(edited_at) from input)                      as newest,
           (select count(*) from listed)::int                      as listed
)
update enumerations x
   set cursor           = %(cursor)s,
       listing_pages    = x.listing_pages + 1,
       discovered       = x.discovered + counts.n,
       current          = x.current + counts.current,
       enqueued         = x.enqueued + counts.enqueued,
       active           = x.active + (counts.n - counts.current - counts.enqueued),
       newest_seen      = greatest(x.newest_seen, counts.newest),
       lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
       updated_at       = clock.now
  from e, counts, clock
 where x.id = e.id and (select count(*) from line) >= 0
returning x.*, counts.enqueued as page_enqueued

-- finish_backfill --
-- Backfill %(id)s (leased by %(owner)s) is complete. The workspace remembers the reconciliation
-- (reconciled_at, the newest edit seen as the next reconciliation's watermark); after a whole list
-- (backfill, full_reconcile) every live document of the workspace that the listing did not
-- show, that was not synced since the backfill started and that existed before it began
-- (created by a transaction its started_snapshot saw committed) is re-checked once: a bulk job
-- for its page (the sync marks it deleted when the source says it is gone). Returns the row.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), {{_guarded}}
), vanished as (
    select distinct d.source_page_id
      from documents d, e
     where e.kind <> 'reconcile'
       and d.workspace_id = e.workspace_id and d.source_type = e.source_type
       and d.deleted_at is null
       and (d.listed_at is null or d.listed_at < e.started_at)
       and d.synced_at < e.started_at
       -- as the documents were before the backfill began (migration 027)
       and (d.created_xid is null or e.started_snapshot is null
            or pg_visible_in_snapshot(d.created_xid, e.started_snapshot))
), rechecks as (
    {{_insert_bulk_job}}
    select e.source_type, v.source_page_id, 'pending', '{"recheck": true}'::jsonb, 0,
           %(priority)s, %(max_attempts)s, clock.now, clock.now, clock.now, 1, clock.now,
           clock.now, e.workspace_id
      from vanished v cross join e cross join clock
     order by v.source_page_id
    on conflict (source_type, source_page_id) where status in ('pending', 'processing')
    do nothing
    returning 1
), ws as (
    -- after the rechecks' job rows (it reads their count): the workspace's line moves to its
    -- due rechecks as workspaces_line_move would move it (docs/claim.md), in the same update
    update workspaces w
       set reconciled_at       = clock.now,
           reconcile_watermark = greatest(w.reconcile_watermark, e.newest_seen),
           full_reconciled_at  = case when e.kind <> 'reconcile' then clock.now
                                      else w.full_reconciled_at end,
           live_due_at         = case when r.n > 0 and %(priority)s::int >= 0
                                      then least(w.live_due_at, clock.now) else w.live_due_at end,
           bulk_due_at         = case when r.n > 0 and %(priority)s::int < 0
                                      then least(w.bulk_due_at, clock.now) else w.bulk_due_at end
      from e, clock, (select count(*) as n from rechecks) r
     where w.id = e.workspace_id
    returning w.id
)
update enumerations x
   set status = 'done', finished_at = clock.now, updated_at = clock.now, cursor = null,
       rechecks = x.rechecks + (select count(*) from rechecks),
       lease_owner = null, lease_expires_at = null
  from e, clock
 where x.id = e.id and (select count(*) from ws) >= 0
returning x.*

-- defer_backfill --
-- Backfill %(id)s (leased by %(owner)s) waits %(seconds)s before its next page (a 429, a
-- dry budget, a transient error): the lease is freed and %(error)s recorded.
update enumerations
   set not_before = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s::float8),
       lease_owner = null, lease_expires_at = null, error = %(error)s,
       updated_at = coalesce(%(now)s::timestamptz, now())
 where {{_held}}
returning *

-- fail_backfill --
-- Backfill %(id)s cannot go on (the source refused it: no access, a revoked token): failed
-- with %(error)s. A later request starts a new one.
update enumerations
   set status = 'failed', error = %(error)s, finished_at = now(), updated_at = now(),
       lease_owner = null, lease_expires_at = null
 where {{_held}}
returning *

-- release_backfills --
-- Give back the leases %(owner)s holds (shutdown): another worker continues from the cursor.
update enumerations
   set lease_owner = null, lease_expires_at = null, updated_at = now()
 where lease_owner = %(owner)s and status = 'running'
returning id

-- latest_backfill --
-- Workspace %(workspace_id)s's latest backfill with its progress: remaining = the
-- workspace's bulk jobs still pending or running.
select e.*,
       (select count(*) from sync_jobs j
         where j.workspace_id = e.workspace_id and j.status in ('pending', 'processing')
           and j.priority < 0)::int as remaining
  from enumerations e
 where e.workspace_id = %(workspace_id)s
 order by e.id desc
 limit 1

-- set_reconcile --
-- Turn reconciliation of workspace %(id)s on, off, or (NULL) back to its source's default.
update workspaces set reconcile = %(reconcile)s, updated_at = now()
 where id = %(id)s
returning id, source_type, reconcile
