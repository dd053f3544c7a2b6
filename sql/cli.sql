-- document_summary --
-- How many documents exist (for the demo's closing log line).
select count(*) as n from documents

-- documents --
-- Synced documents, newest first (by row id, the order of the dashboard's Documents page),
-- optionally of one source.
select id, source_type, document_id, title, length(content) as chars, synced_at, deleted_at,
       audience_kind, audience_members, audience_accessible_by
  from documents
 where (%(source_type)s::text is null or source_type = %(source_type)s::text)
 order by id desc
 limit %(limit)s

-- document --
-- One document by id (any source).
select * from documents where document_id = %(document_id)s order by synced_at desc limit 1

-- document_by_row_id --
-- One document by its row id (the number the dashboard shows).
select * from documents where id = %(id)s

-- workspace_in_feed --
-- Whether the change feed holds a change of workspace %(workspace_id)s (a removed workspace's
-- changes stay, with its id: `documents changes --workspace` may still follow them).
select exists (select 1 from document_changes where workspace_id = %(workspace_id)s) as found
