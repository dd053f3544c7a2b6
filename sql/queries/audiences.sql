-- Audiences (migration 012): the cache of conversation audiences a source keeps
-- (conversation_audiences, debounce/documents/audiences.py) and the visible_to filter of the read API.

-- get_audiences --
-- The cached audiences of conversations %(conversation_ids)s (text[]) of source
-- %(source_type)s in workspace %(workspace_id)s (NULL: no workspace). One index probe per id.
select conversation_id, kind, members, refreshed_at
  from conversation_audiences
 where source_type = %(source_type)s
   and coalesce(workspace_id, 0) = coalesce(%(workspace_id)s::bigint, 0)
   and conversation_id = any(%(conversation_ids)s::text[])

-- put_audience --
-- Record conversation %(conversation_id)s's audience (%(kind)s, %(members)s text[] or NULL) for
-- source %(source_type)s in workspace %(workspace_id)s, refreshed now, and set it on every
-- document of that job key whose audience differs (their updated_at moves: a consumer sees
-- the change). Fenced like documents.upsert_document by %(fence_job_id)s/%(fence_lease_token)s
-- (NULL: unfenced). Returns ok (false: the fence refused, nothing written) and changed (how
-- many documents were updated).
with {{documents._fence}}, writable as (
    select a.ok from allowed a
), cached as (
    insert into conversation_audiences as c (source_type, workspace_id, conversation_id, kind,
                                             members, refreshed_at)
    select %(source_type)s, %(workspace_id)s::bigint, %(conversation_id)s, %(kind)s,
           %(members)s::text[], now()
      from writable
     where writable.ok
    on conflict (source_type, (coalesce(workspace_id, 0)), conversation_id) do update
       set kind = excluded.kind, members = excluded.members, refreshed_at = excluded.refreshed_at
    returning 1
), locked as (
    -- in id order, as every statement that locks several documents (docs/claim.md)
    select d.id from documents d
     where d.source_type = %(source_type)s and d.source_page_id = %(conversation_id)s
       and (select ok from writable)
       and (d.audience_kind, d.audience_members)
           is distinct from (%(kind)s::text, %(members)s::text[])
     order by d.id
       for update
), changed as (
    update documents d
       set audience_kind = %(kind)s, audience_members = %(members)s::text[], updated_at = now()
     where d.id in (select id from locked)
    returning 1
)
select (select ok from allowed) as ok, (select count(*) from changed)::int as changed,
       (select count(*) from cached)::int as cached

-- _visible_to --
-- The read API's ?visible_to= filter as a WHERE fragment over `documents d`: documents of
-- source %(source_type)s (one whose Source declares audiences: Slack) in workspace
-- %(workspace_id)s that its user %(visible_to)s may read — the public channels, and the
-- conversations whose members include the user. Documents of unknown audience (synced before
-- migration 012) never match.
(d.source_type = %(source_type)s and d.workspace_id = %(workspace_id)s::bigint
 and (d.audience_kind = 'public_channel'
      or d.audience_members @> array[%(visible_to)s::text]))

-- list_visible --
-- One page of the documents of source %(source_type)s that its user %(visible_to)s may read
-- in workspace %(workspace_id)s (the _visible_to filter), in id order after %(after_id)s (0: from the start), at most
-- %(limit)s rows, updated after %(updated_after)s and of kind %(document_kind)s (NULL: any;
-- migration 029), each with its kind; deleted documents only when %(include_deleted)s. Two index-ordered branches
-- (documents_audience_public for the team's public channels, the GIN documents_audience_members
-- for the user's conversations), each stopping at %(limit)s rows: the cost follows the page
-- and the user's own conversations, not the number of workspaces or of public documents.
select v.*, document_kind(v.source_type, v.document_id, v.metadata) as kind from (
    (select d.* from documents d
      where d.source_type = %(source_type)s and d.workspace_id = %(workspace_id)s::bigint
        and d.audience_kind = 'public_channel' and d.id > %(after_id)s::bigint
        and (%(include_deleted)s::boolean or d.deleted_at is null)
        and (%(updated_after)s::timestamptz is null
             or d.updated_at > %(updated_after)s::timestamptz)
        and (%(document_kind)s::text is null
             or document_kind(d.source_type, d.document_id, d.metadata) = %(document_kind)s::text)
      order by d.id limit %(limit)s)
    union all
    (select d.* from documents d
      where d.audience_members @> array[%(visible_to)s::text]
        and d.source_type = %(source_type)s and d.workspace_id = %(workspace_id)s::bigint
        and d.audience_kind is distinct from 'public_channel' and d.id > %(after_id)s::bigint
        and (%(include_deleted)s::boolean or d.deleted_at is null)
        and (%(updated_after)s::timestamptz is null
             or d.updated_at > %(updated_after)s::timestamptz)
        and (%(document_kind)s::text is null
             or document_kind(d.source_type, d.document_id, d.metadata) = %(document_kind)s::text)
      order by d.id limit %(limit)s)
) v
order by v.id
limit %(limit)s
