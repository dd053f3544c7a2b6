-- list_documents --
-- Documents in id order after id %(after_id)s (keyset: stable under concurrent writes, each
-- row at most once), at most %(limit)s, filtered by source %(source_type)s, workspace
-- %(workspace_id)s and updated after %(updated_after)s (NULL: any). Deleted documents are
-- included (deleted_at set: tombstones). With their sections (migration 027).
select id, source_type, document_id, source_page_id, workspace_id, title, url, content,
       content_sha256, metadata, updated_at, deleted_at, audience_kind, audience_members,
       audience_accessible_by, sections
  from documents
 where id > %(after_id)s::bigint
   and (%(source_type)s::text is null or source_type = %(source_type)s::text)
   and (%(workspace_id)s::bigint is null or workspace_id = %(workspace_id)s::bigint)
   and (%(updated_after)s::timestamptz is null or updated_at > %(updated_after)s::timestamptz)
 order by id
 limit %(limit)s

-- document --
-- One document by its source and document id (deleted ones too), with its sections.
select id, source_type, document_id, source_page_id, workspace_id, title, url, content,
       content_sha256, metadata, updated_at, deleted_at, audience_kind, audience_members,
       audience_accessible_by, sections
  from documents
 where source_type = %(source_type)s and document_id = %(document_id)s
