-- _fence --
-- The claim fence (docs/design.md, "Invariants"), included by every write below as the CTEs
-- `fence` (the claimed job, locked) and `allowed` (ok: the write may happen). Inside a sync,
-- a write happens only while the job's lease token %(fence_job_id)s/%(fence_lease_token)s is
-- still held (NULL: unfenced). FOR SHARE locks the job row, so a requeue or re-claim that
-- revokes the lease waits for the statement, or, if it committed first, is seen here (the
-- lock rechecks the latest row version) and the write is refused.
fence as (
    select workspace_id from sync_jobs
     where id = %(fence_job_id)s::bigint and lease_token = %(fence_lease_token)s::uuid
       and status = 'processing'
       for share
), allowed as (
    select %(fence_job_id)s::bigint is null or exists (select 1 from fence) as ok
)

-- upsert_document --
-- Write one synced document. A document whose content hash, title, url, metadata and audience
-- are all unchanged (and which is not marked deleted) is not rewritten: only synced_at and
-- source_updated_at move. The audience (migration 012): %(audience_kind)s NULL keeps the
-- stored one; otherwise kind and members are replaced, and accessible_by is replaced unless
-- NULL (a Notion event without accessible_by says nothing new). %(sections)s: the sections
-- the service cut (migration 027), written with the content (a row without them gets them
-- even when nothing else changed); any write releases a held deletion (held_by). Fenced by
-- %(fence_job_id)s/%(fence_lease_token)s (NULL: unfenced).
-- Returns one row: outcome = inserted | updated | unchanged | lease_lost.
with {{_fence}}, up as (
    -- The document belongs to the workspace of the job that wrote it.
    insert into documents as d (source_type, document_id, source_page_id, title, url, content,
                                content_sha256, metadata, source_updated_at, synced_at,
                                workspace_id, audience_kind, audience_members,
                                audience_accessible_by, sections)
    select %(source_type)s, %(document_id)s, %(source_page_id)s, %(title)s, %(url)s, %(content)s,
           %(content_sha256)s, %(metadata)s, %(source_updated_at)s, now(),
           (select workspace_id from fence), %(audience_kind)s, %(audience_members)s::text[],
           %(audience_accessible_by)s::text[], %(sections)s::jsonb
      from allowed where allowed.ok
    on conflict (source_type, document_id) do update set
        workspace_id      = coalesce(excluded.workspace_id, d.workspace_id),
        source_page_id    = excluded.source_page_id,
        title             = excluded.title,
        url               = excluded.url,
        content           = excluded.content,
        content_sha256    = excluded.content_sha256,
        metadata          = excluded.metadata,
        source_updated_at = excluded.source_updated_at,
        synced_at         = now(),
        deleted_at        = null,
        updated_at        = now(),
        audience_kind     = coalesce(excluded.audience_kind, d.audience_kind),
        audience_members  = case when excluded.audience_kind is null then d.audience_members
                                 else excluded.audience_members end,
        audience_accessible_by = coalesce(excluded.audience_accessible_by,
                                          d.audience_accessible_by),
        sections          = excluded.sections,
        held_by           = null
    where (d.content_sha256, d.title, d.url, d.metadata, d.source_page_id, d.deleted_at is null,
           d.workspace_id, d.audience_kind, d.audience_members, d.audience_accessible_by)
          is distinct from
          (excluded.content_sha256, excluded.title, excluded.url, excluded.metadata,
           excluded.source_page_id, true, coalesce(excluded.workspace_id, d.workspace_id),
           coalesce(excluded.audience_kind, d.audience_kind),
           case when excluded.audience_kind is null then d.audience_members
                else excluded.audience_members end,
           coalesce(excluded.audience_accessible_by, d.audience_accessible_by))
       or (d.sections is null and excluded.sections is not null)
    returning (xmax = 0) as inserted
), touched as (
    update documents
       set synced_at = now(),
           source_updated_at = coalesce(%(source_updated_at)s, source_updated_at),
           held_by = null
     where source_type = %(source_type)s and document_id = %(document_id)s
       and not exists (select 1 from up)
       and (select ok from allowed)
    returning 1
)
select case
         when not (select ok from allowed) then 'lease_lost'
         when exists (select 1 from up where inserted) then 'inserted'
         when exists (select 1 from up) then 'updated'
         else 'unchanged'
       end as outcome

-- mark_deleted --
-- Mark the named documents of a source deleted (idempotent: an already-deleted row keeps its
-- deleted_at), through the deletion guard (migration 027: held instead when the workspace's
-- deletions look like a mistake; %(why)s what the source answered, %(max_count)s,
-- %(max_share)s and %(window)s its limits). Fenced like upsert_document. Returns the ids of
-- the rows marked or held now (held: whether held), and one row with a NULL id when the fence
-- refused the write.
with {{_fence}}, locked as (
    -- in id order, as every statement that locks several documents (docs/claim.md)
    select id from documents
     where source_type = %(source_type)s
       and document_id = any(%(document_ids)s::text[])
       and deleted_at is null
       and (select ok from allowed)
     order by id
       for update
), marked as (
select * from debounce_delete_documents(array(select id from locked), %(why)s,
                                        %(max_count)s, %(max_share)s, %(window)s)
)
select document_id, held from marked
union all
select null, false from allowed where not ok

-- mark_page_deleted --
-- Mark every document that came from one job key deleted (a trashed Notion page, a Slack
-- channel that is gone), and the file documents (%(file_prefix)s<file id>) those documents were
-- the only ones to show: the files the job's last sync showed (its sync_state row
-- %(state_key)s, {"files": {<file id>: …}}, written by the worker) that no other job's row
-- (%(state_prefix)s…) shows. All through the deletion guard like mark_deleted; the job's row of
-- shown files is forgotten (a page restored later shows its files anew). Fenced like
-- upsert_document. Returns the ids marked or held now (held: whether held), and one row with a
-- NULL id when the fence refused the write.
with {{_fence}}, shown as (
    select f.file_id
      from sync_state s,
           jsonb_object_keys(case when jsonb_typeof(s.state->'files') = 'object'
                                  then s.state->'files' else '{}'::jsonb end) as f(file_id)
     where s.source_type = %(source_type)s and s.source_page_id = %(state_key)s
), orphans as (
    -- shown by no other job (a scan of the source's rows of shown files, only when the
    -- deleted job showed files)
    select %(file_prefix)s || sh.file_id as document_id
      from shown sh
     where not exists (select 1 from sync_state o
                        where o.source_type = %(source_type)s
                          and starts_with(o.source_page_id, %(state_prefix)s)
                          and o.source_page_id <> %(state_key)s
                          and o.state->'files' ? sh.file_id)
), locked as (
    -- in id order, as every statement that locks several documents (docs/claim.md)
    select id from documents
     where source_type = %(source_type)s
       and (source_page_id = %(source_page_id)s
            or document_id = any(array(select document_id from orphans)))
       and deleted_at is null
       and (select ok from allowed)
     order by id
       for update
), marked as (
select * from debounce_delete_documents(array(select id from locked), %(why)s,
                                        %(max_count)s, %(max_share)s, %(window)s)
), forgotten as (
    delete from sync_state
     where source_type = %(source_type)s and source_page_id = %(state_key)s
       and (select ok from allowed)
)
select document_id, held from marked
union all
select null, false from allowed where not ok

-- get_document --
-- One document by its key.
select * from documents where source_type = %(source_type)s and document_id = %(document_id)s

-- current_document --
-- One live document by its key (none when it is missing or marked deleted): what a sync that
-- fetches only part of a page keeps of the rest (title, url, metadata, content, edit time).
select title, url, content, metadata, source_updated_at, source_page_id
  from documents
 where source_type = %(source_type)s and document_id = %(document_id)s and deleted_at is null

-- current_documents_matching --
-- The live documents of one source whose metadata contains the given JSON (jsonb @>), without
-- their content: what a sync that summarises other documents reads (a Notion data source's
-- table reads its rows' titles and properties). In document id order.
select document_id, source_page_id, title, url, metadata, source_updated_at
  from documents
 where source_type = %(source_type)s and deleted_at is null and metadata @> %(metadata)s
 order by document_id

-- get_state --
-- The integration's saved state for one job key (Slack: history watermark).
select state from sync_state where source_type = %(source_type)s and source_page_id = %(source_page_id)s

-- set_state --
-- Save the integration's state for one job key, replacing what was there. Fenced like
-- upsert_document. Returns ok = false when the fence refused the write.
with {{_fence}}, saved as (
insert into sync_state (source_type, source_page_id, state, updated_at)
select %(source_type)s, %(source_page_id)s, %(state)s, now()
  from allowed where allowed.ok
on conflict (source_type, source_page_id) do update set state = excluded.state, updated_at = now()
returning 1
)
select ok from allowed

-- purge_removed --
-- Mark deleted up to %(limit)s live documents of removed workspaces whose removal asked for it
-- (workspaces.purge_documents; of workspace %(workspace_id)s, NULL: of any): one deletion each
-- in the change feed. Documents another statement holds are skipped (the next batch takes
-- them): one table, in id order, waiting for nothing. Returns their ids.
with batch as (
    select d.id
      from documents d
     where d.deleted_at is null
       and d.workspace_id = any(array(select w.id from workspaces w
                                       where w.status = 'removed' and w.purge_documents
                                         and (%(workspace_id)s::bigint is null
                                              or w.id = %(workspace_id)s::bigint)))
     order by d.id
     limit %(limit)s
       for update of d skip locked
)
update documents d
   set deleted_at = now(), synced_at = now(), updated_at = now()
  from batch
 where d.id = batch.id
returning d.id
