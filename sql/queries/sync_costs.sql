-- What syncs cost per workspace (migration 018): requests sent and pages synced by lane
-- (live: webhooks and re-syncs; bulk: backfill and reconciliation).

-- add_sync_costs --
-- Add a batch of a worker's counts: %(workspace_ids)s bigint[], %(priorities)s int[] (the
-- synced job's priority: its lane is job_lane's, migration 022), %(requests)s bigint[],
-- %(pages)s bigint[]; summed per workspace and lane. A workspace id with no row (none since
-- migration 022: workspace rows are never deleted) is skipped. Rows are locked in
-- (workspace_id, lane) order.
insert into workspace_sync_costs as c (workspace_id, lane, requests, pages, updated_at)
select i.workspace_id, job_lane(i.priority), sum(i.requests), sum(i.pages), now()
  from unnest(%(workspace_ids)s::bigint[], %(priorities)s::int[], %(requests)s::bigint[],
              %(pages)s::bigint[]) as i(workspace_id, priority, requests, pages)
 where exists (select 1 from workspaces w where w.id = i.workspace_id)
 group by 1, 2
 order by 1, 2
on conflict (workspace_id, lane) do update set
    requests   = c.requests + excluded.requests,
    pages      = c.pages + excluded.pages,
    updated_at = now()

-- sync_costs --
-- Every workspace's counts (%(workspace_id)s NULL), or one workspace's.
select c.workspace_id, w.source_type, c.lane, c.requests, c.pages
  from workspace_sync_costs c
  join workspaces w on w.id = c.workspace_id
 where %(workspace_id)s::bigint is null or c.workspace_id = %(workspace_id)s::bigint
 order by c.workspace_id, c.lane
