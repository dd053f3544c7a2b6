-- 018: what a job's events said changed, and what syncs cost per workspace (issue 31).
--
-- sync_jobs.change_kinds  the kinds of change the events a job absorbed named (a source's own
--                         words: Notion 'content', 'properties'), merged by the enqueue: the
--                         sorted union; '{}' means "unknown or everything" (a bulk job, a
--                         re-sync, an event that does not say) and absorbs every other kind, so
--                         a sync never asks for less than one of its events needed.
-- workspace_sync_costs    requests sent and pages synced per workspace and lane (live: webhooks
--                         and re-syncs; bulk: backfill and reconciliation), added by the
--                         workers, read by /metrics and the dashboard (requests per page).

alter table sync_jobs add column change_kinds text[] not null default '{}';

-- The merge of two sets of kinds: the union, sorted; an empty set ("everything") absorbs.
create function debounce_merge_kinds(a text[], b text[]) returns text[]
language sql immutable parallel safe as $$
    select case when a is null then b
                when b is null then a
                when cardinality(a) = 0 or cardinality(b) = 0 then '{}'::text[]
                else array(select distinct k from unnest(a || b) as u(k) order by k) end
$$;

-- The merge over the events of one page in one enqueue batch.
create aggregate debounce_union_kinds(text[]) (
    sfunc = debounce_merge_kinds,
    stype = text[]
);

create table workspace_sync_costs (
    workspace_id bigint      not null references workspaces (id) on delete cascade,
    lane         text        not null check (lane in ('live', 'bulk')),
    requests     bigint      not null default 0 check (requests >= 0),
    pages        bigint      not null default 0 check (pages >= 0),
    updated_at   timestamptz not null default now() check (isfinite(updated_at)),
    primary key (workspace_id, lane)
);
