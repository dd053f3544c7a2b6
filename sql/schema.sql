-- The schema the migrations sql/NNN_*.sql produce, as pg_dump prints it (normalised).
-- Generated: do not edit. After adding a migration, regenerate it with
--   python -m debounce.devtools.schema_dump > sql/schema.sql
-- (tests/test_schema_file.py fails until the two agree).

-- Name: claim_candidate; Type: TYPE

CREATE TYPE claim_candidate AS (
	id bigint,
	source_type text,
	workspace_id bigint,
	priority integer,
	scheduled_at timestamp with time zone
);

-- Name: claim_offer; Type: TYPE

CREATE TYPE claim_offer AS (
	id bigint,
	rate double precision,
	level double precision,
	cost double precision,
	in_flight integer,
	offer integer
);

-- Name: backfills; Type: TABLE

CREATE TABLE backfills (
    id bigint NOT NULL,
    workspace_id bigint NOT NULL,
    source_type text NOT NULL,
    kind text NOT NULL,
    status text DEFAULT 'running'::text NOT NULL,
    cursor text,
    listing_pages integer DEFAULT 0 NOT NULL,
    discovered integer DEFAULT 0 NOT NULL,
    enqueued integer DEFAULT 0 NOT NULL,
    current integer DEFAULT 0 NOT NULL,
    active integer DEFAULT 0 NOT NULL,
    rechecks integer DEFAULT 0 NOT NULL,
    watermark timestamp with time zone,
    newest_seen timestamp with time zone,
    error text,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    started_snapshot pg_snapshot DEFAULT pg_current_snapshot(),
    CONSTRAINT backfills_kind_check CHECK ((kind = ANY (ARRAY['backfill'::text, 'reconcile'::text, 'full_reconcile'::text]))),
    CONSTRAINT backfills_status_check CHECK ((status = ANY (ARRAY['running'::text, 'done'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT backfills_times_finite CHECK ((isfinite(started_at) AND isfinite(updated_at) AND isfinite(finished_at) AND isfinite(lease_expires_at) AND isfinite(not_before) AND isfinite(newest_seen) AND isfinite(watermark)))
);

-- Name: backfill_finish(bigint, text, timestamp with time zone, integer, integer); Type: FUNCTION

CREATE FUNCTION backfill_finish(p_id bigint, p_owner text, p_now timestamp with time zone, p_priority integer, p_max_attempts integer) RETURNS SETOF backfills
    LANGUAGE plpgsql
    AS $$
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
    --    that the listing did not show, no sync touched since the backfill started and that
    --    existed when it began (its started_snapshot saw the document's creation committed)
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
                   and d.synced_at < b.started_at
                   -- as the documents were before the backfill began: none created since
                   and (d.created_xid is null or b.started_snapshot is null
                        or pg_visible_in_snapshot(d.created_xid, b.started_snapshot))) v
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

-- Name: backfill_page(bigint, text, timestamp with time zone, text[], timestamp with time zone[], jsonb[], text, integer, integer, double precision); Type: FUNCTION

CREATE FUNCTION backfill_page(p_id bigint, p_owner text, p_now timestamp with time zone, p_page_ids text[], p_edited_ats timestamp with time zone[], p_payloads jsonb[], p_cursor text, p_priority integer, p_max_attempts integer, p_lease_seconds double precision) RETURNS TABLE(backfill backfills, page_enqueued integer)
    LANGUAGE plpgsql
    AS $$
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

-- Name: sync_jobs; Type: TABLE

CREATE TABLE sync_jobs (
    id bigint NOT NULL,
    source_type text NOT NULL,
    source_page_id text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    event_id text,
    event_count integer DEFAULT 1 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    first_event_at timestamp with time zone NOT NULL,
    max_wait_until timestamp with time zone NOT NULL,
    retry_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    locked_by text,
    lease_token uuid,
    revision bigint DEFAULT 0 NOT NULL,
    claimed_revision bigint,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    workspace_id bigint,
    checkpoint jsonb,
    change_kinds text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT sync_jobs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT sync_jobs_check CHECK (((status = 'processing'::text) = (lease_token IS NOT NULL))),
    CONSTRAINT sync_jobs_event_count_check CHECK ((event_count >= 0)),
    CONSTRAINT sync_jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT sync_jobs_source_page_id_check CHECK ((source_page_id <> ''::text)),
    CONSTRAINT sync_jobs_source_type_check CHECK ((source_type <> ''::text)),
    CONSTRAINT sync_jobs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'processing'::text]))),
    CONSTRAINT sync_jobs_times_finite CHECK ((isfinite(scheduled_at) AND isfinite(first_event_at) AND isfinite(max_wait_until) AND isfinite(retry_at) AND isfinite(lease_expires_at) AND isfinite(created_at) AND isfinite(updated_at) AND isfinite(finished_at)))
);

-- Name: claim_jobs(timestamp with time zone, text, double precision, integer, text[], integer[], text[], double precision[], double precision[], double precision[], integer); Type: FUNCTION

CREATE FUNCTION claim_jobs(p_now timestamp with time zone, p_worker_id text, p_lease_seconds double precision, p_limit integer, p_sources text[], p_source_slots integer[], p_budget_sources text[], p_per_minutes double precision[], p_bursts double precision[], p_costs double precision[], p_workspace_concurrency integer) RETURNS TABLE(job sync_jobs, ws_status text, ws_origin text, ws_external_id text, ws_bot_user_id text, ws_credentials bytea)
    LANGUAGE plpgsql
    SET lock_timeout TO '100ms'
    AS $$
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

-- Name: debounce_delete_documents(bigint[], text, integer, double precision, double precision); Type: FUNCTION

CREATE FUNCTION debounce_delete_documents(p_ids bigint[], p_why text, p_max_count integer, p_max_share double precision, p_window double precision) RETURNS TABLE(document_id text, held boolean)
    LANGUAGE plpgsql
    AS $$
declare
    w record;
    fresh bigint[];
    recent bigint;
    pending bigint;
    live bigint;
    total bigint;
    awaiting bigint;
    hold bigint;
    span text;
begin
    span := case when p_window >= 60 and p_window::numeric % 60 = 0
                 then (p_window / 60)::bigint || ' minute' ||
                      case when p_window = 60 then '' else 's' end
                 else p_window::numeric || ' seconds' end;
    for w in
        select d.workspace_id, d.source_type, array_agg(d.id order by d.id) as ids
          from documents d
         where d.id = any(p_ids) and d.deleted_at is null
         group by d.workspace_id, d.source_type
         order by d.source_type, d.workspace_id
    loop
        hold := null;
        -- documents of their workspace's open hold stay held (a hold of a workspace since
        -- removed holds nothing: its documents were attached to another one since)
        return query
            select d.document_id, true
              from documents d join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                and h.workspace_id is not distinct from d.workspace_id
             where d.id = any(w.ids);
        select array_agg(d.id order by d.id) into fresh
          from documents d
         where d.id = any(w.ids)
           and not exists (select 1 from deletion_holds h
                            where h.id = d.held_by and h.status = 'held'
                              and h.workspace_id is not distinct from d.workspace_id);
        continue when fresh is null;
        select count(*) into recent from documents d
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is not null and d.held_by is null
           and d.deleted_at >= now() - make_interval(secs => p_window);
        select count(*) filter (where h.id is not null), count(*) into pending, live
          from documents d
          left join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                     and h.workspace_id is not distinct from d.workspace_id
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is null;
        -- re-checks of a sweep still to run (sync_jobs payload {"recheck": true}: the queue's
        -- finish_backfill), other than this deletion's own pages
        select count(*) into awaiting
          from sync_jobs j
          join documents d on d.source_type = j.source_type
                          and d.source_page_id = j.source_page_id
         where j.workspace_id = w.workspace_id and j.source_type = w.source_type
           and j.status in ('pending', 'processing') and j.payload ? 'recheck'
           and d.deleted_at is null and d.held_by is null and not d.id = any(w.ids);
        total := recent + pending + cardinality(fresh) + awaiting;
        if total > p_max_count and total > p_max_share * (live + recent) then
            select h.id into hold from deletion_holds h
             where h.source_type = w.source_type
               and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
               and h.status = 'held'
               for update;
            if hold is null then   -- a concurrent first hold of the workspace wins the insert
                insert into deletion_holds (workspace_id, source_type, reason)
                values (w.workspace_id, w.source_type, '')
                on conflict (source_type, coalesce(workspace_id, 0)) where status = 'held'
                do nothing
                returning id into hold;
            end if;
            if hold is null then
                select h.id into hold from deletion_holds h
                 where h.source_type = w.source_type
                   and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
                   and h.status = 'held'
                   for update;
            end if;
            return query
                update documents d set held_by = hold
                 where d.id = any(fresh)
                returning d.document_id, true;
            -- The reason, counted after the hold row's lock: a holder of the same workspace
            -- that took it first has committed, and this statement's snapshot sees its
            -- documents held, so the last holder's reason counts every one (counted before
            -- the lock, it missed those still in flight: "10 … with the 1 more" for 12 held).
            update deletion_holds h
               set reason = format('%s %s document%s %s within %s: %s %% of the workspace%s',
                                   recent + n.held, w.source_type,
                                   case when recent + n.held = 1 then '' else 's' end,
                                   p_why, span,
                                   round(100.0 * (recent + n.held + n.awaiting)
                                         / greatest(live + recent, 1)),
                                   case when n.awaiting > 0
                                        then format(' with the %s more a sweep is re-checking',
                                                    n.awaiting) else '' end),
                   updated_at = now()
              from (select (select count(*) from documents d
                             where d.held_by = hold and d.deleted_at is null) as held,
                           (select count(*)
                              from sync_jobs j
                              join documents d on d.source_type = j.source_type
                                              and d.source_page_id = j.source_page_id
                             where j.workspace_id = w.workspace_id
                               and j.source_type = w.source_type
                               and j.status in ('pending', 'processing')
                               and j.payload ? 'recheck'
                               and d.deleted_at is null and d.held_by is null) as awaiting) n
             where h.id = hold;
        else
            return query
                update documents d
                   set deleted_at = now(), synced_at = now(), updated_at = now(), held_by = null
                 where d.id = any(fresh)
                returning d.document_id, false;
        end if;
    end loop;
end $$;

-- Name: debounce_merge_kinds(text[], text[]); Type: FUNCTION

CREATE FUNCTION debounce_merge_kinds(a text[], b text[]) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
    if a is null then return b; end if;
    if b is null then return a; end if;
    if cardinality(a) = 0 or cardinality(b) = 0 then return '{}'::text[]; end if;
    if cardinality(a) = 1 and a = b then return a; end if;
    return array(select distinct k from unnest(a || b) as u(k) order by k);
end
$$;

-- Name: debounce_section_changes(jsonb, jsonb); Type: FUNCTION

CREATE FUNCTION debounce_section_changes(old_s jsonb, new_s jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
begin
    if new_s is null then return null; end if;
    return (with o as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(old_s, '[]'::jsonb)) e
    ), n as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(new_s, '[]'::jsonb)) e
    )
    select jsonb_build_object(
        'added', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                             from jsonb_array_elements(new_s) with ordinality x(e, i), o
                            where not o.m ? (x.e->>'id')), '[]'::jsonb),
        'changed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(new_s) with ordinality x(e, i), o
                              where o.m->>(x.e->>'id') <> x.e->>'sha256'), '[]'::jsonb),
        'removed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(coalesce(old_s, '[]'::jsonb))
                                    with ordinality x(e, i), n
                              where not n.m ? (x.e->>'id')), '[]'::jsonb))
      from o, n);
end $$;

-- Name: document_changes_add(xid8, xid8, timestamp with time zone); Type: FUNCTION

CREATE FUNCTION document_changes_add(p_lo xid8, p_hi xid8, p_now timestamp with time zone) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
    name text := 'document_changes_' || p_lo::text;
begin
    execute format('create table %I (like document_changes including defaults including constraints)',
                   name);
    execute format('alter table document_changes attach partition %I for values from (%L) to (%L)',
                   name, p_lo::text, p_hi::text);
    insert into document_change_partitions (name, lo, hi, created_at, created_xid)
    values (name, p_lo, p_hi, p_now, pg_snapshot_xmax(pg_current_snapshot()));
    return name;
end $$;

-- Name: document_changes_adopt(timestamp with time zone); Type: FUNCTION

CREATE FUNCTION document_changes_adopt(p_now timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    n bigint;
    top xid8;
    lo xid8;
    name text;
begin
    select count(*), max(feed_xid) into n, top from document_changes_default;
    if n = 0 then
        return 0;
    end if;
    lock table document_changes in access exclusive mode;
    select count(*), max(feed_xid) into n, top from document_changes_default;  -- now settled
    select coalesce(max(hi), '1') into lo from document_change_partitions;
    name := 'document_changes_' || lo::text;
    alter table document_changes detach partition document_changes_default;
    execute format('alter table document_changes_default rename to %I', name);
    execute format('alter index document_changes_default_pkey rename to %I', name || '_pkey');
    execute format('alter table document_changes attach partition %I for values from (%L) to (%L)',
                   name, lo::text, ((top::text::numeric + 1)::text));
    insert into document_change_partitions (name, lo, hi, created_at, created_xid)
    values (name, lo, (top::text::numeric + 1)::text::xid8, p_now,
            pg_snapshot_xmax(pg_current_snapshot()));
    create table document_changes_default partition of document_changes default;
    return n;
end $$;

-- Name: document_changes_drop(timestamp with time zone); Type: FUNCTION

CREATE FUNCTION document_changes_drop(p_cutoff timestamp with time zone, OUT dropped integer, OUT changes bigint) RETURNS record
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    p document_change_partitions;
    xmin xid8 := pg_snapshot_xmin(pg_current_snapshot());
    newest timestamptz;
    n bigint;
    last_xid xid8;
    last_seq bigint;
begin
    dropped := 0;
    changes := 0;
    for p in select * from document_change_partitions order by lo loop
        exit when p.hi > xmin;   -- open: a running transaction may still write in its range
        if p.closed_changes is null then
            -- closed since the last prune: what it holds, read once (no write reaches it now)
            execute format('select max(changed_at), count(*) from %I', p.name) into newest, n;
            update document_change_partitions
               set closed_newest = newest, closed_changes = n
             where name = p.name;
        else
            newest := p.closed_newest;
            n := p.closed_changes;
        end if;
        exit when newest >= p_cutoff;
        execute format('select feed_xid, seq from %I order by feed_xid desc, seq desc limit 1', p.name)
           into last_xid, last_seq;
        execute format('drop table %I', p.name);
        delete from document_change_partitions where name = p.name;
        if n > 0 then
            update document_feed f set pruned_xid = last_xid, pruned_seq = last_seq
             where (last_xid, last_seq) > (f.pruned_xid, f.pruned_seq);
        end if;
        dropped := dropped + 1;
        changes := changes + n;
    end loop;
end $$;

-- Name: document_changes_extend(timestamp with time zone, double precision); Type: FUNCTION

CREATE FUNCTION document_changes_extend(p_now timestamp with time zone, p_span double precision, OUT added integer, OUT overflow bigint) RETURNS record
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    newest document_change_partitions;
    xmax numeric := pg_snapshot_xmax(pg_current_snapshot())::text::numeric;
    rate float8;
    width numeric;
    lo numeric;
begin
    added := 0;
    overflow := document_changes_adopt(p_now);
    select * into newest from document_change_partitions order by lo desc limit 1;
    rate := greatest(xmax - newest.created_xid::text::numeric, 0)
            / greatest(extract(epoch from p_now - newest.created_at)::float8, 1.0);
    lo := newest.hi::text::numeric;
    -- at least 1000 ids; after a long pause (no prune for many spans), at most about 32 new
    -- partitions: wider ones then
    width := greatest(ceil(rate * greatest(p_span, 0)), 1000, ceil((xmax - lo) / 32));
    while lo < xmax + width loop
        perform document_changes_add(lo::text::xid8, (lo + width)::text::xid8, p_now);
        lo := lo + width;
        added := added + 1;
    end loop;
end $$;

-- Name: document_changes_restart(timestamp with time zone); Type: FUNCTION

CREATE FUNCTION document_changes_restart(p_now timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    p document_change_partitions;
    n bigint;
begin
    lock table document_changes in access exclusive mode;
    select count(*) into n from document_changes;
    for p in select * from document_change_partitions order by lo loop
        execute format('drop table %I', p.name);
    end loop;
    delete from document_change_partitions;
    truncate document_changes_default;
    perform document_changes_add('1', (pg_snapshot_xmax(pg_current_snapshot())::text::numeric + 1000)::text::xid8,
                                 p_now);
    return n;
end $$;

-- Name: document_changes_retain(timestamp with time zone, double precision, double precision); Type: FUNCTION

CREATE FUNCTION document_changes_retain(p_now timestamp with time zone, p_older_than double precision, p_span double precision, OUT added integer, OUT overflow bigint, OUT dropped integer, OUT changes bigint) RETURNS record
    LANGUAGE plpgsql
    AS $$
begin
    select e.added, e.overflow into added, overflow from document_changes_extend(p_now, p_span) e;
    select d.dropped, d.changes into dropped, changes
      from document_changes_drop(p_now - make_interval(secs => p_older_than)) d;
end $$;

-- Name: document_feed_append(); Type: FUNCTION

CREATE FUNCTION document_feed_append() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    position xid8;
    seq bigint;
    grave xid8;
begin
    if tg_op = 'DELETE' then
        position := greatest(pg_current_xact_id(), old.feed_xid);
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (position, nextval('document_changes_seq'),
                old.source_type, old.workspace_id, old.document_id, old.source_page_id,
                'delete', now(), old.content_sha256);
        insert into document_graves as g (source_type, document_id, feed_xid)
        values (old.source_type, old.document_id, position)
        on conflict (source_type, document_id)
        do update set feed_xid = greatest(g.feed_xid, excluded.feed_xid);
    else
        position := new.feed_xid;
        seq := new.feed_seq;
        select g.feed_xid into grave from document_graves g
         where g.source_type = new.source_type and g.document_id = new.document_id;
        if grave >= position then
            -- After the deletion of an earlier row of this document: its position, and a
            -- sequence number taken after the delete's; the nested update moves only the
            -- position (bookkeeping: it appends nothing itself).
            position := grave;
            seq := nextval('document_changes_seq');
            update documents set feed_xid = position, feed_seq = seq where id = new.id;
        end if;
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256, sections)
        values (position, seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256,
                case when new.sections is not null
                     then debounce_section_changes(null, new.sections) end);
    end if;
    return null;
end $$;

-- Name: document_feed_position(); Type: FUNCTION

CREATE FUNCTION document_feed_position() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    prev documents;
begin
    if tg_op = 'UPDATE' then
        if new.content_sha256 is not distinct from old.content_sha256 then
            prev := old;
            prev.content := new.content;   -- the same hash: the same content
            prev.synced_at := new.synced_at;
            prev.source_updated_at := new.source_updated_at;
            prev.listed_at := new.listed_at;
            prev.updated_at := new.updated_at;
            prev.feed_xid := new.feed_xid;
            prev.feed_seq := new.feed_seq;
            prev.sections := new.sections;
            prev.held_by := new.held_by;
            if prev is not distinct from new then
                return new;   -- only bookkeeping moved: no change for consumers
            end if;
        end if;
        if new.updated_at is not distinct from old.updated_at then
            new.updated_at := now();   -- a change a consumer sees is a new updated_at
        end if;
        new.feed_xid := greatest(pg_current_xact_id(), old.feed_xid);
        new.feed_seq := nextval('document_changes_seq');
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256, sections)
        values (new.feed_xid, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256,
                case when new.sections is not null then
                    debounce_section_changes(case when old.deleted_at is null
                                                  then old.sections end, new.sections) end);
        return new;
    end if;
    new.feed_xid := pg_current_xact_id();
    new.feed_seq := nextval('document_changes_seq');
    return new;
end $$;

-- Name: document_kind(text, text, jsonb); Type: FUNCTION

CREATE FUNCTION document_kind(p_source_type text, p_document_id text, p_metadata jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN starts_with(p_document_id, 'file:'::text) THEN 'file'::text WHEN starts_with(p_document_id, 'canvas:'::text) THEN 'canvas'::text WHEN (p_source_type = 'slack'::text) THEN 'conversation'::text WHEN ((p_source_type = 'notion'::text) AND ((p_metadata ->> 'object'::text) = 'database'::text)) THEN 'database'::text WHEN ((p_source_type = 'notion'::text) AND ((p_metadata ->> 'object'::text) = 'data_source'::text)) THEN 'table'::text ELSE 'page'::text END;

-- Name: document_kinds(); Type: FUNCTION

CREATE FUNCTION document_kinds() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ARRAY['page'::text, 'database'::text, 'table'::text, 'conversation'::text, 'file'::text, 'canvas'::text];

-- Name: finished_jobs_add(timestamp with time zone, timestamp with time zone); Type: FUNCTION

CREATE FUNCTION finished_jobs_add(p_lo timestamp with time zone, p_hi timestamp with time zone) RETURNS text
    LANGUAGE plpgsql
    AS $$
declare
    name text := 'finished_jobs_' || to_char(p_lo at time zone 'UTC', 'YYYYMMDD"t"HH24MISSUS');
begin
    execute format('create table %I (like finished_jobs including defaults including constraints)',
                   name);
    execute format('alter table finished_jobs attach partition %I for values from (%L) to (%L)',
                   name, p_lo, p_hi);
    insert into finished_job_partitions (name, lo, hi) values (name, p_lo, p_hi);
    return name;
end $$;

-- Name: finished_jobs_adopt(interval); Type: FUNCTION

CREATE FUNCTION finished_jobs_adopt(p_width interval) RETURNS bigint
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    n bigint;
    low timestamptz;
    high timestamptz;
    w float8;
    g record;
begin
    if not exists (select 1 from finished_jobs_default) then
        return 0;
    end if;
    lock table finished_jobs in access exclusive mode;
    alter table finished_jobs detach partition finished_jobs_default;
    alter table finished_jobs_default rename to finished_jobs_spill;
    create table finished_jobs_default partition of finished_jobs default;
    select count(*), min(finished_at), max(finished_at) into n, low, high from finished_jobs_spill;
    w := greatest(extract(epoch from p_width)::float8, extract(epoch from high - low)::float8 / 64,
                  1.0);
    for g in
        select distinct greatest(c.a, c.gap_lo) as lo, least(c.a + make_interval(secs => w), c.gap_hi) as hi
          from (select to_timestamp(floor(extract(epoch from s.finished_at) / w) * w) as a,
                       coalesce((select max(p.hi) from finished_job_partitions p
                                  where p.hi <= s.finished_at), '-infinity') as gap_lo,
                       coalesce((select min(p.lo) from finished_job_partitions p
                                  where p.lo > s.finished_at), 'infinity') as gap_hi
                  from finished_jobs_spill s) c
         order by 1
    loop
        perform finished_jobs_add(g.lo, g.hi);
    end loop;
    insert into finished_jobs select * from finished_jobs_spill;
    drop table finished_jobs_spill;
    return n;
end $$;

-- Name: finished_jobs_cover(timestamp with time zone, timestamp with time zone, interval); Type: FUNCTION

CREATE FUNCTION finished_jobs_cover(p_from timestamp with time zone, p_to timestamp with time zone, p_width interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    width interval := greatest(p_width, interval '1 second');
    lo timestamptz;
    added integer := 0;
begin
    select max(p.hi) into lo from finished_job_partitions p;
    if lo is null then
        lo := to_timestamp(floor(extract(epoch from p_from) / extract(epoch from width))
                           * extract(epoch from width));
    end if;
    width := greatest(width, (p_to - lo) / 32);
    while lo <= p_to loop
        perform finished_jobs_add(lo, lo + width);
        lo := lo + width;
        added := added + 1;
    end loop;
    return added;
end $$;

-- Name: finished_jobs_retain(timestamp with time zone, double precision, double precision); Type: FUNCTION

CREATE FUNCTION finished_jobs_retain(p_now timestamp with time zone, p_older_than double precision, p_span double precision, OUT added integer, OUT overflow bigint, OUT dropped integer, OUT jobs bigint) RETURNS record
    LANGUAGE plpgsql
    SET lock_timeout TO '1s'
    AS $$
declare
    width interval := make_interval(secs => greatest(p_span, 60.0));
    cutoff timestamptz := p_now - make_interval(secs => p_older_than);
    p finished_job_partitions;
    n bigint;
begin
    if not exists (select 1 from finished_job_partitions c
                    where c.lo <= clock_timestamp()
                      and c.hi > clock_timestamp() + interval '1 minute')
       or exists (select 1 from finished_jobs_default) then
        lock table finished_jobs in access exclusive mode;
    end if;
    overflow := finished_jobs_adopt(width);
    added := finished_jobs_cover(p_now, p_now + width, width);
    dropped := 0;
    jobs := 0;
    for p in select * from finished_job_partitions order by lo loop
        exit when p.hi > cutoff;
        execute format('select count(*) from %I', p.name) into n;
        execute format('drop table %I', p.name);
        delete from finished_job_partitions where name = p.name;
        dropped := dropped + 1;
        jobs := jobs + n;
    end loop;
end $$;

-- Name: job_lane(integer); Type: FUNCTION

CREATE FUNCTION job_lane(priority integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ select case when priority < 0 then 'bulk' else 'live' end $$;

-- Name: workspace_bucket(timestamp with time zone, double precision, timestamp with time zone, double precision, double precision); Type: FUNCTION

CREATE FUNCTION workspace_bucket(at_time timestamp with time zone, tokens double precision, refilled_at timestamp with time zone, per_minute double precision, capacity double precision) RETURNS TABLE(rate double precision, burst double precision, level double precision)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select p.rate, p.burst,
           case when p.rate = 0 then p.burst
                else least(p.burst, coalesce(tokens, p.burst)
                                    + p.rate * greatest(0, extract(epoch from at_time
                                                           - coalesce(refilled_at, at_time))))
           end
      from (select coalesce(per_minute, 0) / 60.0 as rate,
                   greatest(1, coalesce(capacity, 1))::float8 as burst) p
$$;

-- Name: workspace_lanes(bigint, bigint[]); Type: FUNCTION

CREATE FUNCTION workspace_lanes(ws bigint, taken bigint[]) RETURNS TABLE(live_due_at timestamp with time zone, bulk_due_at timestamp with time zone)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    select (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and job_lane(j.priority) = 'live'
               and j.id <> all(taken)),
           (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and job_lane(j.priority) = 'bulk'
               and j.id <> all(taken))
$$;

-- Name: workspace_line_at(timestamp with time zone, text, text, boolean, timestamp with time zone, timestamp with time zone, timestamp with time zone); Type: FUNCTION

CREATE FUNCTION workspace_line_at(due timestamp with time zone, status text, credentials_error text, at_concurrency_limit boolean, blocked_until timestamp with time zone, held_until timestamp with time zone, last_served_at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN ((due IS NOT NULL) AND (status = 'active'::text) AND (credentials_error IS NULL) AND (NOT at_concurrency_limit)) THEN GREATEST(due, blocked_until, held_until, last_served_at) ELSE NULL::timestamp with time zone END;

-- Name: workspaces_line_move(bigint[], timestamp with time zone[], integer[], boolean[]); Type: FUNCTION

CREATE FUNCTION workspaces_line_move(p_ws bigint[], p_due timestamp with time zone[], p_priority integer[], p_freed boolean[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

-- Name: workspaces_line_repair(bigint[], integer); Type: FUNCTION

CREATE FUNCTION workspaces_line_repair(ids bigint[], workspace_concurrency integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    locked bigint[];
    changed integer;
begin
    locked := array(select id from workspaces where id = any(ids) order by id
                       for no key update skip locked);
    update workspaces w
       set live_due_at = v.live_due_at, bulk_due_at = v.bulk_due_at,
           at_concurrency_limit = v.at_concurrency_limit
      from (select r.id, l.live_due_at, l.bulk_due_at,
                   r.at_concurrency_limit
                   and (select count(*) from sync_jobs p
                         where p.workspace_id = r.id and p.status = 'processing')
                       >= workspace_concurrency as at_concurrency_limit
              from workspaces r cross join lateral workspace_lanes(r.id, '{}') l
             where r.id = any(locked)) v
     where w.id = v.id
       and (w.live_due_at, w.bulk_due_at, w.at_concurrency_limit)
           is distinct from (v.live_due_at, v.bulk_due_at, v.at_concurrency_limit);
    get diagnostics changed = row_count;
    return changed;
end
$$;

-- Name: debounce_union_kinds(text[]); Type: AGGREGATE

CREATE AGGREGATE debounce_union_kinds(text[]) (
    SFUNC = debounce_merge_kinds,
    STYPE = text[]
);

-- Name: backfills_id_seq; Type: SEQUENCE

ALTER TABLE backfills ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME backfills_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: conversation_audiences; Type: TABLE

CREATE TABLE conversation_audiences (
    source_type text NOT NULL,
    workspace_id bigint,
    conversation_id text NOT NULL,
    kind text NOT NULL,
    members text[],
    refreshed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT conversation_audiences_kind_check CHECK ((kind = ANY (ARRAY['public_channel'::text, 'private_channel'::text, 'mpim'::text, 'im'::text]))),
    CONSTRAINT conversation_audiences_times_finite CHECK (isfinite(refreshed_at))
);

-- Name: deletion_holds; Type: TABLE

CREATE TABLE deletion_holds (
    id bigint NOT NULL,
    workspace_id bigint,
    source_type text NOT NULL,
    status text DEFAULT 'held'::text NOT NULL,
    reason text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    resolved integer,
    CONSTRAINT deletion_holds_finite CHECK ((isfinite(created_at) AND isfinite(updated_at) AND isfinite(resolved_at))),
    CONSTRAINT deletion_holds_status_check CHECK ((status = ANY (ARRAY['held'::text, 'applied'::text, 'dismissed'::text])))
);

-- Name: deletion_holds_id_seq; Type: SEQUENCE

ALTER TABLE deletion_holds ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME deletion_holds_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: document_change_partitions; Type: TABLE

CREATE TABLE document_change_partitions (
    name text NOT NULL,
    lo xid8 NOT NULL,
    hi xid8 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    created_xid xid8 NOT NULL,
    closed_newest timestamp with time zone,
    closed_changes bigint,
    CONSTRAINT document_change_partitions_check CHECK ((lo < hi)),
    CONSTRAINT document_change_partitions_times_finite CHECK ((isfinite(created_at) AND isfinite(closed_newest)))
);

-- Name: document_changes; Type: TABLE

CREATE TABLE document_changes (
    feed_xid xid8 NOT NULL,
    seq bigint NOT NULL,
    source_type text NOT NULL,
    workspace_id bigint,
    document_id text NOT NULL,
    source_page_id text NOT NULL,
    op text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    content_sha256 text NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    sections jsonb,
    CONSTRAINT document_changes_op_check CHECK ((op = ANY (ARRAY['upsert'::text, 'delete'::text]))),
    CONSTRAINT document_changes_times_finite CHECK ((isfinite(changed_at) AND isfinite(updated_at)))
)
PARTITION BY RANGE (feed_xid);

-- Name: document_changes_1; Type: TABLE

CREATE TABLE document_changes_1 (
    feed_xid xid8 NOT NULL,
    seq bigint NOT NULL,
    source_type text NOT NULL,
    workspace_id bigint,
    document_id text NOT NULL,
    source_page_id text NOT NULL,
    op text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    content_sha256 text NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    sections jsonb,
    CONSTRAINT document_changes_op_check CHECK ((op = ANY (ARRAY['upsert'::text, 'delete'::text]))),
    CONSTRAINT document_changes_times_finite CHECK ((isfinite(changed_at) AND isfinite(updated_at)))
);

-- Name: document_changes_default; Type: TABLE

CREATE TABLE document_changes_default (
    feed_xid xid8 NOT NULL,
    seq bigint NOT NULL,
    source_type text NOT NULL,
    workspace_id bigint,
    document_id text NOT NULL,
    source_page_id text NOT NULL,
    op text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    content_sha256 text NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    sections jsonb,
    CONSTRAINT document_changes_op_check CHECK ((op = ANY (ARRAY['upsert'::text, 'delete'::text]))),
    CONSTRAINT document_changes_times_finite CHECK ((isfinite(changed_at) AND isfinite(updated_at)))
);

-- Name: document_changes_seq; Type: SEQUENCE

CREATE SEQUENCE document_changes_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- Name: document_feed; Type: TABLE

CREATE TABLE document_feed (
    one boolean DEFAULT true NOT NULL,
    system_identifier text NOT NULL,
    pruned_xid xid8 DEFAULT '0'::xid8 NOT NULL,
    pruned_seq bigint DEFAULT 0 NOT NULL,
    CONSTRAINT document_feed_one_check CHECK (one)
);

-- Name: document_graves; Type: TABLE

CREATE TABLE document_graves (
    source_type text NOT NULL,
    document_id text NOT NULL,
    feed_xid xid8 NOT NULL
);

-- Name: documents; Type: TABLE

CREATE TABLE documents (
    id bigint NOT NULL,
    source_type text NOT NULL,
    document_id text NOT NULL,
    source_page_id text NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    url text,
    content text DEFAULT ''::text NOT NULL,
    content_sha256 text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    source_updated_at timestamp with time zone,
    synced_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    workspace_id bigint,
    listed_at timestamp with time zone,
    audience_kind text,
    audience_members text[],
    audience_accessible_by text[],
    feed_xid xid8,
    feed_seq bigint,
    sections jsonb,
    held_by bigint,
    created_xid xid8 DEFAULT pg_current_xact_id(),
    CONSTRAINT documents_audience_kind_check CHECK ((audience_kind = ANY (ARRAY['public_channel'::text, 'private_channel'::text, 'mpim'::text, 'im'::text, 'workspace'::text]))),
    CONSTRAINT documents_times_finite CHECK ((isfinite(created_at) AND isfinite(updated_at) AND isfinite(synced_at) AND isfinite(deleted_at) AND isfinite(source_updated_at) AND isfinite(listed_at)))
);

-- Name: documents_id_seq; Type: SEQUENCE

ALTER TABLE documents ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME documents_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: finished_job_partitions; Type: TABLE

CREATE TABLE finished_job_partitions (
    name text NOT NULL,
    lo timestamp with time zone NOT NULL,
    hi timestamp with time zone NOT NULL,
    CONSTRAINT finished_job_partitions_check CHECK ((lo < hi)),
    CONSTRAINT finished_job_partitions_times_finite CHECK ((isfinite(lo) AND isfinite(hi)))
);

-- Name: finished_jobs; Type: TABLE

CREATE TABLE finished_jobs (
    id bigint NOT NULL,
    source_type text NOT NULL,
    source_page_id text NOT NULL,
    status text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    event_id text,
    event_count integer DEFAULT 1 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    first_event_at timestamp with time zone NOT NULL,
    max_wait_until timestamp with time zone NOT NULL,
    retry_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    locked_by text,
    lease_token uuid,
    revision bigint DEFAULT 0 NOT NULL,
    claimed_revision bigint,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    workspace_id bigint,
    checkpoint jsonb,
    change_kinds text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT finished_jobs_status_check CHECK ((status = ANY (ARRAY['completed'::text, 'failed'::text]))),
    CONSTRAINT finished_jobs_times_finite CHECK ((isfinite(scheduled_at) AND isfinite(first_event_at) AND isfinite(max_wait_until) AND isfinite(retry_at) AND isfinite(lease_expires_at) AND isfinite(created_at) AND isfinite(updated_at) AND isfinite(finished_at)))
)
PARTITION BY RANGE (finished_at);

-- Name: finished_jobs_default; Type: TABLE

CREATE TABLE finished_jobs_default (
    id bigint NOT NULL,
    source_type text NOT NULL,
    source_page_id text NOT NULL,
    status text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    event_id text,
    event_count integer DEFAULT 1 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 5 NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    first_event_at timestamp with time zone NOT NULL,
    max_wait_until timestamp with time zone NOT NULL,
    retry_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    locked_by text,
    lease_token uuid,
    revision bigint DEFAULT 0 NOT NULL,
    claimed_revision bigint,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    workspace_id bigint,
    checkpoint jsonb,
    change_kinds text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT finished_jobs_status_check CHECK ((status = ANY (ARRAY['completed'::text, 'failed'::text]))),
    CONSTRAINT finished_jobs_times_finite CHECK ((isfinite(scheduled_at) AND isfinite(first_event_at) AND isfinite(max_wait_until) AND isfinite(retry_at) AND isfinite(lease_expires_at) AND isfinite(created_at) AND isfinite(updated_at) AND isfinite(finished_at)))
);

-- Name: oauth_states; Type: TABLE

CREATE TABLE oauth_states (
    state text NOT NULL,
    source_type text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT oauth_states_times_finite CHECK ((isfinite(created_at) AND isfinite(expires_at)))
);

-- Name: schema_migrations; Type: TABLE

CREATE TABLE schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

-- Name: seen_events; Type: TABLE

CREATE TABLE seen_events (
    source_type text NOT NULL,
    event_id text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT seen_events_times_finite CHECK (isfinite(seen_at))
);

-- Name: subscriptions; Type: TABLE

CREATE TABLE subscriptions (
    id bigint NOT NULL,
    url text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    source_type text,
    workspace_id bigint,
    kinds text[] DEFAULT '{}'::text[] NOT NULL,
    full_content boolean DEFAULT false NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_secret_until timestamp with time zone,
    status text DEFAULT 'active'::text NOT NULL,
    disabled_reason text,
    disabled_at timestamp with time zone,
    epoch text,
    after_xid xid8,
    after_seq bigint,
    batch_id text,
    batch_body text,
    batch_xid xid8,
    batch_seq bigint,
    batch_changes integer,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    failing_since timestamp with time zone,
    last_status integer,
    last_error text,
    last_attempt_at timestamp with time zone,
    last_success_at timestamp with time zone,
    delivered_changes bigint DEFAULT 0 NOT NULL,
    delivered_batches bigint DEFAULT 0 NOT NULL,
    lease_token uuid,
    leased_by text,
    lease_until timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    document_kinds text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT subscriptions_check CHECK ((((batch_id IS NULL) = (batch_body IS NULL)) AND ((batch_id IS NULL) = (batch_xid IS NULL)))),
    CONSTRAINT subscriptions_document_kinds_check CHECK ((document_kinds <@ document_kinds())),
    CONSTRAINT subscriptions_kinds_check CHECK ((kinds <@ ARRAY['upsert'::text, 'delete'::text])),
    CONSTRAINT subscriptions_previous_secret_check CHECK ((previous_secret ~~ 'whsec_%'::text)),
    CONSTRAINT subscriptions_secret_check CHECK ((secret ~~ 'whsec_%'::text)),
    CONSTRAINT subscriptions_status_check CHECK ((status = ANY (ARRAY['active'::text, 'disabled'::text]))),
    CONSTRAINT subscriptions_times_finite CHECK ((isfinite(previous_secret_until) AND isfinite(disabled_at) AND isfinite(next_attempt_at) AND isfinite(failing_since) AND isfinite(last_attempt_at) AND isfinite(last_success_at) AND isfinite(lease_until) AND isfinite(created_at))),
    CONSTRAINT subscriptions_url_check CHECK ((url ~ '^https?://'::text))
);

-- Name: subscriptions_id_seq; Type: SEQUENCE

ALTER TABLE subscriptions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME subscriptions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: sync_jobs_id_seq; Type: SEQUENCE

ALTER TABLE sync_jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME sync_jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: sync_state; Type: TABLE

CREATE TABLE sync_state (
    source_type text NOT NULL,
    source_page_id text NOT NULL,
    state jsonb DEFAULT '{}'::jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sync_state_times_finite CHECK (isfinite(updated_at))
);

-- Name: verification_tokens; Type: TABLE

CREATE TABLE verification_tokens (
    source_type text NOT NULL,
    token text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT verification_tokens_times_finite CHECK (isfinite(received_at))
);

-- Name: workers; Type: TABLE

CREATE TABLE workers (
    worker_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    last_claim_at timestamp with time zone,
    CONSTRAINT workers_times_finite CHECK ((isfinite(started_at) AND isfinite(seen_at) AND isfinite(last_claim_at))),
    CONSTRAINT workers_worker_id_check CHECK ((worker_id <> ''::text))
);

-- Name: workspace_sync_costs; Type: TABLE

CREATE TABLE workspace_sync_costs (
    workspace_id bigint NOT NULL,
    lane text NOT NULL,
    requests bigint DEFAULT 0 NOT NULL,
    pages bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workspace_sync_costs_lane_check CHECK ((lane = ANY (ARRAY['live'::text, 'bulk'::text]))),
    CONSTRAINT workspace_sync_costs_pages_check CHECK ((pages >= 0)),
    CONSTRAINT workspace_sync_costs_requests_check CHECK ((requests >= 0)),
    CONSTRAINT workspace_sync_costs_updated_at_check CHECK (isfinite(updated_at))
);

-- Name: workspaces; Type: TABLE

CREATE TABLE workspaces (
    id bigint NOT NULL,
    source_type text NOT NULL,
    external_id text,
    enterprise_id text,
    name text DEFAULT ''::text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    origin text NOT NULL,
    credentials bytea,
    token_fingerprint text,
    bot_user_id text,
    connected_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    last_auth_error text,
    last_auth_error_at timestamp with time zone,
    blocked_until timestamp with time zone,
    rate_limit_reason text,
    budget_per_minute double precision,
    budget_burst double precision,
    budget_tokens double precision,
    budget_refilled_at timestamp with time zone,
    reconcile boolean,
    reconcile_watermark timestamp with time zone,
    reconciled_at timestamp with time zone,
    full_reconciled_at timestamp with time zone,
    credentials_error text,
    credentials_error_at timestamp with time zone,
    live_due_at timestamp with time zone,
    bulk_due_at timestamp with time zone,
    held_until timestamp with time zone,
    last_served_at timestamp with time zone,
    served_seq bigint DEFAULT 0 NOT NULL,
    at_concurrency_limit boolean DEFAULT false NOT NULL,
    live_line_at timestamp with time zone GENERATED ALWAYS AS (workspace_line_at(live_due_at, status, credentials_error, at_concurrency_limit, blocked_until, held_until, last_served_at)) STORED,
    bulk_line_at timestamp with time zone GENERATED ALWAYS AS (workspace_line_at(bulk_due_at, status, credentials_error, at_concurrency_limit, blocked_until, held_until, last_served_at)) STORED,
    purge_documents boolean DEFAULT false NOT NULL,
    missing_scopes text[] DEFAULT '{}'::text[] NOT NULL,
    missing_scopes_at timestamp with time zone,
    CONSTRAINT workspaces_budget_burst_check CHECK ((budget_burst >= (1)::double precision)),
    CONSTRAINT workspaces_budget_per_minute_check CHECK ((budget_per_minute >= (0)::double precision)),
    CONSTRAINT workspaces_check1 CHECK (((origin = 'env'::text) OR (external_id IS NOT NULL))),
    CONSTRAINT workspaces_credentials_check CHECK (((origin = 'env'::text) OR (status = 'removed'::text) OR (credentials IS NOT NULL))),
    CONSTRAINT workspaces_lines_finite CHECK ((isfinite(live_line_at) AND isfinite(bulk_line_at))),
    CONSTRAINT workspaces_missing_scopes_at_finite CHECK (isfinite(missing_scopes_at)),
    CONSTRAINT workspaces_origin_check CHECK ((origin = ANY (ARRAY['env'::text, 'oauth'::text, 'cli'::text]))),
    CONSTRAINT workspaces_source_type_check CHECK ((source_type <> ''::text)),
    CONSTRAINT workspaces_status_check CHECK ((status = ANY (ARRAY['active'::text, 'paused'::text, 'revoked'::text, 'removed'::text]))),
    CONSTRAINT workspaces_times_finite CHECK ((isfinite(connected_at) AND isfinite(updated_at) AND isfinite(last_auth_error_at) AND isfinite(blocked_until) AND isfinite(budget_refilled_at) AND isfinite(reconcile_watermark) AND isfinite(reconciled_at) AND isfinite(full_reconciled_at) AND isfinite(credentials_error_at) AND isfinite(live_due_at) AND isfinite(bulk_due_at) AND isfinite(held_until) AND isfinite(last_served_at)))
);

-- Name: workspaces_id_seq; Type: SEQUENCE

ALTER TABLE workspaces ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME workspaces_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- Name: workspaces_served_seq; Type: SEQUENCE

CREATE SEQUENCE workspaces_served_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- Name: document_changes_1; Type: TABLE ATTACH

ALTER TABLE ONLY document_changes ATTACH PARTITION document_changes_1 FOR VALUES FROM ('...') TO ('...');

-- Name: document_changes_default; Type: TABLE ATTACH

ALTER TABLE ONLY document_changes ATTACH PARTITION document_changes_default DEFAULT;

-- Name: finished_jobs_default; Type: TABLE ATTACH

ALTER TABLE ONLY finished_jobs ATTACH PARTITION finished_jobs_default DEFAULT;

-- Name: backfills backfills_pkey; Type: CONSTRAINT

ALTER TABLE ONLY backfills
    ADD CONSTRAINT backfills_pkey PRIMARY KEY (id);

-- Name: deletion_holds deletion_holds_pkey; Type: CONSTRAINT

ALTER TABLE ONLY deletion_holds
    ADD CONSTRAINT deletion_holds_pkey PRIMARY KEY (id);

-- Name: document_change_partitions document_change_partitions_lo_key; Type: CONSTRAINT

ALTER TABLE ONLY document_change_partitions
    ADD CONSTRAINT document_change_partitions_lo_key UNIQUE (lo);

-- Name: document_change_partitions document_change_partitions_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_change_partitions
    ADD CONSTRAINT document_change_partitions_pkey PRIMARY KEY (name);

-- Name: document_changes document_changes_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_changes
    ADD CONSTRAINT document_changes_pkey PRIMARY KEY (feed_xid, seq);

-- Name: document_changes_1 document_changes_1_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_changes_1
    ADD CONSTRAINT document_changes_1_pkey PRIMARY KEY (feed_xid, seq);

-- Name: document_changes_default document_changes_default_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_changes_default
    ADD CONSTRAINT document_changes_default_pkey PRIMARY KEY (feed_xid, seq);

-- Name: document_feed document_feed_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_feed
    ADD CONSTRAINT document_feed_pkey PRIMARY KEY (one);

-- Name: document_graves document_graves_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_graves
    ADD CONSTRAINT document_graves_pkey PRIMARY KEY (source_type, document_id);

-- Name: documents documents_pkey; Type: CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_pkey PRIMARY KEY (id);

-- Name: documents documents_source_type_document_id_key; Type: CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_source_type_document_id_key UNIQUE (source_type, document_id);

-- Name: finished_job_partitions finished_job_partitions_lo_key; Type: CONSTRAINT

ALTER TABLE ONLY finished_job_partitions
    ADD CONSTRAINT finished_job_partitions_lo_key UNIQUE (lo);

-- Name: finished_job_partitions finished_job_partitions_pkey; Type: CONSTRAINT

ALTER TABLE ONLY finished_job_partitions
    ADD CONSTRAINT finished_job_partitions_pkey PRIMARY KEY (name);

-- Name: finished_jobs finished_jobs_pkey; Type: CONSTRAINT

ALTER TABLE ONLY finished_jobs
    ADD CONSTRAINT finished_jobs_pkey PRIMARY KEY (id, finished_at);

-- Name: finished_jobs_default finished_jobs_default_pkey; Type: CONSTRAINT

ALTER TABLE ONLY finished_jobs_default
    ADD CONSTRAINT finished_jobs_default_pkey PRIMARY KEY (id, finished_at);

-- Name: oauth_states oauth_states_pkey; Type: CONSTRAINT

ALTER TABLE ONLY oauth_states
    ADD CONSTRAINT oauth_states_pkey PRIMARY KEY (state);

-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

-- Name: seen_events seen_events_pkey; Type: CONSTRAINT

ALTER TABLE ONLY seen_events
    ADD CONSTRAINT seen_events_pkey PRIMARY KEY (source_type, event_id);

-- Name: subscriptions subscriptions_pkey; Type: CONSTRAINT

ALTER TABLE ONLY subscriptions
    ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (id);

-- Name: sync_jobs sync_jobs_pkey; Type: CONSTRAINT

ALTER TABLE ONLY sync_jobs
    ADD CONSTRAINT sync_jobs_pkey PRIMARY KEY (id);

-- Name: sync_state sync_state_pkey; Type: CONSTRAINT

ALTER TABLE ONLY sync_state
    ADD CONSTRAINT sync_state_pkey PRIMARY KEY (source_type, source_page_id);

-- Name: verification_tokens verification_tokens_pkey; Type: CONSTRAINT

ALTER TABLE ONLY verification_tokens
    ADD CONSTRAINT verification_tokens_pkey PRIMARY KEY (source_type, token);

-- Name: workers workers_pkey; Type: CONSTRAINT

ALTER TABLE ONLY workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (worker_id);

-- Name: workspace_sync_costs workspace_sync_costs_pkey; Type: CONSTRAINT

ALTER TABLE ONLY workspace_sync_costs
    ADD CONSTRAINT workspace_sync_costs_pkey PRIMARY KEY (workspace_id, lane);

-- Name: workspaces workspaces_pkey; Type: CONSTRAINT

ALTER TABLE ONLY workspaces
    ADD CONSTRAINT workspaces_pkey PRIMARY KEY (id);

-- Name: backfills_running; Type: INDEX

CREATE UNIQUE INDEX backfills_running ON backfills USING btree (workspace_id) WHERE (status = 'running'::text);

-- Name: backfills_workspace; Type: INDEX

CREATE INDEX backfills_workspace ON backfills USING btree (workspace_id, id DESC);

-- Name: conversation_audiences_key; Type: INDEX

CREATE UNIQUE INDEX conversation_audiences_key ON conversation_audiences USING btree (source_type, COALESCE(workspace_id, (0)::bigint), conversation_id);

-- Name: deletion_holds_open; Type: INDEX

CREATE UNIQUE INDEX deletion_holds_open ON deletion_holds USING btree (source_type, COALESCE(workspace_id, (0)::bigint)) WHERE (status = 'held'::text);

-- Name: documents_audience_members; Type: INDEX

CREATE INDEX documents_audience_members ON documents USING gin (audience_members) WHERE (audience_members IS NOT NULL);

-- Name: documents_audience_public; Type: INDEX

CREATE INDEX documents_audience_public ON documents USING btree (workspace_id, id) WHERE (audience_kind = 'public_channel'::text);

-- Name: documents_deleted_recently; Type: INDEX

CREATE INDEX documents_deleted_recently ON documents USING btree (workspace_id, deleted_at) WHERE ((deleted_at IS NOT NULL) AND (held_by IS NULL));

-- Name: documents_held; Type: INDEX

CREATE INDEX documents_held ON documents USING btree (held_by) WHERE (held_by IS NOT NULL);

-- Name: documents_kind; Type: INDEX

CREATE INDEX documents_kind ON documents USING btree (document_kind(source_type, document_id, metadata), id);

-- Name: documents_kind_by_metadata; Type: INDEX

CREATE INDEX documents_kind_by_metadata ON documents USING btree (source_type, document_id) WHERE (document_kind(source_type, document_id, metadata) <> document_kind(source_type, document_id, NULL::jsonb));

-- Name: documents_page; Type: INDEX

CREATE INDEX documents_page ON documents USING btree (source_type, source_page_id);

-- Name: documents_workspace; Type: INDEX

CREATE INDEX documents_workspace ON documents USING btree (workspace_id) WHERE (workspace_id IS NOT NULL);

-- Name: finished_jobs_finished; Type: INDEX

CREATE INDEX finished_jobs_finished ON ONLY finished_jobs USING btree (finished_at);

-- Name: finished_jobs_default_finished_at_idx; Type: INDEX

CREATE INDEX finished_jobs_default_finished_at_idx ON finished_jobs_default USING btree (finished_at);

-- Name: finished_jobs_source; Type: INDEX

CREATE INDEX finished_jobs_source ON ONLY finished_jobs USING btree (source_type, finished_at);

-- Name: finished_jobs_default_source_type_finished_at_idx; Type: INDEX

CREATE INDEX finished_jobs_default_source_type_finished_at_idx ON finished_jobs_default USING btree (source_type, finished_at);

-- Name: finished_jobs_workspace; Type: INDEX

CREATE INDEX finished_jobs_workspace ON ONLY finished_jobs USING btree (workspace_id, finished_at) WHERE (workspace_id IS NOT NULL);

-- Name: finished_jobs_default_workspace_id_finished_at_idx; Type: INDEX

CREATE INDEX finished_jobs_default_workspace_id_finished_at_idx ON finished_jobs_default USING btree (workspace_id, finished_at) WHERE (workspace_id IS NOT NULL);

-- Name: seen_events_seen_at; Type: INDEX

CREATE INDEX seen_events_seen_at ON seen_events USING btree (seen_at);

-- Name: subscriptions_to_lease; Type: INDEX

CREATE INDEX subscriptions_to_lease ON subscriptions USING btree (lease_until) WHERE (status = 'active'::text);

-- Name: sync_jobs_active_page; Type: INDEX

CREATE UNIQUE INDEX sync_jobs_active_page ON sync_jobs USING btree (source_type, source_page_id) WHERE (status = ANY (ARRAY['pending'::text, 'processing'::text]));

-- Name: sync_jobs_claim_unowned; Type: INDEX

CREATE INDEX sync_jobs_claim_unowned ON sync_jobs USING btree (source_type, priority DESC, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NULL));

-- Name: sync_jobs_claim_workspace; Type: INDEX

CREATE INDEX sync_jobs_claim_workspace ON sync_jobs USING btree (workspace_id, priority DESC, scheduled_at) WHERE (status = 'pending'::text);

-- Name: sync_jobs_due; Type: INDEX

CREATE INDEX sync_jobs_due ON sync_jobs USING btree (scheduled_at) WHERE (status = 'pending'::text);

-- Name: sync_jobs_due_unowned; Type: INDEX

CREATE INDEX sync_jobs_due_unowned ON sync_jobs USING btree (source_type, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NULL));

-- Name: sync_jobs_lease; Type: INDEX

CREATE INDEX sync_jobs_lease ON sync_jobs USING btree (lease_expires_at) WHERE (status = 'processing'::text);

-- Name: sync_jobs_ready_bulk; Type: INDEX

CREATE INDEX sync_jobs_ready_bulk ON sync_jobs USING btree (workspace_id, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NOT NULL) AND (job_lane(priority) = 'bulk'::text));

-- Name: sync_jobs_ready_live; Type: INDEX

CREATE INDEX sync_jobs_ready_live ON sync_jobs USING btree (workspace_id, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NOT NULL) AND (job_lane(priority) = 'live'::text));

-- Name: sync_jobs_workspace; Type: INDEX

CREATE INDEX sync_jobs_workspace ON sync_jobs USING btree (workspace_id, status) WHERE (workspace_id IS NOT NULL);

-- Name: workspaces_env; Type: INDEX

CREATE UNIQUE INDEX workspaces_env ON workspaces USING btree (source_type) WHERE (origin = 'env'::text);

-- Name: workspaces_external; Type: INDEX

CREATE UNIQUE INDEX workspaces_external ON workspaces USING btree (source_type, external_id) WHERE (external_id IS NOT NULL);

-- Name: workspaces_line_bulk; Type: INDEX

CREATE INDEX workspaces_line_bulk ON workspaces USING btree (source_type, bulk_line_at, served_seq) WHERE (bulk_line_at IS NOT NULL);

-- Name: workspaces_line_live; Type: INDEX

CREATE INDEX workspaces_line_live ON workspaces USING btree (source_type, live_line_at, served_seq) WHERE (live_line_at IS NOT NULL);

-- Name: document_changes_1_pkey; Type: INDEX ATTACH

ALTER INDEX document_changes_pkey ATTACH PARTITION document_changes_1_pkey;

-- Name: document_changes_default_pkey; Type: INDEX ATTACH

ALTER INDEX document_changes_pkey ATTACH PARTITION document_changes_default_pkey;

-- Name: finished_jobs_default_finished_at_idx; Type: INDEX ATTACH

ALTER INDEX finished_jobs_finished ATTACH PARTITION finished_jobs_default_finished_at_idx;

-- Name: finished_jobs_default_pkey; Type: INDEX ATTACH

ALTER INDEX finished_jobs_pkey ATTACH PARTITION finished_jobs_default_pkey;

-- Name: finished_jobs_default_source_type_finished_at_idx; Type: INDEX ATTACH

ALTER INDEX finished_jobs_source ATTACH PARTITION finished_jobs_default_source_type_finished_at_idx;

-- Name: finished_jobs_default_workspace_id_finished_at_idx; Type: INDEX ATTACH

ALTER INDEX finished_jobs_workspace ATTACH PARTITION finished_jobs_default_workspace_id_finished_at_idx;

-- Name: documents documents_feed_append; Type: TRIGGER

CREATE TRIGGER documents_feed_append AFTER INSERT OR DELETE ON documents FOR EACH ROW EXECUTE FUNCTION document_feed_append();

-- Name: documents documents_feed_position; Type: TRIGGER

CREATE TRIGGER documents_feed_position BEFORE INSERT OR UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION document_feed_position();

-- Name: backfills backfills_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY backfills
    ADD CONSTRAINT backfills_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id);

-- Name: conversation_audiences conversation_audiences_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY conversation_audiences
    ADD CONSTRAINT conversation_audiences_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id);

-- Name: documents documents_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id);

-- Name: sync_jobs sync_jobs_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY sync_jobs
    ADD CONSTRAINT sync_jobs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id);

-- Name: workspace_sync_costs workspace_sync_costs_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY workspace_sync_costs
    ADD CONSTRAINT workspace_sync_costs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id);
