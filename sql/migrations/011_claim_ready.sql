-- 011: a claim whose cost depends on what it claims, not on how many workspaces exist.
--
-- The line this migration added, and the rules of the claim that reads it: docs/claim.md.
-- Migration 019 replaced the triggers below; sql/schema.sql shows the schema as it stands.
alter table workspaces add column live_due_at    timestamptz;
alter table workspaces add column bulk_due_at    timestamptz;
alter table workspaces add column held_until     timestamptz;
alter table workspaces add column last_served_at timestamptz;
alter table workspaces add column served_seq     bigint not null default 0;

create sequence workspaces_served_seq;

-- The trigger's probes: a workspace's earliest pending job per lane (two partial indexes, so
-- the claim's walk of a workspace's jobs in priority order keeps sync_jobs_claim_workspace).
create index sync_jobs_ready_live
    on sync_jobs (workspace_id, scheduled_at)
    where status = 'pending' and workspace_id is not null and priority >= 0;
create index sync_jobs_ready_bulk
    on sync_jobs (workspace_id, scheduled_at)
    where status = 'pending' and workspace_id is not null and priority < 0;
-- The idle worker's due time of jobs of no workspace, per source.
create index sync_jobs_due_unowned
    on sync_jobs (source_type, scheduled_at)
    where status = 'pending' and workspace_id is null;

-- The claim's line, one per lane: live work before bulk work. A paused or revoked workspace,
-- or one whose token a worker cannot decrypt (credentials_error, migration 010), is not in it.
create index workspaces_ready_live
    on workspaces (source_type, greatest(live_due_at, blocked_until, held_until, last_served_at),
                   served_seq)
    where status = 'active' and credentials_error is null and live_due_at is not null;
create index workspaces_ready_bulk
    on workspaces (source_type, greatest(bulk_due_at, blocked_until, held_until, last_served_at),
                   served_seq)
    where status = 'active' and credentials_error is null and bulk_due_at is not null;

-- The triggers that kept the line until migration 019 (docs/claim.md, "Keeping the line").
create function workspaces_ready_refresh(touched bigint[], freed bigint[]) returns integer
language plpgsql as $$
declare
    changed integer;
    cleared integer;
begin
    perform 1 from workspaces where id = any(touched) or id = any(freed)
     order by id for no key update;
    update workspaces w
       set live_due_at = v.live_due_at, bulk_due_at = v.bulk_due_at, held_until = v.held_until
      from (select r.id,
                   (select min(j.scheduled_at) from sync_jobs j
                     where j.workspace_id = r.id and j.workspace_id is not null
                       and j.status = 'pending'
                       and j.priority >= 0) as live_due_at,
                   (select min(j.scheduled_at) from sync_jobs j
                     where j.workspace_id = r.id and j.workspace_id is not null
                       and j.status = 'pending'
                       and j.priority < 0) as bulk_due_at,
                   case when r.held_until = 'infinity' and r.id = any(freed)
                        then null else r.held_until end as held_until
              from workspaces r where r.id = any(touched)) v
     where w.id = v.id
       and (w.live_due_at, w.bulk_due_at, w.held_until)
           is distinct from (v.live_due_at, v.bulk_due_at, v.held_until);
    get diagnostics changed = row_count;
    -- a sync ended and no pending job changed (a completion): only the K hold ends
    update workspaces w set held_until = null
     where w.id = any(freed) and not w.id = any(touched) and w.held_until = 'infinity';
    get diagnostics cleared = row_count;
    return changed + cleared;
end
$$;

-- The workspaces whose jobs a statement changed (transition tables): those whose pending
-- jobs may have changed, and those that had a job leave 'processing'; noted for the flush at
-- commit.
create function sync_jobs_ready_note() returns trigger
language plpgsql as $$
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

-- At commit (the first deferred event of the transaction does the work, the others find
-- nothing noted): recompute every noted workspace.
create function sync_jobs_ready_flush() returns trigger
language plpgsql as $$
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

create trigger sync_jobs_ready_insert after insert on sync_jobs
    referencing new table as new_rows
    for each statement execute function sync_jobs_ready_note();
create trigger sync_jobs_ready_update after update on sync_jobs
    referencing old table as old_rows new table as new_rows
    for each statement execute function sync_jobs_ready_note();
create trigger sync_jobs_ready_delete after delete on sync_jobs
    referencing old table as old_rows
    for each statement execute function sync_jobs_ready_note();

create constraint trigger sync_jobs_ready_flush_insert after insert on sync_jobs
    deferrable initially deferred for each row
    when (new.workspace_id is not null)
    execute function sync_jobs_ready_flush();
create constraint trigger sync_jobs_ready_flush_update after update on sync_jobs
    deferrable initially deferred for each row
    when ((old.workspace_id is not null or new.workspace_id is not null)
          and (old.status is distinct from new.status
               or old.scheduled_at is distinct from new.scheduled_at
               or old.priority is distinct from new.priority
               or old.workspace_id is distinct from new.workspace_id))
    execute function sync_jobs_ready_flush();
create constraint trigger sync_jobs_ready_flush_delete after delete on sync_jobs
    deferrable initially deferred for each row
    when (old.workspace_id is not null)
    execute function sync_jobs_ready_flush();

-- Existing deployments: every workspace's lanes from its pending jobs.
update workspaces w
   set live_due_at = (select min(j.scheduled_at) from sync_jobs j
                       where j.workspace_id = w.id and j.workspace_id is not null
                         and j.status = 'pending'
                         and j.priority >= 0),
       bulk_due_at = (select min(j.scheduled_at) from sync_jobs j
                       where j.workspace_id = w.id and j.workspace_id is not null
                         and j.status = 'pending'
                         and j.priority < 0);
