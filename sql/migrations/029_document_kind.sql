-- 029: a document's kind — what sort of thing a document is (issue 39, point 1;
-- docs/consumers.md, "Kinds of document"). Not a change's kind (the feed's `op`: upsert or
-- delete), nor a job's change kinds (what an event said changed).
--
-- document_kind(source_type, document_id, metadata)  the one rule, written once; immutable,
--     so an index can hold it. From the document id where it says (`file:<id>` a file
--     document, `canvas:<id>` a Slack canvas), else from the source: a Slack thread is a
--     `conversation`; a Notion document is a `database` or a `table` (a data source: its rows
--     as one table) when its metadata's `object` says so, else a `page`; any other source's
--     document is a `page`. `metadata` NULL (a change whose document row is gone): the rule on
--     the id alone.
-- document_kinds()  the kinds there are, in the order the docs list them (the read API's
--     400 answer names them).
-- documents_kind  the listing's index: kind, then id (GET /documents?kind=… pages by id).

create function document_kind(p_source_type text, p_document_id text, p_metadata jsonb)
returns text
language sql
immutable
parallel safe
return case
    when starts_with(p_document_id, 'file:') then 'file'
    when starts_with(p_document_id, 'canvas:') then 'canvas'
    when p_source_type = 'slack' then 'conversation'
    when p_source_type = 'notion' and p_metadata ->> 'object' = 'database' then 'database'
    when p_source_type = 'notion' and p_metadata ->> 'object' = 'data_source' then 'table'
    else 'page'
end;

create function document_kinds()
returns text[]
language sql
immutable
parallel safe
return array['page', 'database', 'table', 'conversation', 'file', 'canvas'];

create index documents_kind on documents (document_kind(source_type, document_id, metadata), id);
