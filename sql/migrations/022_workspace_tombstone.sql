-- 022: removing a workspace is a tombstone; the lane rule written once; backfills named as
-- the glossary names them (issue 37).
--
-- Migration 021 removed a workspace in two steps under an advisory "reference lock", because
-- deleting the row cascaded into every row that referred to it. Now the row stays: status
-- 'removed', its credentials erased, its name and ids kept. Nothing cascades, so nothing but
-- the row itself is locked by a removal (docs/claim.md, "Removing a workspace"). Its pending
-- jobs and running backfills are finished in batches (queue.cancel_removed,
-- backfills.cancel_removed); its documents keep their workspace, and are marked deleted in
-- batches when the removal asked for it (purge_documents). Connecting the same workspace again
-- revives the same row: its documents and history are its own again.

-- 1. The lane of a job, the one rule: priority < 0 is bulk (backfills, reconciliations), else
--    live (webhooks, re-syncs). Immutable, so indexes are defined by it too.
create function job_lane(priority integer) returns text
language sql immutable parallel safe
as $$ select case when priority < 0 then 'bulk' else 'live' end $$;

drop index sync_jobs_ready_live;
drop index sync_jobs_ready_bulk;
create index sync_jobs_ready_live on sync_jobs (workspace_id, scheduled_at)
    where status = 'pending' and workspace_id is not null and job_lane(priority) = 'live';
create index sync_jobs_ready_bulk on sync_jobs (workspace_id, scheduled_at)
    where status = 'pending' and workspace_id is not null and job_lane(priority) = 'bulk';

-- Named by no statement (the claim reads sync_jobs_claim_workspace and
-- sync_jobs_claim_unowned since migration 019), and unused by the suite and the benchmarks
-- (pg_stat_user_indexes, issue 37).
drop index sync_jobs_claim_source;

create or replace function workspace_lanes(ws bigint, taken bigint[])
returns table (live_due_at timestamptz, bulk_due_at timestamptz)
language sql stable parallel safe
as $$
    select (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and job_lane(j.priority) = 'live'
               and j.id <> all(taken)),
           (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and job_lane(j.priority) = 'bulk'
               and j.id <> all(taken))
$$;

create or replace function workspaces_line_move(p_ws bigint[], p_due timestamptz[],
                                                p_priority integer[], p_freed boolean[])
returns integer
language plpgsql as $$
declare
    changed integer;
begin
    perform 1 from workspaces where id = any(p_ws) order by id for no key update;
    update workspaces w
       set live_due_at = least(w.live_due_at, m.live_due_at),
           bulk_due_at = least(w.bulk_due_at, m.bulk_due_at),
           at_concurrency_limit = w.at_concurrency_limit and not m.freed
      from (select m.ws, min(m.due) filter (where job_lane(m.priority) = 'live') as live_due_at,
                   min(m.due) filter (where job_lane(m.priority) = 'bulk') as bulk_due_at,
                   bool_or(m.freed) as freed
              from unnest(p_ws, p_due, p_priority, p_freed) as m(ws, due, priority, freed)
             where m.ws is not null
             group by m.ws) m
     where w.id = m.ws
       and (w.live_due_at, w.bulk_due_at, w.at_concurrency_limit)
           is distinct from (least(w.live_due_at, m.live_due_at),
                             least(w.bulk_due_at, m.bulk_due_at),
                             w.at_concurrency_limit and not m.freed);
    get diagnostics changed = row_count;
    return changed;
end
$$;

-- 2. The tombstone. 'removing' (migration 021) becomes 'removed'; the reference lock goes.
-- A removed workspace has no credentials, whatever its origin.
alter table workspaces drop constraint workspaces_status_check;
alter table workspaces drop constraint workspaces_check;
update workspaces set status = 'removed', credentials = null where status = 'removing';
alter table workspaces add constraint workspaces_status_check
    check (status in ('active', 'paused', 'revoked', 'removed'));
alter table workspaces add constraint workspaces_credentials_check
    check (origin = 'env' or status = 'removed' or credentials is not null);
-- The removal asked for its documents to be marked deleted (documents.purge_removed).
alter table workspaces add column purge_documents boolean not null default false;
drop function workspaces_referable(bigint[]);
drop function workspace_removal_begins(bigint);

-- Foreign keys without cascades: a workspace row is never deleted.
alter table sync_jobs drop constraint sync_jobs_workspace_id_fkey,
    add constraint sync_jobs_workspace_id_fkey foreign key (workspace_id) references workspaces (id);
alter table documents drop constraint documents_workspace_id_fkey,
    add constraint documents_workspace_id_fkey foreign key (workspace_id) references workspaces (id);
alter table conversation_audiences drop constraint conversation_audiences_workspace_id_fkey,
    add constraint conversation_audiences_workspace_id_fkey
        foreign key (workspace_id) references workspaces (id);
alter table workspace_sync_costs drop constraint workspace_sync_costs_workspace_id_fkey,
    add constraint workspace_sync_costs_workspace_id_fkey
        foreign key (workspace_id) references workspaces (id);

-- 3. enumerations is the glossary's backfills (a backfill, a reconciliation, a whole-list one).
alter table enumerations rename to backfills;
alter sequence enumerations_id_seq rename to backfills_id_seq;
alter index enumerations_pkey rename to backfills_pkey;
alter index enumerations_running rename to backfills_running;
alter index enumerations_workspace rename to backfills_workspace;
alter table backfills rename constraint enumerations_kind_check to backfills_kind_check;
alter table backfills rename constraint enumerations_status_check to backfills_status_check;
alter table backfills rename constraint enumerations_times_finite to backfills_times_finite;
alter table backfills drop constraint enumerations_workspace_id_fkey,
    add constraint backfills_workspace_id_fkey foreign key (workspace_id) references workspaces (id);

-- 4. A backfill's page and its end, as ordered steps (each statement sees the one before): the
--    backfill row, then job rows, then documents, then the workspace row — the global lock
--    order (docs/claim.md, "Keeping the line"). A backfill whose lease was lost, or whose
--    workspace was removed, changes nothing (no row).
create function backfill_page(p_id bigint, p_owner text, p_now timestamptz, p_page_ids text[],
                              p_edited_ats timestamptz[], p_payloads jsonb[], p_cursor text,
                              p_priority integer, p_max_attempts integer, p_lease_seconds float8)
returns table (backfill backfills, page_enqueued integer)
language plpgsql as $$
declare
    v_now      timestamptz := coalesce(p_now, now());
    b          backfills;
    v_n        integer;
    v_current  integer;
    v_newest   timestamptz;
    v_enqueued integer;
    v_due      timestamptz[];
    v_priority integer[];
begin
    -- 1. the backfill, while its lease is held and its workspace is not removed
    select e.* into b
      from backfills e
     where e.id = p_id and e.lease_owner = p_owner and e.status = 'running'
       and exists (select 1 from workspaces w where w.id = e.workspace_id and w.status <> 'removed')
       for update of e;
    if not found then
        return;
    end if;

    -- 2. the items judged against the documents; a bulk job for each stale or missing page
    --    unless the page has an active job already (ON CONFLICT DO NOTHING)
    with input as (
        select distinct on (i.page_id) i.*
          from unnest(p_page_ids, p_edited_ats, p_payloads) as i(page_id, edited_at, payload)
         order by i.page_id
    ), judged as (
        select i.*,
               exists (select 1 from documents d
                        where d.source_type = b.source_type and d.source_page_id = i.page_id
                          and d.deleted_at is null
                          and (i.edited_at is null or d.source_updated_at >= i.edited_at))
               or (i.edited_at is null
                   and exists (select 1 from sync_state s
                                where s.source_type = b.source_type
                                  and s.source_page_id = i.page_id)) as is_current
          from input i
    ), ins as (
        insert into sync_jobs (source_type, source_page_id, status, payload, event_count,
                               priority, max_attempts, scheduled_at, first_event_at,
                               max_wait_until, revision, created_at, updated_at, workspace_id)
        select b.source_type, j.page_id, 'pending', j.payload, 0, p_priority, p_max_attempts,
               v_now, v_now, v_now, 1, v_now, v_now, b.workspace_id
          from judged j
         where not j.is_current
         order by j.page_id
        on conflict (source_type, source_page_id) where status in ('pending', 'processing')
        do nothing
        returning scheduled_at, priority
    )
    select c.n, c.is_current, c.newest, s.n, s.due, s.priority
      into v_n, v_current, v_newest, v_enqueued, v_due, v_priority
      from (select count(*)::int as n, (count(*) filter (where is_current))::int as is_current,
                   max(edited_at) as newest from judged) c,
           (select count(*)::int as n, array_agg(scheduled_at) as due,
                   array_agg(priority) as priority from ins) s;

    -- 3. a whole list stamps the documents of the pages it listed (in id order)
    if b.kind <> 'reconcile' then
        perform 1 from documents d
          where d.source_type = b.source_type and d.source_page_id = any(p_page_ids)
          order by d.id
            for update;
        update documents d set listed_at = v_now
         where d.source_type = b.source_type and d.source_page_id = any(p_page_ids);
    end if;

    -- 4. the workspace's line moves to the new jobs
    if v_enqueued > 0 then
        perform workspaces_line_move(array_fill(b.workspace_id, array[v_enqueued]), v_due,
                                     v_priority, array_fill(false, array[v_enqueued]));
    end if;

    -- 5. the backfill's cursor, counts and lease
    return query
    update backfills x
       set cursor           = p_cursor,
           listing_pages    = x.listing_pages + 1,
           discovered       = x.discovered + v_n,
           current          = x.current + v_current,
           enqueued         = x.enqueued + v_enqueued,
           active           = x.active + (v_n - v_current - v_enqueued),
           newest_seen      = greatest(x.newest_seen, v_newest),
           lease_expires_at = v_now + make_interval(secs => p_lease_seconds),
           updated_at       = v_now
     where x.id = b.id
    returning x, v_enqueued;
end
$$;

create function backfill_finish(p_id bigint, p_owner text, p_now timestamptz,
                                p_priority integer, p_max_attempts integer)
returns setof backfills
language plpgsql as $$
declare
    v_now      timestamptz := coalesce(p_now, now());
    b          backfills;
    v_n        integer;
    v_due      timestamptz[];
    v_priority integer[];
begin
    -- 1. the backfill, while its lease is held and its workspace is not removed
    select e.* into b
      from backfills e
     where e.id = p_id and e.lease_owner = p_owner and e.status = 'running'
       and exists (select 1 from workspaces w where w.id = e.workspace_id and w.status <> 'removed')
       for update of e;
    if not found then
        return;
    end if;

    -- 2. after a whole list, a re-check (a bulk job) of every live document of the workspace
    --    that the listing did not show and no sync touched since the backfill started
    with ins as (
        insert into sync_jobs (source_type, source_page_id, status, payload, event_count,
                               priority, max_attempts, scheduled_at, first_event_at,
                               max_wait_until, revision, created_at, updated_at, workspace_id)
        select b.source_type, v.source_page_id, 'pending', '{"recheck": true}'::jsonb, 0,
               p_priority, p_max_attempts, v_now, v_now, v_now, 1, v_now, v_now, b.workspace_id
          from (select distinct d.source_page_id
                  from documents d
                 where b.kind <> 'reconcile'
                   and d.workspace_id = b.workspace_id and d.source_type = b.source_type
                   and d.deleted_at is null
                   and (d.listed_at is null or d.listed_at < b.started_at)
                   and d.synced_at < b.started_at) v
         order by v.source_page_id
        on conflict (source_type, source_page_id) where status in ('pending', 'processing')
        do nothing
        returning scheduled_at, priority
    )
    select count(*)::int, array_agg(scheduled_at), array_agg(priority)
      into v_n, v_due, v_priority
      from ins;

    -- 3. the workspace: its line moves to the re-checks; it remembers the reconciliation
    --    (the newest edit seen is the next one's watermark)
    if v_n > 0 then
        perform workspaces_line_move(array_fill(b.workspace_id, array[v_n]), v_due, v_priority,
                                     array_fill(false, array[v_n]));
    end if;
    update workspaces w
       set reconciled_at       = v_now,
           reconcile_watermark = greatest(w.reconcile_watermark, b.newest_seen),
           full_reconciled_at  = case when b.kind <> 'reconcile' then v_now
                                      else w.full_reconciled_at end
     where w.id = b.workspace_id;

    -- 4. the backfill done
    return query
    update backfills x
       set status = 'done', finished_at = v_now, updated_at = v_now, cursor = null,
           rechecks = x.rechecks + v_n, lease_owner = null, lease_expires_at = null
     where x.id = b.id
    returning x.*;
end
$$;

-- 5. claim_jobs (migration 019) reads the lane through job_lane; one line differs (step 4's
--    `bulk`), the rest is 019's text.
create or replace function claim_jobs(p_now timestamptz, p_worker_id text, p_lease_seconds float8,
                           p_limit integer, p_sources text[],
                           p_source_slots integer[], p_budget_sources text[],
                           p_per_minutes float8[], p_bursts float8[], p_costs float8[],
                           p_workspace_concurrency integer)
returns table (job sync_jobs, ws_status text, ws_origin text, ws_external_id text,
               ws_bot_user_id text, ws_credentials bytea)
language plpgsql as $$
#variable_conflict use_column
declare
    v_now   timestamptz := coalesce(p_now, now());
    v_ws    bigint[] := '{}';
    v_took  bigint[];
    v_n     integer;
    v_offers claim_offer[];
    v_cands claim_candidate[];
    v_ids   bigint[];
    i       integer;
begin
    -- 1. workspaces from the head of each source's line, live lane then bulk lane
    for i in 1 .. coalesce(cardinality(p_sources), 0) loop
        v_n := least(p_source_slots[i], p_limit);
        continue when v_n is null or v_n <= 0;
        select coalesce(array_agg(l.id), '{}') into v_took
          from (select w.id from workspaces w
                 where w.source_type = p_sources[i] and w.live_line_at <= v_now
                 order by w.live_line_at, w.served_seq
                 limit v_n
                   for no key update skip locked) l;
        if cardinality(v_took) < v_n then
            select v_took || coalesce(array_agg(b.id), '{}') into v_took
              from (select w.id from workspaces w
                     where w.source_type = p_sources[i] and w.bulk_line_at <= v_now
                       and w.id <> all(v_took)
                     order by w.bulk_line_at, w.served_seq
                     limit v_n - cardinality(v_took)
                       for no key update skip locked) b;
        end if;
        v_ws := v_ws || v_took;
    end loop;

    -- 2. candidates: the due jobs of no workspace, per source, up to its slots
    select coalesce(array_agg(row(j.id, j.source_type, null, j.priority,
                                  j.scheduled_at)::claim_candidate), '{}')
      into v_cands
      from unnest(p_sources, p_source_slots) as s(source_type, slots)
     cross join lateral (
        select j.id, j.source_type, j.priority, j.scheduled_at
          from sync_jobs j
         where j.status = 'pending' and j.workspace_id is null
           and j.source_type = s.source_type and j.scheduled_at <= v_now
         order by j.priority desc, j.scheduled_at
         limit least(s.slots, p_limit)
           for update of j skip locked
     ) j
     where s.slots > 0;

    -- 3. and each locked workspace's due jobs, up to what it may take now (the budget and K)
    if cardinality(v_ws) > 0 then
        select array_agg(row(w.id, b.rate, b.level, least(coalesce(d.cost, 1), b.burst),
                             f.in_flight,
                             greatest(least(p_workspace_concurrency - f.in_flight,
                                            case when b.rate = 0 then p_limit
                                                 else floor(b.level / least(coalesce(d.cost, 1),
                                                                            b.burst))::int
                                            end), 0))::claim_offer)
          into v_offers
          from workspaces w
          left join unnest(p_budget_sources, p_per_minutes, p_bursts, p_costs)
                    as d(source_type, per_minute, burst, cost) on d.source_type = w.source_type
         cross join lateral workspace_bucket(v_now, w.budget_tokens, w.budget_refilled_at,
                                             coalesce(w.budget_per_minute, d.per_minute),
                                             coalesce(w.budget_burst, d.burst)) b
         cross join lateral (select count(*)::int as in_flight from sync_jobs p
                              where p.workspace_id = w.id and p.status = 'processing') f
         where w.id = any(v_ws);
        select v_cands || coalesce(array_agg(row(j.id, j.source_type, o.id, j.priority,
                                                 j.scheduled_at)::claim_candidate), '{}')
          into v_cands
          from unnest(v_offers) o
         cross join lateral (
            select j.id, j.source_type, j.priority, j.scheduled_at
              from sync_jobs j
             where j.workspace_id = o.id and j.status = 'pending'
               and j.scheduled_at <= v_now and j.source_type = any(p_sources)
             order by j.priority desc, j.scheduled_at
             limit o.offer
               for update of j skip locked
         ) j
         where o.offer > 0;
    end if;

    -- 4. the batch, in turns: every group's first job, then every second job, ...; live
    --    before bulk; each source within its slots; `limit` in all
    v_ids := array(
        select t.id
          from (select o.*, row_number() over (partition by o.source_type
                                               order by o.bulk, o.turn, o.priority desc,
                                                        o.scheduled_at, o.id) as source_turn
                  from (select c.*, job_lane(c.priority) = 'bulk' as bulk,
                               row_number() over (partition by c.workspace_id, c.source_type
                                                  order by c.priority desc, c.scheduled_at,
                                                           c.id) as turn
                          from unnest(v_cands) c) o) t
          join unnest(p_sources, p_source_slots) as r(source_type, slots)
            on r.source_type = t.source_type
         where t.source_turn <= r.slots
         order by t.bulk, t.turn, t.priority desc, t.scheduled_at, t.id
         limit p_limit);

    -- 5. the workspaces looked at: budget reserved for the jobs taken, served ones (and those
    --    with an offer but no job they could lock) to the back of the line, the hold and the
    --    concurrency flag set, and the lanes exact without the jobs taken
    if cardinality(v_ws) > 0 then
        update workspaces w
           set budget_tokens        = case when o.rate > 0 and t.n > 0
                                           then o.level - o.cost * t.n else w.budget_tokens end,
               budget_refilled_at   = case when o.rate > 0 and t.n > 0
                                           then greatest(v_now, coalesce(w.budget_refilled_at,
                                                                         v_now))
                                           else w.budget_refilled_at end,
               last_served_at       = case when t.n > 0 or (o.offer > 0 and t.offered = 0)
                                           then v_now else w.last_served_at end,
               served_seq           = case when t.n > 0 or (o.offer > 0 and t.offered = 0)
                                           then nextval('workspaces_served_seq')
                                           else w.served_seq end,
               at_concurrency_limit = o.in_flight + t.n >= p_workspace_concurrency,
               held_until           = case
                   when o.in_flight + t.n >= p_workspace_concurrency then null
                   when o.rate > 0 and o.level - o.cost * t.n < o.cost
                       then v_now + make_interval(secs => (o.cost - (o.level - o.cost * t.n))
                                                          / o.rate)
                   end,
               live_due_at          = l.live_due_at,
               bulk_due_at          = l.bulk_due_at
          from unnest(v_offers) o
         cross join lateral (
            select count(*) filter (where c.id = any(v_ids))::int as n, count(*)::int as offered
              from unnest(v_cands) c where c.workspace_id = o.id
         ) t
         cross join lateral workspace_lanes(o.id, v_ids) l
         where w.id = o.id;
    end if;

    -- 6. the jobs taken: processing, leased, with their workspaces as step 5 left them
    return query
    with claimed as (
        update sync_jobs j
           set status           = 'processing',
               attempts         = j.attempts + 1,
               locked_by        = p_worker_id,
               lease_token      = gen_random_uuid(),
               lease_expires_at = v_now + make_interval(secs => p_lease_seconds),
               claimed_revision = j.revision,
               retry_at         = null,
               updated_at       = v_now
         where j.id = any(v_ids)
        returning j as job
    )
    select c.job, w.status, w.origin, w.external_id, w.bot_user_id, w.credentials
      from claimed c
      left join workspaces w on w.id = (c.job).workspace_id;
end
$$;
