-- list_documents --
-- Documents in id order after id %(after_id)s (keyset: stable under concurrent writes, each
-- row at most once), at most %(limit)s, filtered by source %(source_type)s, workspace
-- %(workspace_id)s, updated after %(updated_after)s and kind of document %(document_kind)s
-- (NULL: any; the index documents_kind serves a kind). Deleted documents are included
-- (deleted_at set: tombstones). With their sections (migration 027) and kind (migration 029).
select id, source_type, document_id, source_page_id, workspace_id, title, url, content,
       content_sha256, metadata, updated_at, deleted_at, audience_kind, audience_members,
       audience_accessible_by, sections, document_kind(source_type, document_id, metadata) as kind
  from documents
 where id > %(after_id)s::bigint
   and (%(document_kind)s::text is null
        or document_kind(source_type, document_id, metadata) = %(document_kind)s::text)
   and (%(source_type)s::text is null or source_type = %(source_type)s::text)
   and (%(workspace_id)s::bigint is null or workspace_id = %(workspace_id)s::bigint)
   and (%(updated_after)s::timestamptz is null or updated_at > %(updated_after)s::timestamptz)
 order by id
 limit %(limit)s

-- document --
-- One document by its source and document id (deleted ones too), with its sections and kind.
select id, source_type, document_id, source_page_id, workspace_id, title, url, content,
       content_sha256, metadata, updated_at, deleted_at, audience_kind, audience_members,
       audience_accessible_by, sections, document_kind(source_type, document_id, metadata) as kind
  from documents
 where source_type = %(source_type)s and document_id = %(document_id)s

-- browse_documents --
-- Documents newest id first, without their content: of one source (or any, NULL), of one
-- workspace %(workspace_id)s (or any, NULL), %(state)s 'live' or 'deleted' (marked deleted) or
-- either (NULL), whose title contains %(title)s case-insensitively (or any, NULL); %(cursor)s
-- is the last id of the previous page (or NULL).
select d.id, d.source_type, d.document_id, d.source_page_id, d.title, d.url, d.synced_at,
       d.deleted_at, length(d.content) as content_chars
  from documents d
 where (%(source_type)s::text is null or d.source_type = %(source_type)s::text)
   and (%(workspace_id)s::bigint is null or d.workspace_id = %(workspace_id)s::bigint)
   and (%(state)s::text is null or (%(state)s::text = 'deleted') = (d.deleted_at is not null))
   and (%(title)s::text is null or strpos(lower(d.title), lower(%(title)s::text)) > 0)
   and (%(cursor)s::bigint is null or d.id < %(cursor)s::bigint)
 order by d.id desc
 limit %(limit)s

-- document_by_row_id --
-- One document by its row id, with its content.
select * from documents where id = %(id)s

-- page_documents --
-- The documents a job key produced (without content), by document id; at most %(limit)s.
select d.id, d.document_id, d.title, d.synced_at, d.deleted_at
  from documents d
 where d.source_type = %(source_type)s and d.source_page_id = %(source_page_id)s
 order by d.document_id
 limit %(limit)s

-- latest_documents --
-- Synced documents, newest first (by row id, the order of the dashboard's Documents page),
-- optionally of one source %(source_type)s and one kind of document %(document_kind)s
-- (NULL: any), each with its kind (migration 029).
select id, source_type, document_id, title, length(content) as chars, synced_at, deleted_at,
       audience_kind, audience_members, audience_accessible_by,
       document_kind(source_type, document_id, metadata) as kind
  from documents
 where (%(source_type)s::text is null or source_type = %(source_type)s::text)
   and (%(document_kind)s::text is null
        or document_kind(source_type, document_id, metadata) = %(document_kind)s::text)
 order by id desc
 limit %(limit)s

-- newest_by_document_id --
-- One document by id (any source).
select * from documents where document_id = %(document_id)s order by synced_at desc limit 1

-- count_documents --
-- How many documents exist (for the demo's closing log line).
select count(*) as n from documents
