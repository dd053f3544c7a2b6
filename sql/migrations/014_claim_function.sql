-- 014: the claim's choice as a function, so the worker's claim is planned once per connection.
--
-- Until 013 the claim (sql/queries/claim.sql) was one statement of a dozen CTEs. PostgreSQL parsed and
-- planned it at every execution (its generic plan was slower than a custom one), which cost
-- 3-4 ms of the server's time per claim whatever the claim took: one worker claiming a few
-- jobs per round trip could not drain more than about 1 000 no-op jobs/s
-- (docs/benchmarks-history.md, section 10). PL/pgSQL keeps each statement of a function prepared for the session, and the
-- statements below are simple enough for a generic plan: the choice costs index probes.
--
-- claim_pick(...) chooses and locks the jobs one claim takes (the rules: docs/claim.md;
-- migration 019 replaced it).
create function claim_pick(p_now timestamptz, p_limit integer, p_sources text[],
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
                   and w.live_due_at is not null
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
                       and w.bulk_due_at is not null
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
               held_until         = case
                   when ws.in_flight + coalesce(c.n, 0) >= p_workspace_limit
                       then 'infinity'::timestamptz
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

-- The ready line's upkeep at commit (migration 011: the deferred trigger's flush and the
-- recompute it calls) runs after every claim and completion of a workspace's jobs. Left to
-- PostgreSQL's choice, its statements were planned again at every call (custom plans):
-- about 2 ms of a commit, against 0.2 ms to run them. Their generic plans are index probes by
-- primary key and by (workspace_id, scheduled_at), whatever the arrays hold, so they are kept
-- (measured: 2.24 -> 0.57 ms per call; docs/benchmarks-history.md, section 10).
alter function workspaces_ready_refresh(bigint[], bigint[])
    set plan_cache_mode = force_generic_plan;
alter function sync_jobs_ready_flush()
    set plan_cache_mode = force_generic_plan;
