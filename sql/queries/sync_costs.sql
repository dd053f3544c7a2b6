-- What syncs cost per workspace (migration 018): requests sent and pages synced by lane
-- (live: webhooks and re-syncs; bulk: backfill and reconciliation).

-- add_sync_costs --
-- Add a batch of a worker's counts: %(workspace_ids)s bigint[], %(lanes)s text[],
-- %(requests)s bigint[], %(pages)s bigint[] (one row per workspace and lane). A workspace
-- being removed, or gone, is skipped (_referable, sql/queries/workspaces.sql). Rows are locked in
-- (workspace_id, lane) order.
with referred as (
    select distinct u.ws from unnest(%(workspace_ids)s::bigint[]) as u(ws)
), {{workspaces._referable}}
)
insert into workspace_sync_costs as c (workspace_id, lane, requests, pages, updated_at)
select i.workspace_id, i.lane, i.requests, i.pages, now()
  from unnest(%(workspace_ids)s::bigint[], %(lanes)s::text[], %(requests)s::bigint[],
              %(pages)s::bigint[]) as i(workspace_id, lane, requests, pages)
 where i.workspace_id in (select id from referable)
 order by i.workspace_id, i.lane
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
