-- 015: "at its concurrency limit" is a flag, not a fake time; no time column holds an infinity.
--
-- Until 014 a workspace with DEBOUNCE_WORKSPACE_CONCURRENCY syncs in flight was held with
-- held_until = 'infinity'. Python cannot load an infinite timestamptz (psycopg raises
-- DataError), so a statement that returned the workspace row (`returning *`) failed while the
-- workspace was busy: a worker restarted then could not start, and webhooks answered 500
-- (issue 32). Now:
--   at_concurrency_limit  true while the workspace has its limit of syncs in flight (set by the
--                         claim, cleared when one of them leaves 'processing'); it is out of the
--                         claim's lines meanwhile;
--   held_until            only the budget's hold: a time (its bucket cannot pay for a sync
--                         before then) or NULL.
-- And every time column of the schema is finite (a CHECK per table), so no value the schema
-- allows can stop a process that reads it; document_feed.followers_until is NULL for "no
-- follower waiting" instead of '-infinity'.

alter table workspaces add column at_concurrency_limit boolean not null default false;
update workspaces set at_concurrency_limit = true where held_until = 'infinity';
update workspaces set held_until = null where not isfinite(held_until);

-- The claim's lines (migration 011) without the workspaces at their limit.
drop index workspaces_ready_live;
drop index workspaces_ready_bulk;
create index workspaces_ready_live
    on workspaces (source_type, greatest(live_due_at, blocked_until, held_until, last_served_at),
                   served_seq)
    where status = 'active' and credentials_error is null and live_due_at is not null
      and not at_concurrency_limit;
create index workspaces_ready_bulk
    on workspaces (source_type, greatest(bulk_due_at, blocked_until, held_until, last_served_at),
                   served_seq)
    where status = 'active' and credentials_error is null and bulk_due_at is not null
      and not at_concurrency_limit;

-- The lines' upkeep at commit (migration 011), freeing a workspace at its limit by the flag.
create or replace function workspaces_ready_refresh(touched bigint[], freed bigint[]) returns integer
language plpgsql as $$
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

alter function workspaces_ready_refresh(bigint[], bigint[])
    set plan_cache_mode = force_generic_plan;

-- The claim's choice (migration 014; its header states the rules): the lines skip workspaces
-- at their limit, and the claim sets the flag instead of an infinite hold.
create or replace function claim_pick(p_now timestamptz, p_limit integer, p_sources text[],
                           p_rooms integer[], p_budget_sources text[],
                           p_per_minutes float8[], p_bursts float8[], p_costs float8[],
                           p_workspace_limit integer)
returns setof bigint
language plpgsql as $$
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
         cross join lateral (    -- sql/queries/budgets.sql, _bucket
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

alter table document_feed alter column followers_until drop not null;
alter table document_feed alter column followers_until set default null;
update document_feed set followers_until = null where not isfinite(followers_until);

-- No infinite time anywhere (isfinite(NULL) is NULL: a NULL passes).
update workspaces set blocked_until = null where not isfinite(blocked_until);
alter table sync_jobs add constraint sync_jobs_times_finite check (
    isfinite(scheduled_at) and isfinite(first_event_at) and isfinite(max_wait_until) and
    isfinite(retry_at) and isfinite(lease_expires_at) and isfinite(created_at) and
    isfinite(updated_at) and isfinite(finished_at));
alter table workspaces add constraint workspaces_times_finite check (
    isfinite(connected_at) and isfinite(updated_at) and isfinite(last_auth_error_at) and
    isfinite(blocked_until) and isfinite(budget_refilled_at) and
    isfinite(reconcile_watermark) and isfinite(reconciled_at) and
    isfinite(full_reconciled_at) and isfinite(credentials_error_at) and
    isfinite(live_due_at) and isfinite(bulk_due_at) and isfinite(held_until) and
    isfinite(last_served_at));
alter table documents add constraint documents_times_finite check (
    isfinite(created_at) and isfinite(updated_at) and isfinite(synced_at) and
    isfinite(deleted_at) and isfinite(source_updated_at) and isfinite(listed_at));
alter table document_changes add constraint document_changes_times_finite check (
    isfinite(changed_at) and isfinite(updated_at));
alter table document_feed add constraint document_feed_times_finite check (
    isfinite(followers_until));
alter table enumerations add constraint enumerations_times_finite check (
    isfinite(started_at) and isfinite(updated_at) and isfinite(finished_at) and
    isfinite(lease_expires_at) and isfinite(not_before) and isfinite(newest_seen) and
    isfinite(watermark));
alter table conversation_audiences add constraint conversation_audiences_times_finite check (
    isfinite(refreshed_at));
alter table oauth_states add constraint oauth_states_times_finite check (
    isfinite(created_at) and isfinite(expires_at));
alter table seen_events add constraint seen_events_times_finite check (
    isfinite(seen_at));
alter table sync_state add constraint sync_state_times_finite check (
    isfinite(updated_at));
alter table verification_tokens add constraint verification_tokens_times_finite check (
    isfinite(received_at));

-- Who works the queue: each worker process says it is alive every few seconds, with when it
-- last claimed a job (debounce/worker/heartbeat.py), so `debounce stats` and /metrics can say
-- that no worker has claimed for N seconds while due jobs wait (docs/deploying.md, "Alerts").
create table workers (
    worker_id     text        primary key check (worker_id <> ''),
    started_at    timestamptz not null default now(),
    seen_at       timestamptz not null default now(),
    last_claim_at timestamptz,
    constraint workers_times_finite check (
        isfinite(started_at) and isfinite(seen_at) and isfinite(last_claim_at))
);
