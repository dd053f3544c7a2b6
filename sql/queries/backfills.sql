-- Backfill and reconciliation (migration 009): backfills of what a workspace can see, and
-- the bulk jobs they enqueue. Bulk jobs have a priority %(priority)s whose job_lane is 'bulk'
-- (migration 022): the fair claim takes them after every live job (sql/queries/claim.sql).
-- %(now)s: a timestamptz or NULL (now()).

-- _held --
-- Backfill %(id)s while %(owner)s holds its lease (a statement of a lost lease changes nothing).
id = %(id)s and lease_owner = %(owner)s and status = 'running'

-- cancel_reconciliations --
-- A backfill replaces a running reconciliation of workspace %(workspace_id)s.
update backfills
   set status = 'cancelled', finished_at = now(), updated_at = now(), lease_owner = null
 where workspace_id = %(workspace_id)s and status = 'running' and kind <> 'backfill'
returning id

-- request_backfill --
-- Start a backfill of kind %(kind)s for workspace %(workspace_id)s, unless one is
-- running (then that one is returned: requesting twice is idempotent). inserted says which.
-- No row: no such workspace, or it is removed.
with ins as (
    insert into backfills (workspace_id, source_type, kind, watermark)
    select w.id, w.source_type, %(kind)s,
           case when %(kind)s = 'reconcile' then w.reconcile_watermark end
      from workspaces w
     where w.id = %(workspace_id)s and w.status <> 'removed'
    on conflict (workspace_id) where status = 'running' do nothing
    returning *
)
select ins.*, true as inserted from ins
union all
select e.*, false from backfills e
 where e.workspace_id = %(workspace_id)s and e.status = 'running'
   and not exists (select 1 from ins)
   and not exists (select 1 from workspaces w
                    where w.id = %(workspace_id)s and w.status = 'removed')

-- schedule_reconciliations --
-- Start the reconciliations that are due: active workspaces of %(sources)s (text[])
-- with reconciliation on (the workspace's setting, else on for %(default_on)s text[]), whose
-- last reconciliation finished %(interval)s seconds ago or more (never: due), and no backfill
-- running. A reconciliation is a whole-list one (full_reconcile, to find deletions) when the last
-- whole list is %(full_interval)s seconds old or more. Returns the reconciliations started.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
insert into backfills (workspace_id, source_type, kind, watermark, started_at, updated_at,
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
   and not exists (select 1 from backfills e
                    where e.workspace_id = w.id and e.status = 'running')
 order by w.id
on conflict (workspace_id) where status = 'running' do nothing
returning *

-- schedule_backfills --
-- Connecting a workspace backfills it: start a backfill for every active workspace of
-- %(sources)s (text[]) that never had a backfill, however it was connected (environment
-- token, install flow, CLI). Returns the backfills started.
insert into backfills (workspace_id, source_type, kind)
select w.id, w.source_type, 'backfill'
  from workspaces w
 where w.status = 'active'
   and w.source_type = any(%(sources)s::text[])
   and not exists (select 1 from backfills e where e.workspace_id = w.id)
 order by w.id
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
      from backfills e
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
update backfills e
   set lease_owner = %(owner)s,
       lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::float8),
       updated_at = clock.now
  from next, clock
 where e.id = next.id
returning e.*

-- record_backfill_page --
-- One page of backfill %(id)s's listing, only while %(owner)s holds its lease and its
-- workspace is not removed (backfill_page, migration 022, in ordered steps): the items
-- (%(page_ids)s text[], %(edited_ats)s timestamptz[] (NULL: the listing does not say),
-- %(payloads)s jsonb[]) are judged against the documents —
--   current: a live document of the page with source_updated_at >= the item's last edit (an
--            item without one: any live document, or the sync state, of the page) → skipped;
--   stale or missing → a bulk job (priority %(priority)s, due now, no debounce window), unless
--            the page has an active job already, which it keeps (ON CONFLICT DO NOTHING:
--            backfilling twice creates nothing twice);
-- the documents of listed pages are stamped listed_at (whole-list kinds), the workspace's
-- line moves to the new jobs, and the backfill's cursor becomes %(cursor)s with its counts,
-- newest_seen and lease renewed. Returns the backfill row and page_enqueued (no row: the
-- lease was lost; nothing was written).
select (p.backfill).*, p.page_enqueued
  from backfill_page(%(id)s::bigint, %(owner)s::text, %(now)s::timestamptz,
                     %(page_ids)s::text[], %(edited_ats)s::timestamptz[], %(payloads)s::jsonb[],
                     %(cursor)s::text, %(priority)s::int, %(max_attempts)s::int,
                     %(lease_seconds)s::float8) p

-- finish_backfill --
-- Backfill %(id)s (leased by %(owner)s) is complete (backfill_finish, migration 022). The
-- workspace remembers the reconciliation (reconciled_at, the newest edit seen as the next
-- reconciliation's watermark); after a whole list (backfill, full_reconcile) every live
-- document of the workspace that the listing did not show and that was not synced since the
-- backfill started is re-checked once: a bulk job (priority %(priority)s) for its page (the
-- sync marks it deleted when the source says it is gone). Returns the row.
select * from backfill_finish(%(id)s::bigint, %(owner)s::text, %(now)s::timestamptz,
                              %(priority)s::int, %(max_attempts)s::int)

-- defer_backfill --
-- Backfill %(id)s (leased by %(owner)s) waits %(seconds)s before its next page (a 429, a
-- dry budget, a transient error): the lease is freed and %(error)s recorded.
update backfills
   set not_before = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s::float8),
       lease_owner = null, lease_expires_at = null, error = %(error)s,
       updated_at = coalesce(%(now)s::timestamptz, now())
 where {{_held}}
returning *

-- fail_backfill --
-- Backfill %(id)s cannot go on (the source refused it: no access, a revoked token): failed
-- with %(error)s. A later request starts a new one.
update backfills
   set status = 'failed', error = %(error)s, finished_at = now(), updated_at = now(),
       lease_owner = null, lease_expires_at = null
 where {{_held}}
returning *

-- release_backfills --
-- Give back the leases %(owner)s holds (shutdown): another worker continues from the cursor.
update backfills
   set lease_owner = null, lease_expires_at = null, updated_at = now()
 where lease_owner = %(owner)s and status = 'running'
returning id

-- latest_backfill --
-- Workspace %(workspace_id)s's latest backfill with its progress: remaining = the
-- workspace's bulk jobs still pending or running.
select e.*,
       (select count(*) from sync_jobs j
         where j.workspace_id = e.workspace_id and j.status in ('pending', 'processing')
           and job_lane(j.priority) = 'bulk')::int as remaining
  from backfills e
 where e.workspace_id = %(workspace_id)s
 order by e.id desc
 limit 1

-- set_reconcile --
-- Turn reconciliation of workspace %(id)s on, off, or (NULL) back to its source's default.
update workspaces set reconcile = %(reconcile)s, updated_at = now()
 where id = %(id)s
returning id, source_type, reconcile

-- cancel_removed --
-- Cancel up to %(limit)s running backfills of removed workspaces (of workspace
-- %(workspace_id)s; NULL: of any), the reason in error. Rows another statement holds are
-- skipped (the next batch takes them). Returns their ids.
with batch as (
    select e.id
      from backfills e
     where e.status = 'running'
       and e.workspace_id = any(array(select w.id from workspaces w
                                       where w.status = 'removed'
                                         and (%(workspace_id)s::bigint is null
                                              or w.id = %(workspace_id)s::bigint)))
     order by e.id
     limit %(limit)s
       for update of e skip locked
)
update backfills e
   set status = 'cancelled', error = 'its workspace was removed', finished_at = now(),
       updated_at = now(), lease_owner = null, lease_expires_at = null
  from batch
 where e.id = batch.id
returning e.id
