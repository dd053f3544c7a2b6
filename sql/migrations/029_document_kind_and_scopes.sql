-- 029: a document's kind, and the scopes a workspace's token lacks (issue 39, points 1 and 4;
-- docs/consumers.md, "Kinds of document"; docs/slack.md, "Scopes").
--
-- A document's kind is what sort of thing a document is. Not a change's kind (the feed's
-- `op`: upsert or delete), nor a job's change kinds (what an event said changed).
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
-- documents_kind_by_metadata  the few documents whose metadata decides their kind (a Notion
--     database or data source: the rule on the id alone says `page`): the change feed asks
--     it for each change's kind, and a change of any other document — nearly all — costs a
--     probe of this small index and no read of the documents table.

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

create index documents_kind_by_metadata on documents (source_type, document_id)
 where document_kind(source_type, document_id, metadata) <> document_kind(source_type, document_id, null);

-- Scopes a workspace's token lacks (issue 39, point 4): a sync that needs one (Slack
-- canvases:read, files:read) raises ScopeMissing and the worker adds it here, with when it
-- first did (missing_scopes_at); the dashboard's workspace screen and `debounce workspaces
-- list` show them. The workspace's other jobs go on. A re-install (new credentials) or a new
-- environment token clears them: the token is asked again.
alter table workspaces add column missing_scopes text[] not null default '{}';
alter table workspaces add column missing_scopes_at timestamptz
    constraint workspaces_missing_scopes_at_finite check (isfinite(missing_scopes_at));

-- A subscription may keep some kinds of document only (issue 39, point 1): document_kinds,
-- empty for every kind. Its `kinds` stay the kinds of change (the feed's op).
alter table subscriptions add column document_kinds text[] not null default '{}'
    check (document_kinds <@ document_kinds());
