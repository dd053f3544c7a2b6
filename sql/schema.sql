-- The schema the migrations sql/NNN_*.sql produce, as pg_dump prints it (normalised).
-- Generated: do not edit. After adding a migration, regenerate it with
--   python -m debounce.schema_dump > sql/schema.sql
-- (tests/test_schema_file.py fails until the two agree).

-- Name: claim_pick(timestamp with time zone, integer, text[], integer[], text[], double precision[], double precision[], double precision[], integer); Type: FUNCTION

CREATE FUNCTION claim_pick(p_now timestamp with time zone, p_limit integer, p_sources text[], p_rooms integer[], p_budget_sources text[], p_per_minutes double precision[], p_bursts double precision[], p_costs double precision[], p_workspace_limit integer) RETURNS SETOF bigint
    LANGUAGE plpgsql
    AS $$
declare
    v_now  timestamptz := coalesce(p_now, now());
    v_ws   bigint[] := '{}';
    v_took bigint[];
    v_n    integer;
    i      integer;
begin
    -- the workspaces to look at: each source's live line, then its bulk line
    for i in 1 .. coalesce(cardinality(p_sources), 0) loop
        v_n := least(p_rooms[i], p_limit);
        continue when v_n is null or v_n <= 0;
        select coalesce(array_agg(l.id), '{}') into v_took
          from (select w.id from workspaces w
                 where w.source_type = p_sources[i] and w.status = 'active'
                   and w.credentials_error is null
                   and w.live_due_at is not null and not w.at_concurrency_limit
                   and greatest(w.live_due_at, w.blocked_until, w.held_until,
                                w.last_served_at) <= v_now
                 order by greatest(w.live_due_at, w.blocked_until, w.held_until,
                                   w.last_served_at), w.served_seq
                 limit v_n
                   for no key update skip locked) l;
        if cardinality(v_took) < v_n then
            select v_took || coalesce(array_agg(b.id), '{}') into v_took
              from (select w.id from workspaces w
                     where w.source_type = p_sources[i] and w.status = 'active'
                       and w.credentials_error is null
                       and w.bulk_due_at is not null and not w.at_concurrency_limit
                       and greatest(w.bulk_due_at, w.blocked_until, w.held_until,
                                    w.last_served_at) <= v_now
                       and w.id <> all(v_took)
                     order by greatest(w.bulk_due_at, w.blocked_until, w.held_until,
                                       w.last_served_at), w.served_seq
                     limit v_n - cardinality(v_took)
                       for no key update skip locked) b;
        end if;
        v_ws := v_ws || v_took;
    end loop;

    if cardinality(v_ws) = 0 then
        -- no workspace in line: the jobs of no workspace, per source, in turns
        return query
        select c.id
          from unnest(p_sources, p_rooms) as s(source_type, room)
         cross join lateral (
            select j.id, j.priority, j.scheduled_at,
                   row_number() over (order by j.priority desc, j.scheduled_at, j.id) as turn
              from (select j.id, j.priority, j.scheduled_at
                      from sync_jobs j
                     where j.status = 'pending'
                       and j.workspace_id is null
                       and j.source_type = s.source_type
                       and j.scheduled_at <= v_now
                     order by j.priority desc, j.scheduled_at
                     limit least(s.room, p_limit)
                       for update of j skip locked) j
         ) c
         where s.room > 0
         order by c.priority < 0, c.turn, c.priority desc, c.scheduled_at, c.id
         limit p_limit;
        return;
    end if;

    return query
    with rooms as (
        select * from unnest(p_sources, p_rooms) as r(source_type, room)
    ), defaults as (
        select * from unnest(p_budget_sources, p_per_minutes, p_bursts, p_costs)
               as d(source_type, per_minute, burst, cost)
    ), ws as (
        select w.id, b.rate, b.level, least(coalesce(d.cost, 1), b.burst) as cost,
               f.in_flight,
               greatest(least(p_workspace_limit - f.in_flight,
                              case when b.rate = 0 then p_limit
                                   else floor(b.level / least(coalesce(d.cost, 1),
                                                              b.burst))::int
                              end), 0) as room
          from workspaces w
          left join defaults d on d.source_type = w.source_type
         cross join lateral (
            select count(*)::int as in_flight from sync_jobs p
             where p.workspace_id = w.id and p.status = 'processing'
         ) f
         cross join lateral (    -- sql/budgets.sql, _bucket
            select p.rate, p.burst,
                   case when p.rate = 0 then p.burst
                        else least(p.burst, coalesce(w.budget_tokens, p.burst)
                                            + p.rate * greatest(0, extract(epoch from v_now
                                                  - coalesce(w.budget_refilled_at, v_now))))
                   end as level
              from (select coalesce(w.budget_per_minute, d.per_minute, 0) / 60.0 as rate,
                           greatest(1, coalesce(w.budget_burst, d.burst, 1)) as burst) p
         ) b
         where w.id = any(v_ws)
    ), picked as (
        select c.*
          from ws
         cross join lateral (
            select j.id, j.source_type, j.workspace_id, j.priority, j.scheduled_at
              from sync_jobs j
             where j.workspace_id = ws.id
               and j.status = 'pending'
               and j.scheduled_at <= v_now
               and j.source_type = any(p_sources)
             order by j.priority desc, j.scheduled_at
             limit ws.room
               for update of j skip locked
         ) c
         where ws.room > 0
        union all
        select c.*
          from rooms s
         cross join lateral (
            select j.id, j.source_type, j.workspace_id, j.priority, j.scheduled_at
              from sync_jobs j
             where j.status = 'pending'
               and j.workspace_id is null
               and j.source_type = s.source_type
               and j.scheduled_at <= v_now
             order by j.priority desc, j.scheduled_at
             limit least(s.room, p_limit)
               for update of j skip locked
         ) c
         where s.room > 0
    ), turns as (
        select p.*, row_number() over (partition by p.workspace_id, p.source_type
                                       order by p.priority desc, p.scheduled_at, p.id) as turn
          from picked p
    ), ordered as (
        select t.*, row_number() over (partition by t.source_type
                                       order by t.priority < 0, t.turn, t.priority desc,
                                                t.scheduled_at, t.id) as source_turn
          from turns t
    ), due as (
        select o.id, o.workspace_id
          from ordered o
          join rooms r on r.source_type = o.source_type
         where o.source_turn <= r.room
         order by o.priority < 0, o.turn, o.priority desc, o.scheduled_at, o.id
         limit p_limit
    ), served as (
        -- each claimed job's requests reserved in its bucket; a workspace served goes to the
        -- back of its line; one left unable to take a job is held (see the header)
        update workspaces w
           set budget_tokens      = case when ws.rate > 0 and c.n > 0 then ws.level - ws.cost * c.n
                                         else w.budget_tokens end,
               budget_refilled_at = case when ws.rate > 0 and c.n > 0
                                         then greatest(v_now, coalesce(w.budget_refilled_at, v_now))
                                         else w.budget_refilled_at end,
               last_served_at     = case when c.n > 0 or (ws.room > 0 and f.n is null)
                                         then v_now else w.last_served_at end,
               served_seq         = case when c.n > 0 or (ws.room > 0 and f.n is null)
                                         then nextval('workspaces_served_seq')
                                         else w.served_seq end,
               at_concurrency_limit = ws.in_flight + coalesce(c.n, 0) >= p_workspace_limit,
               held_until         = case
                   when ws.in_flight + coalesce(c.n, 0) >= p_workspace_limit then null
                   when ws.rate > 0 and ws.level - ws.cost * coalesce(c.n, 0) < ws.cost
                       then v_now + make_interval(secs => (ws.cost - (ws.level
                                                   - ws.cost * coalesce(c.n, 0))) / ws.rate)
                   else null end
          from ws
          left join (select d.workspace_id, count(*)::int as n from due d
                      where d.workspace_id is not null group by d.workspace_id) c
            on c.workspace_id = ws.id
          left join (select p.workspace_id, count(*)::int as n from picked p
                      where p.workspace_id is not null group by p.workspace_id) f
            on f.workspace_id = ws.id
         where w.id = ws.id
           and w.id = any(v_ws)
        returning w.id
    )
    select due.id from due;
end
$$;

-- Name: document_feed_append(); Type: FUNCTION

CREATE FUNCTION document_feed_append() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if tg_op = 'DELETE' then
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (greatest(pg_current_xact_id(), old.feed_xid), nextval('document_changes_seq'),
                old.source_type, old.workspace_id, old.document_id, old.source_page_id,
                'delete', now(), old.content_sha256);
    elsif tg_op = 'INSERT' or new.feed_seq is distinct from old.feed_seq then
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (new.feed_xid, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256);
    else
        return null;
    end if;
    if (select followers_until from document_feed) > now() then
        perform pg_notify('debounce_documents', '');
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
        prev := old;
        prev.synced_at := new.synced_at;
        prev.source_updated_at := new.source_updated_at;
        prev.listed_at := new.listed_at;
        prev.updated_at := new.updated_at;
        prev.feed_xid := new.feed_xid;
        prev.feed_seq := new.feed_seq;
        if prev is not distinct from new then
            return new;   -- only bookkeeping moved: no change for consumers
        end if;
    end if;
    new.feed_xid := greatest(pg_current_xact_id(), case when tg_op = 'UPDATE' then old.feed_xid end);
    new.feed_seq := nextval('document_changes_seq');
    return new;
end $$;

-- Name: sync_jobs_ready_flush(); Type: FUNCTION

CREATE FUNCTION sync_jobs_ready_flush() RETURNS trigger
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
declare
    touched bigint[];
    freed   bigint[];
begin
    touched := nullif(current_setting('debounce.ready_touched', true), '')::bigint[];
    freed := nullif(current_setting('debounce.ready_freed', true), '')::bigint[];
    if touched is null and freed is null then
        return null;
    end if;
    touched := coalesce(touched, '{}');
    freed := coalesce(freed, '{}');
    perform set_config('debounce.ready_touched', '', true);
    perform set_config('debounce.ready_freed', '', true);
    perform workspaces_ready_refresh(array(select distinct t from unnest(touched) t order by t),
                                     array(select distinct f from unnest(freed) f order by f));
    return null;
end
$$;

-- Name: sync_jobs_ready_note(); Type: FUNCTION

CREATE FUNCTION sync_jobs_ready_note() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
declare
    touched bigint[];
    freed   bigint[];
begin
    -- touched: a pending job came, went or moved (its due time, lane or workspace);
    -- freed: a job left 'processing' (or its workspace).
    if tg_op = 'INSERT' then
        select array_agg(distinct n.workspace_id) into touched
          from new_rows n where n.workspace_id is not null and n.status = 'pending';
    elsif tg_op = 'DELETE' then
        select array_agg(distinct o.workspace_id) filter (where o.status = 'pending'),
               array_agg(distinct o.workspace_id) filter (where o.status = 'processing')
          into touched, freed
          from old_rows o
         where o.workspace_id is not null;
    else
        select array_agg(distinct x.ws) filter (where x.touched),
               array_agg(distinct x.ws) filter (where x.freed)
          into touched, freed
          from old_rows o
          join new_rows n on n.id = o.id
         cross join lateral (values
                (o.workspace_id, o.status = 'pending',
                 o.status = 'processing' and (n.status <> 'processing'
                                              or n.workspace_id is distinct from o.workspace_id)),
                (n.workspace_id, n.status = 'pending', false)) as x(ws, touched, freed)
         where x.ws is not null
           and (x.touched or x.freed)
           and (o.status, o.scheduled_at, o.priority < 0, o.workspace_id)
               is distinct from (n.status, n.scheduled_at, n.priority < 0, n.workspace_id);
    end if;
    if touched is not null then
        perform set_config('debounce.ready_touched',
            (coalesce(nullif(current_setting('debounce.ready_touched', true), ''), '{}')::bigint[]
             || touched)::text, true);
    end if;
    if freed is not null then
        perform set_config('debounce.ready_freed',
            (coalesce(nullif(current_setting('debounce.ready_freed', true), ''), '{}')::bigint[]
             || freed)::text, true);
    end if;
    return null;
end
$$;

-- Name: workspaces_ready_refresh(bigint[], bigint[]); Type: FUNCTION

CREATE FUNCTION workspaces_ready_refresh(touched bigint[], freed bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
declare
    changed integer;
    cleared integer;
begin
    perform 1 from workspaces where id = any(touched) or id = any(freed)
     order by id for no key update;
    update workspaces w
       set live_due_at = v.live_due_at, bulk_due_at = v.bulk_due_at,
           at_concurrency_limit = v.at_concurrency_limit
      from (select r.id,
                   (select min(j.scheduled_at) from sync_jobs j
                     where j.workspace_id = r.id and j.workspace_id is not null
                       and j.status = 'pending'
                       and j.priority >= 0) as live_due_at,
                   (select min(j.scheduled_at) from sync_jobs j
                     where j.workspace_id = r.id and j.workspace_id is not null
                       and j.status = 'pending'
                       and j.priority < 0) as bulk_due_at,
                   r.at_concurrency_limit and not r.id = any(freed) as at_concurrency_limit
              from workspaces r where r.id = any(touched)) v
     where w.id = v.id
       and (w.live_due_at, w.bulk_due_at, w.at_concurrency_limit)
           is distinct from (v.live_due_at, v.bulk_due_at, v.at_concurrency_limit);
    get diagnostics changed = row_count;
    -- a sync ended and no pending job changed (a completion): only the K hold ends
    update workspaces w set at_concurrency_limit = false
     where w.id = any(freed) and not w.id = any(touched) and w.at_concurrency_limit;
    get diagnostics cleared = row_count;
    return changed + cleared;
end
$$;

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
    followers_until timestamp with time zone,
    CONSTRAINT document_feed_one_check CHECK (one),
    CONSTRAINT document_feed_times_finite CHECK (isfinite(followers_until))
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

-- Name: enumerations; Type: TABLE

CREATE TABLE enumerations (
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
    CONSTRAINT enumerations_kind_check CHECK ((kind = ANY (ARRAY['backfill'::text, 'reconcile'::text, 'full_reconcile'::text]))),
    CONSTRAINT enumerations_status_check CHECK ((status = ANY (ARRAY['running'::text, 'done'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT enumerations_times_finite CHECK ((isfinite(started_at) AND isfinite(updated_at) AND isfinite(finished_at) AND isfinite(lease_expires_at) AND isfinite(not_before) AND isfinite(newest_seen) AND isfinite(watermark)))
);

-- Name: enumerations_id_seq; Type: SEQUENCE

ALTER TABLE enumerations ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME enumerations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
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
    CONSTRAINT sync_jobs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT sync_jobs_check CHECK (((status = 'processing'::text) = (lease_token IS NOT NULL))),
    CONSTRAINT sync_jobs_event_count_check CHECK ((event_count >= 0)),
    CONSTRAINT sync_jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT sync_jobs_source_page_id_check CHECK ((source_page_id <> ''::text)),
    CONSTRAINT sync_jobs_source_type_check CHECK ((source_type <> ''::text)),
    CONSTRAINT sync_jobs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'processing'::text, 'completed'::text, 'failed'::text]))),
    CONSTRAINT sync_jobs_times_finite CHECK ((isfinite(scheduled_at) AND isfinite(first_event_at) AND isfinite(max_wait_until) AND isfinite(retry_at) AND isfinite(lease_expires_at) AND isfinite(created_at) AND isfinite(updated_at) AND isfinite(finished_at)))
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
    CONSTRAINT workspaces_budget_burst_check CHECK ((budget_burst >= (1)::double precision)),
    CONSTRAINT workspaces_budget_per_minute_check CHECK ((budget_per_minute >= (0)::double precision)),
    CONSTRAINT workspaces_check CHECK (((origin = 'env'::text) OR (credentials IS NOT NULL))),
    CONSTRAINT workspaces_check1 CHECK (((origin = 'env'::text) OR (external_id IS NOT NULL))),
    CONSTRAINT workspaces_origin_check CHECK ((origin = ANY (ARRAY['env'::text, 'oauth'::text, 'cli'::text]))),
    CONSTRAINT workspaces_source_type_check CHECK ((source_type <> ''::text)),
    CONSTRAINT workspaces_status_check CHECK ((status = ANY (ARRAY['active'::text, 'paused'::text, 'revoked'::text]))),
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

-- Name: document_changes document_changes_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_changes
    ADD CONSTRAINT document_changes_pkey PRIMARY KEY (feed_xid, seq);

-- Name: document_feed document_feed_pkey; Type: CONSTRAINT

ALTER TABLE ONLY document_feed
    ADD CONSTRAINT document_feed_pkey PRIMARY KEY (one);

-- Name: documents documents_pkey; Type: CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_pkey PRIMARY KEY (id);

-- Name: documents documents_source_type_document_id_key; Type: CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_source_type_document_id_key UNIQUE (source_type, document_id);

-- Name: enumerations enumerations_pkey; Type: CONSTRAINT

ALTER TABLE ONLY enumerations
    ADD CONSTRAINT enumerations_pkey PRIMARY KEY (id);

-- Name: oauth_states oauth_states_pkey; Type: CONSTRAINT

ALTER TABLE ONLY oauth_states
    ADD CONSTRAINT oauth_states_pkey PRIMARY KEY (state);

-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

-- Name: seen_events seen_events_pkey; Type: CONSTRAINT

ALTER TABLE ONLY seen_events
    ADD CONSTRAINT seen_events_pkey PRIMARY KEY (source_type, event_id);

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

-- Name: workspaces workspaces_pkey; Type: CONSTRAINT

ALTER TABLE ONLY workspaces
    ADD CONSTRAINT workspaces_pkey PRIMARY KEY (id);

-- Name: conversation_audiences_key; Type: INDEX

CREATE UNIQUE INDEX conversation_audiences_key ON conversation_audiences USING btree (source_type, COALESCE(workspace_id, (0)::bigint), conversation_id);

-- Name: documents_audience_members; Type: INDEX

CREATE INDEX documents_audience_members ON documents USING gin (audience_members) WHERE (audience_members IS NOT NULL);

-- Name: documents_audience_public; Type: INDEX

CREATE INDEX documents_audience_public ON documents USING btree (workspace_id, id) WHERE (audience_kind = 'public_channel'::text);

-- Name: documents_page; Type: INDEX

CREATE INDEX documents_page ON documents USING btree (source_type, source_page_id);

-- Name: documents_workspace; Type: INDEX

CREATE INDEX documents_workspace ON documents USING btree (workspace_id) WHERE (workspace_id IS NOT NULL);

-- Name: enumerations_running; Type: INDEX

CREATE UNIQUE INDEX enumerations_running ON enumerations USING btree (workspace_id) WHERE (status = 'running'::text);

-- Name: enumerations_workspace; Type: INDEX

CREATE INDEX enumerations_workspace ON enumerations USING btree (workspace_id, id DESC);

-- Name: seen_events_seen_at; Type: INDEX

CREATE INDEX seen_events_seen_at ON seen_events USING btree (seen_at);

-- Name: sync_jobs_active_page; Type: INDEX

CREATE UNIQUE INDEX sync_jobs_active_page ON sync_jobs USING btree (source_type, source_page_id) WHERE (status = ANY (ARRAY['pending'::text, 'processing'::text]));

-- Name: sync_jobs_claim_source; Type: INDEX

CREATE INDEX sync_jobs_claim_source ON sync_jobs USING btree (source_type, priority DESC, scheduled_at) WHERE (status = 'pending'::text);

-- Name: sync_jobs_claim_unowned; Type: INDEX

CREATE INDEX sync_jobs_claim_unowned ON sync_jobs USING btree (source_type, priority DESC, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NULL));

-- Name: sync_jobs_claim_workspace; Type: INDEX

CREATE INDEX sync_jobs_claim_workspace ON sync_jobs USING btree (workspace_id, priority DESC, scheduled_at) WHERE (status = 'pending'::text);

-- Name: sync_jobs_due; Type: INDEX

CREATE INDEX sync_jobs_due ON sync_jobs USING btree (scheduled_at) WHERE (status = 'pending'::text);

-- Name: sync_jobs_due_unowned; Type: INDEX

CREATE INDEX sync_jobs_due_unowned ON sync_jobs USING btree (source_type, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NULL));

-- Name: sync_jobs_finished; Type: INDEX

CREATE INDEX sync_jobs_finished ON sync_jobs USING btree (finished_at) WHERE (status = ANY (ARRAY['completed'::text, 'failed'::text]));

-- Name: sync_jobs_lease; Type: INDEX

CREATE INDEX sync_jobs_lease ON sync_jobs USING btree (lease_expires_at) WHERE (status = 'processing'::text);

-- Name: sync_jobs_ready_bulk; Type: INDEX

CREATE INDEX sync_jobs_ready_bulk ON sync_jobs USING btree (workspace_id, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NOT NULL) AND (priority < 0));

-- Name: sync_jobs_ready_live; Type: INDEX

CREATE INDEX sync_jobs_ready_live ON sync_jobs USING btree (workspace_id, scheduled_at) WHERE ((status = 'pending'::text) AND (workspace_id IS NOT NULL) AND (priority >= 0));

-- Name: sync_jobs_workspace; Type: INDEX

CREATE INDEX sync_jobs_workspace ON sync_jobs USING btree (workspace_id, status) WHERE (workspace_id IS NOT NULL);

-- Name: workspaces_env; Type: INDEX

CREATE UNIQUE INDEX workspaces_env ON workspaces USING btree (source_type) WHERE (origin = 'env'::text);

-- Name: workspaces_external; Type: INDEX

CREATE UNIQUE INDEX workspaces_external ON workspaces USING btree (source_type, external_id) WHERE (external_id IS NOT NULL);

-- Name: workspaces_ready_bulk; Type: INDEX

CREATE INDEX workspaces_ready_bulk ON workspaces USING btree (source_type, GREATEST(bulk_due_at, blocked_until, held_until, last_served_at), served_seq) WHERE ((status = 'active'::text) AND (credentials_error IS NULL) AND (bulk_due_at IS NOT NULL) AND (NOT at_concurrency_limit));

-- Name: workspaces_ready_live; Type: INDEX

CREATE INDEX workspaces_ready_live ON workspaces USING btree (source_type, GREATEST(live_due_at, blocked_until, held_until, last_served_at), served_seq) WHERE ((status = 'active'::text) AND (credentials_error IS NULL) AND (live_due_at IS NOT NULL) AND (NOT at_concurrency_limit));

-- Name: documents documents_feed_append; Type: TRIGGER

CREATE TRIGGER documents_feed_append AFTER INSERT OR DELETE OR UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION document_feed_append();

-- Name: documents documents_feed_position; Type: TRIGGER

CREATE TRIGGER documents_feed_position BEFORE INSERT OR UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION document_feed_position();

-- Name: sync_jobs sync_jobs_ready_delete; Type: TRIGGER

CREATE TRIGGER sync_jobs_ready_delete AFTER DELETE ON sync_jobs REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_jobs_ready_note();

-- Name: sync_jobs sync_jobs_ready_flush_delete; Type: TRIGGER

CREATE CONSTRAINT TRIGGER sync_jobs_ready_flush_delete AFTER DELETE ON sync_jobs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((old.workspace_id IS NOT NULL)) EXECUTE FUNCTION sync_jobs_ready_flush();

-- Name: sync_jobs sync_jobs_ready_flush_insert; Type: TRIGGER

CREATE CONSTRAINT TRIGGER sync_jobs_ready_flush_insert AFTER INSERT ON sync_jobs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.workspace_id IS NOT NULL)) EXECUTE FUNCTION sync_jobs_ready_flush();

-- Name: sync_jobs sync_jobs_ready_flush_update; Type: TRIGGER

CREATE CONSTRAINT TRIGGER sync_jobs_ready_flush_update AFTER UPDATE ON sync_jobs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((((old.workspace_id IS NOT NULL) OR (new.workspace_id IS NOT NULL)) AND ((old.status IS DISTINCT FROM new.status) OR (old.scheduled_at IS DISTINCT FROM new.scheduled_at) OR (old.priority IS DISTINCT FROM new.priority) OR (old.workspace_id IS DISTINCT FROM new.workspace_id)))) EXECUTE FUNCTION sync_jobs_ready_flush();

-- Name: sync_jobs sync_jobs_ready_insert; Type: TRIGGER

CREATE TRIGGER sync_jobs_ready_insert AFTER INSERT ON sync_jobs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_jobs_ready_note();

-- Name: sync_jobs sync_jobs_ready_update; Type: TRIGGER

CREATE TRIGGER sync_jobs_ready_update AFTER UPDATE ON sync_jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_jobs_ready_note();

-- Name: conversation_audiences conversation_audiences_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY conversation_audiences
    ADD CONSTRAINT conversation_audiences_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE;

-- Name: documents documents_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY documents
    ADD CONSTRAINT documents_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE SET NULL;

-- Name: enumerations enumerations_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY enumerations
    ADD CONSTRAINT enumerations_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE;

-- Name: sync_jobs sync_jobs_workspace_id_fkey; Type: FK CONSTRAINT

ALTER TABLE ONLY sync_jobs
    ADD CONSTRAINT sync_jobs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE SET NULL;
