-- list_holds --
-- Deletions held because they looked like a mistake (migration 027), newest first: those of
-- status %(status)s (NULL: any) and workspace %(workspace_id)s (NULL: any), at most %(limit)s,
-- each with its workspace's name and how many documents it holds now (live, still marked by
-- it). Holds of a removed workspace are left out (its tombstone: nothing syncs it).
select h.id, h.workspace_id, w.name as workspace_name, h.source_type, h.status, h.reason,
       h.created_at, h.updated_at, h.resolved_at, h.resolved,
       (select count(*) from documents d
         where d.held_by = h.id and d.deleted_at is null and h.status = 'held')::int as held
  from deletion_holds h
  left join workspaces w on w.id = h.workspace_id
 where w.status is distinct from 'removed'
   and (%(status)s::text is null or h.status = %(status)s::text)
   and (%(workspace_id)s::bigint is null or h.workspace_id = %(workspace_id)s::bigint)
 order by h.id desc
 limit %(limit)s

-- get_hold --
-- One hold by id %(id)s, as list_holds gives it (no row: none, or its workspace is removed).
select h.id, h.workspace_id, w.name as workspace_name, h.source_type, h.status, h.reason,
       h.created_at, h.updated_at, h.resolved_at, h.resolved,
       (select count(*) from documents d
         where d.held_by = h.id and d.deleted_at is null and h.status = 'held')::int as held
  from deletion_holds h
  left join workspaces w on w.id = h.workspace_id
 where h.id = %(id)s::bigint and w.status is distinct from 'removed'

-- held_documents --
-- The documents hold %(id)s holds now (live, still marked by it, the hold open), in id order,
-- at most %(limit)s.
select d.source_type, d.document_id, d.source_page_id, d.title, d.url
  from documents d join deletion_holds h on h.id = d.held_by and h.status = 'held'
 where d.held_by = %(id)s::bigint and d.deleted_at is null
 order by d.id
 limit %(limit)s

-- lock_held_documents --
-- The first step of an operator's decision on hold %(id)s (deletions.resolve, one transaction):
-- its documents locked in id order, as the deletion guard locks them (docs/claim.md), before
-- resolve_hold locks the hold row.
select d.id from documents d
 where d.held_by = %(id)s::bigint and d.deleted_at is null
 order by d.id
   for update

-- resolve_hold --
-- The second step: the decision %(decision)s on hold %(id)s, whose documents the first step
-- locked. 'applied' marks them deleted (they were held live), 'dismissed' keeps them live and
-- releases them; either way the hold is closed with how many documents the decision touched.
-- Only an open hold: no row when it is not open (already resolved) or not there.
with hold as (
    select h.id from deletion_holds h
     where h.id = %(id)s::bigint and h.status = 'held'
       for update
), held as (
    select d.id from documents d
     where d.held_by = %(id)s::bigint and d.deleted_at is null
), applied as (
    update documents d
       set deleted_at = now(), synced_at = now(), updated_at = now()
     where %(decision)s::text = 'applied'
       and d.id in (select id from held) and exists (select 1 from hold)
    returning 1
), dismissed as (
    update documents d
       set held_by = null
     where %(decision)s::text = 'dismissed'
       and d.id in (select id from held) and exists (select 1 from hold)
    returning 1
)
update deletion_holds h
   set status = %(decision)s::text, resolved_at = now(), updated_at = now(),
       resolved = (select count(*) from applied) + (select count(*) from dismissed)
 where h.id in (select id from hold)
returning h.*
