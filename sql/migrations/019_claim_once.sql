-- 019: the claim written once, its line kept without triggers (docs/claim.md says what the
-- claim guarantees and why each piece below exists; this file only names the pieces).
-- There is no migration 016: this one was written as 016 before 017 and 018 landed, and was
-- renumbered so that it applies after them everywhere.
--
-- Until 015 the line (workspaces.live_due_at / bulk_due_at / at_concurrency_limit) was kept
-- exact at every commit by statement triggers, deferred constraint triggers and set_config
-- accumulators, and concurrent statements still deadlocked now and then. Now:
--   * every statement that changes jobs moves its workspaces' line only in the safe direction
--     (a lane earlier, the concurrency flag off: sql/queries/queue.sql, _line_upkeep), after its job
--     rows, locking the workspace rows in id order;
--   * the claim, which holds the rows of the workspaces it looks at, sets their line exactly
--     (a lane that was early costs that one look);
--   * repair_lines (the pruner) repairs what a hand-written statement left behind.

drop trigger sync_jobs_ready_insert on sync_jobs;
drop trigger sync_jobs_ready_update on sync_jobs;
drop trigger sync_jobs_ready_delete on sync_jobs;
drop trigger sync_jobs_ready_flush_insert on sync_jobs;
drop trigger sync_jobs_ready_flush_update on sync_jobs;
drop trigger sync_jobs_ready_flush_delete on sync_jobs;
drop function sync_jobs_ready_flush();
drop function sync_jobs_ready_note();
drop function workspaces_ready_refresh(bigint[], bigint[]);
drop function claim_pick(timestamptz, integer, text[], integer[], text[], float8[], float8[],
                         float8[], integer);

-- The line: when a workspace can next be served in a lane (docs/claim.md, "The line"); NULL
-- while it is out of the line (paused, revoked, token not decrypting, at its concurrency
-- limit, or no pending job in the lane).
create function workspace_line_at(due timestamptz, status text, credentials_error text,
                                  at_concurrency_limit boolean, blocked_until timestamptz,
                                  held_until timestamptz, last_served_at timestamptz)
returns timestamptz
language sql immutable parallel safe
return case when due is not null and status = 'active' and credentials_error is null
                 and not at_concurrency_limit
            then greatest(due, blocked_until, held_until, last_served_at) end;

drop index workspaces_ready_live;
drop index workspaces_ready_bulk;
alter table workspaces
    add column live_line_at timestamptz generated always as (
        workspace_line_at(live_due_at, status, credentials_error, at_concurrency_limit,
                          blocked_until, held_until, last_served_at)) stored,
    add column bulk_line_at timestamptz generated always as (
        workspace_line_at(bulk_due_at, status, credentials_error, at_concurrency_limit,
                          blocked_until, held_until, last_served_at)) stored;
alter table workspaces add constraint workspaces_lines_finite check (
    isfinite(live_line_at) and isfinite(bulk_line_at));      -- every time column (015)
create index workspaces_line_live on workspaces (source_type, live_line_at, served_seq)
    where live_line_at is not null;
create index workspaces_line_bulk on workspaces (source_type, bulk_line_at, served_seq)
    where bulk_line_at is not null;

-- A workspace's lanes from its pending jobs, leaving out the jobs `taken` (the claim's, still
-- pending in its snapshot): the earliest scheduled_at of its live (priority >= 0) and bulk
-- (priority < 0) jobs; NULL: none. Two probes of sync_jobs_ready_live / _bulk (migration 011).
create function workspace_lanes(ws bigint, taken bigint[])
returns table (live_due_at timestamptz, bulk_due_at timestamptz)
language sql stable parallel safe
as $$
    select (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and j.priority >= 0
               and j.id <> all(taken)),
           (select min(j.scheduled_at) from sync_jobs j
             where j.workspace_id = ws and j.status = 'pending' and j.priority < 0
               and j.id <> all(taken))
$$;

-- A workspace's token bucket at `now` (sql/queries/budgets.sql's _bucket and the claim): rate
-- (requests/s, 0: unmetered), burst, level (requests available). per_minute and burst are the
-- workspace's own, else its source's default (NULL: unmetered).
create function workspace_bucket(at_time timestamptz, tokens float8, refilled_at timestamptz,
                                 per_minute float8, capacity float8)
returns table (rate float8, burst float8, level float8)
language sql immutable parallel safe
as $$
    select p.rate, p.burst,
           case when p.rate = 0 then p.burst
                else least(p.burst, coalesce(tokens, p.burst)
                                    + p.rate * greatest(0, extract(epoch from at_time
                                                           - coalesce(refilled_at, at_time))))
           end
      from (select coalesce(per_minute, 0) / 60.0 as rate,
                   greatest(1, coalesce(capacity, 1))::float8 as burst) p
$$;

-- The line's upkeep by a statement that changed jobs (docs/claim.md, "Keeping the line"), one
-- element per job changed: its workspace, its due time if it is pending now (else NULL), its
-- priority, and whether it left 'processing' (freed). Each workspace's lane moves earlier to
-- its earliest such job, and its concurrency flag ends when a sync of it ended: never later,
-- never on, so any interleaving of statements leaves the line no later than the jobs. The rows
-- are locked in id order first; the update then reads them with a fresh snapshot. A statement
-- calls it with arrays built from its changed rows, so it runs after all its job locks.
create function workspaces_line_move(p_ws bigint[], p_due timestamptz[], p_priority integer[],
                                     p_freed boolean[]) returns integer
language plpgsql as $$
declare
    changed integer;
begin
    perform 1 from workspaces where id = any(p_ws) order by id for no key update;
    update workspaces w
       set live_due_at = least(w.live_due_at, m.live_due_at),
           bulk_due_at = least(w.bulk_due_at, m.bulk_due_at),
           at_concurrency_limit = w.at_concurrency_limit and not m.freed
      from (select m.ws, min(m.due) filter (where m.priority >= 0) as live_due_at,
                   min(m.due) filter (where m.priority < 0) as bulk_due_at,
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

-- repair_lines's repair (sql/queries/claim.sql): lock the workspaces in id order, then (a fresh
-- snapshot: every statement that changed their jobs has committed, or will move the line after
-- this) set their lanes from their jobs, and end the concurrency flag of those with fewer than
-- workspace_concurrency syncs in flight. Returns how many rows changed.
create function workspaces_line_repair(ids bigint[], workspace_concurrency integer) returns integer
language plpgsql as $$
declare
    changed integer;
begin
    perform 1 from workspaces where id = any(ids) order by id for no key update;
    update workspaces w
       set live_due_at = v.live_due_at, bulk_due_at = v.bulk_due_at,
           at_concurrency_limit = v.at_concurrency_limit
      from (select r.id, l.live_due_at, l.bulk_due_at,
                   r.at_concurrency_limit
                   and (select count(*) from sync_jobs p
                         where p.workspace_id = r.id and p.status = 'processing')
                       >= workspace_concurrency as at_concurrency_limit
              from workspaces r cross join lateral workspace_lanes(r.id, '{}') l
             where r.id = any(ids)) v
     where w.id = v.id
       and (w.live_due_at, w.bulk_due_at, w.at_concurrency_limit)
           is distinct from (v.live_due_at, v.bulk_due_at, v.at_concurrency_limit);
    get diagnostics changed = row_count;
    return changed;
end
$$;

-- What the claim works with: a workspace it locked and what it may take now (its bucket, its
-- syncs in flight, offer: how many jobs it gives this claim), and a job it could take (of such a workspace or of
-- none).
create type claim_offer as (id bigint, rate float8, level float8, cost float8,
                            in_flight integer, offer integer);
create type claim_candidate as (id bigint, source_type text, workspace_id bigint,
                                priority integer, scheduled_at timestamptz);

-- The claim (docs/claim.md, "The steps"): chooses and locks the jobs one claim takes, does
-- what the claim does to the workspaces it looked at, marks the jobs taken processing for
-- p_worker_id with a lease of p_lease_seconds, and returns each (job) with what its sync needs
-- of its workspace (ws_*, NULL for a job of no workspace). PL/pgSQL keeps each statement's
-- plan for the session (migration 014) and runs each with a fresh snapshot: the workspaces are
-- locked before their jobs are read, and the jobs are marked by a statement whose snapshot
-- sees every job the steps locked (a calling statement's older snapshot would miss a job
-- committed after it began: chosen, counted out of its lane, and never marked).
create function claim_jobs(p_now timestamptz, p_worker_id text, p_lease_seconds float8,
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
                  from (select c.*, c.priority < 0 as bulk,
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
