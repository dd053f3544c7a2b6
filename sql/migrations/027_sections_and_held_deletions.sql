-- 027: sections a consumer can re-embed one by one, and deletions held when they look like a
-- mistake (issue 40, points 2 and 3; docs/consumers.md).
--
-- documents.sections         the document's sections as the service cut them when it wrote
--                            the content (debounce.documents.sections): a JSON array of
--                            {id, path, start, end, sha256} in document order; NULL: written
--                            before this migration (filled by the next write of the document,
--                            without a change in the feed).
-- document_changes.sections  which section ids the change added, changed (same id, another
--                            hash) and removed: {"added": [...], "changed": [...],
--                            "removed": [...]}, computed by the feed's triggers in the same
--                            transaction as the write; NULL for a row deleted outright.
-- deletion_holds             deletions held because they looked like a mistake (more than
--                            both a count and a share of a workspace's live documents within a
--                            window): the documents stay live, each marked by documents.held_by,
--                            until an operator applies or dismisses the hold.
-- documents.held_by          the hold that held this document's deletion (kept after the hold
--                            is applied: those deletions are the operator's, not counted in
--                            the guard's window). A document is held while it is live and its
--                            hold's status is 'held'. Bookkeeping for the feed: holding or
--                            releasing a document appends no change.

alter table documents add column sections jsonb;
alter table documents add column held_by bigint;
alter table document_changes add column sections jsonb;

-- A sweep's deletions are computed against the documents as they were before it began
-- (Onyx deleted documents indexed during its crawl, issue 40): the transaction that created
-- each document, and the snapshot of the statement that began an enumeration. A document
-- whose creator that snapshot does not see committed (pg_visible_in_snapshot) did not exist
-- for the sweep when it began: the sweep does not re-check it (finish_backfill). NULL (rows
-- from before this migration): old. The defaults are set after the columns are added, so
-- existing rows are not rewritten.
alter table documents add column created_xid xid8;
alter table documents alter column created_xid set default pg_current_xact_id();
alter table backfills add column started_snapshot pg_snapshot;
alter table backfills alter column started_snapshot set default pg_current_snapshot();

-- No foreign key to workspaces: a hold is written inside a document write.
-- A removed workspace (a tombstone since migration 022) keeps its row:
-- its holds are left out of every listing by its status.
create table deletion_holds (
    id           bigint generated always as identity primary key,
    workspace_id bigint,
    source_type  text        not null,
    status       text        not null default 'held'
                             check (status in ('held', 'applied', 'dismissed')),
    reason       text        not null,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),
    resolved_at  timestamptz,
    -- the documents the operator's decision deleted (applied) or kept (dismissed)
    resolved     integer,
    -- no infinity reaches psycopg, which cannot load one (tests/test_liveness.py)
    constraint deletion_holds_finite
        check (isfinite(created_at) and isfinite(updated_at) and isfinite(resolved_at))
);
-- At most one open hold per workspace and source: later held deletions join it.
create unique index deletion_holds_open
    on deletion_holds (source_type, coalesce(workspace_id, 0)) where status = 'held';
create index documents_held on documents (held_by) where held_by is not null;
-- The guard's window: a workspace's recent deletions (not the ones an operator applied).
create index documents_deleted_recently on documents (workspace_id, deleted_at)
    where deleted_at is not null and held_by is null;

-- What a write did to a document's sections, by id and hash (NULL when the new row carries
-- no sections: written by something other than the service's store).
create function debounce_section_changes(old_s jsonb, new_s jsonb) returns jsonb
language sql immutable parallel safe as $$
    with o as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(old_s, '[]'::jsonb)) e
    ), n as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(new_s, '[]'::jsonb)) e
    )
    select case when new_s is null then null else jsonb_build_object(
        'added', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                             from jsonb_array_elements(new_s) with ordinality x(e, i), o
                            where not o.m ? (x.e->>'id')), '[]'::jsonb),
        'changed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(new_s) with ordinality x(e, i), o
                              where o.m->>(x.e->>'id') <> x.e->>'sha256'), '[]'::jsonb),
        'removed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(coalesce(old_s, '[]'::jsonb))
                                    with ordinality x(e, i), n
                              where not n.m ? (x.e->>'id')), '[]'::jsonb))
    end
      from o, n
$$;

-- Migration 020's triggers, with the change's sections and held_by as bookkeeping (a hold
-- is the operator's business: consumers see a held document as the live document it is).
-- Sections are compared only with the content: the same content hash with other sections
-- (a document written before this migration getting its sections) is bookkeeping too.
create or replace function document_feed_position() returns trigger language plpgsql as $$
declare
    prev documents;
begin
    if tg_op = 'UPDATE' then
        if new.content_sha256 is not distinct from old.content_sha256 then
            prev := old;
            prev.content := new.content;   -- the same hash: the same content
            prev.synced_at := new.synced_at;
            prev.source_updated_at := new.source_updated_at;
            prev.listed_at := new.listed_at;
            prev.updated_at := new.updated_at;
            prev.feed_xid := new.feed_xid;
            prev.feed_seq := new.feed_seq;
            prev.sections := new.sections;
            prev.held_by := new.held_by;
            if prev is not distinct from new then
                return new;   -- only bookkeeping moved: no change for consumers
            end if;
        end if;
        if new.updated_at is not distinct from old.updated_at then
            new.updated_at := now();   -- a change a consumer sees is a new updated_at
        end if;
        new.feed_xid := greatest(pg_current_xact_id(), old.feed_xid);
        new.feed_seq := nextval('document_changes_seq');
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256, sections)
        values (new.feed_xid, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256,
                case when new.sections is not null then
                    debounce_section_changes(case when old.deleted_at is null
                                                  then old.sections end, new.sections) end);
        return new;
    end if;
    new.feed_xid := pg_current_xact_id();
    new.feed_seq := nextval('document_changes_seq');
    return new;
end $$;

create or replace function document_feed_append() returns trigger language plpgsql as $$
declare
    position xid8;
    seq bigint;
    grave xid8;
begin
    if tg_op = 'DELETE' then
        position := greatest(pg_current_xact_id(), old.feed_xid);
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (position, nextval('document_changes_seq'),
                old.source_type, old.workspace_id, old.document_id, old.source_page_id,
                'delete', now(), old.content_sha256);
        insert into document_graves as g (source_type, document_id, feed_xid)
        values (old.source_type, old.document_id, position)
        on conflict (source_type, document_id)
        do update set feed_xid = greatest(g.feed_xid, excluded.feed_xid);
    else
        position := new.feed_xid;
        seq := new.feed_seq;
        select g.feed_xid into grave from document_graves g
         where g.source_type = new.source_type and g.document_id = new.document_id;
        if grave >= position then
            -- After the deletion of an earlier row of this document: its position, and a
            -- sequence number taken after the delete's; the nested update moves only the
            -- position (bookkeeping: it appends nothing itself).
            position := grave;
            seq := nextval('document_changes_seq');
            update documents set feed_xid = position, feed_seq = seq where id = new.id;
        end if;
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256, sections)
        values (position, seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256,
                case when new.sections is not null
                     then debounce_section_changes(null, new.sections) end);
    end if;
    return null;
end $$;

-- The one guard every deletion of a document goes through (debounce.documents.deletions).
-- Marks the live documents among p_ids deleted, or holds them: per workspace (and source),
-- the deletions within p_window seconds
-- (applied in the window, plus the documents of its open hold, plus these, plus the live
-- documents whose pages a sweep's re-check jobs are still to look at: what the sweep would
-- delete, so that a share revoked on a whole tree is held from its first page on) are
-- compared with p_max_count and p_max_share of the workspace's documents (live ones, plus
-- those deleted in the window); above BOTH the new deletions join the workspace's open hold
-- (created when there is none, its reason rewritten: p_why says what the source answered). A
-- document already held stays held. The caller locks the documents first, in id order
-- (docs/claim.md); the hold row is locked after them, and only when holding: the guard takes
-- no lock of its own, so it adds no wait to a deletion that goes through (a workspace-wide
-- lock held to the end of a transaction deadlocked transactions that write several
-- documents in id order). Concurrent deletions of one workspace are each judged without the
-- others' uncommitted ones: at most DEBOUNCE_WORKSPACE_CONCURRENCY syncs of a workspace run at
-- once, which bounds what a burst can slip past the count. Returns each document with
-- whether it was held.
create function debounce_delete_documents(p_ids bigint[], p_why text, p_max_count integer,
                                          p_max_share float8, p_window float8)
returns table (document_id text, held boolean) language plpgsql as $$
declare
    w record;
    fresh bigint[];
    recent bigint;
    pending bigint;
    live bigint;
    total bigint;
    awaiting bigint;
    hold bigint;
    span text;
begin
    span := case when p_window >= 60 and p_window::numeric % 60 = 0
                 then (p_window / 60)::bigint || ' minute' ||
                      case when p_window = 60 then '' else 's' end
                 else p_window::numeric || ' seconds' end;
    for w in
        select d.workspace_id, d.source_type, array_agg(d.id order by d.id) as ids
          from documents d
         where d.id = any(p_ids) and d.deleted_at is null
         group by d.workspace_id, d.source_type
         order by d.source_type, d.workspace_id
    loop
        hold := null;
        -- documents of their workspace's open hold stay held (a hold of a workspace since
        -- removed holds nothing: its documents were attached to another one since)
        return query
            select d.document_id, true
              from documents d join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                and h.workspace_id is not distinct from d.workspace_id
             where d.id = any(w.ids);
        select array_agg(d.id order by d.id) into fresh
          from documents d
         where d.id = any(w.ids)
           and not exists (select 1 from deletion_holds h
                            where h.id = d.held_by and h.status = 'held'
                              and h.workspace_id is not distinct from d.workspace_id);
        continue when fresh is null;
        select count(*) into recent from documents d
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is not null and d.held_by is null
           and d.deleted_at >= now() - make_interval(secs => p_window);
        select count(*) filter (where h.id is not null), count(*) into pending, live
          from documents d
          left join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                     and h.workspace_id is not distinct from d.workspace_id
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is null;
        -- re-checks of a sweep still to run (sync_jobs payload {"recheck": true}: the queue's
        -- finish_backfill), other than this deletion's own pages
        select count(*) into awaiting
          from sync_jobs j
          join documents d on d.source_type = j.source_type
                          and d.source_page_id = j.source_page_id
         where j.workspace_id = w.workspace_id and j.source_type = w.source_type
           and j.status in ('pending', 'processing') and j.payload ? 'recheck'
           and d.deleted_at is null and d.held_by is null and not d.id = any(w.ids);
        total := recent + pending + cardinality(fresh) + awaiting;
        if total > p_max_count and total > p_max_share * (live + recent) then
            select h.id into hold from deletion_holds h
             where h.source_type = w.source_type
               and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
               and h.status = 'held'
               for update;
            if hold is null then   -- a concurrent first hold of the workspace wins the insert
                insert into deletion_holds (workspace_id, source_type, reason)
                values (w.workspace_id, w.source_type, '')
                on conflict (source_type, coalesce(workspace_id, 0)) where status = 'held'
                do nothing
                returning id into hold;
            end if;
            if hold is null then
                select h.id into hold from deletion_holds h
                 where h.source_type = w.source_type
                   and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
                   and h.status = 'held'
                   for update;
            end if;
            update deletion_holds
               set reason = format('%s %s document%s %s within %s: %s %% of the workspace%s',
                                   total - awaiting, w.source_type,
                                   case when total - awaiting = 1 then '' else 's' end,
                                   p_why, span,
                                   round(100.0 * total / greatest(live + recent, 1)),
                                   case when awaiting > 0
                                        then format(' with the %s more a sweep is re-checking',
                                                    awaiting) else '' end),
                   updated_at = now()
             where id = hold;
            return query
                update documents d set held_by = hold
                 where d.id = any(fresh)
                returning d.document_id, true;
        else
            return query
                update documents d
                   set deleted_at = now(), synced_at = now(), updated_at = now(), held_by = null
                 where d.id = any(fresh)
                returning d.document_id, false;
        end if;
    end loop;
end $$;

-- A sweep compares against the documents as they were before it began: backfill_finish
-- (migration 022) re-checks only documents its started_snapshot saw created.
create or replace function backfill_finish(p_id bigint, p_owner text, p_now timestamptz,
                                p_priority integer, p_max_attempts integer)
returns setof backfills
language plpgsql as $$
declare
    v_now      timestamptz := coalesce(p_now, now());
    b          backfills;
    v_n        integer;
    v_due      timestamptz[];
    v_priority integer[];
begin
    -- 1. the backfill, while its lease is held and its workspace is not removed
    select e.* into b
      from backfills e
     where e.id = p_id and e.lease_owner = p_owner and e.status = 'running'
       and exists (select 1 from workspaces w where w.id = e.workspace_id and w.status <> 'removed')
       for update of e;
    if not found then
        return;
    end if;

    -- 2. after a whole list, a re-check (a bulk job) of every live document of the workspace
    --    that the listing did not show, no sync touched since the backfill started and that
    --    existed when it began (its started_snapshot saw the document's creation committed)
    with ins as (
        insert into sync_jobs (source_type, source_page_id, status, payload, event_count,
                               priority, max_attempts, scheduled_at, first_event_at,
                               max_wait_until, revision, created_at, updated_at, workspace_id)
        select b.source_type, v.source_page_id, 'pending', '{"recheck": true}'::jsonb, 0,
               p_priority, p_max_attempts, v_now, v_now, v_now, 1, v_now, v_now, b.workspace_id
          from (select distinct d.source_page_id
                  from documents d
                 where b.kind <> 'reconcile'
                   and d.workspace_id = b.workspace_id and d.source_type = b.source_type
                   and d.deleted_at is null
                   and (d.listed_at is null or d.listed_at < b.started_at)
                   and d.synced_at < b.started_at
                   -- as the documents were before the backfill began: none created since
                   and (d.created_xid is null or b.started_snapshot is null
                        or pg_visible_in_snapshot(d.created_xid, b.started_snapshot))) v
         order by v.source_page_id
        on conflict (source_type, source_page_id) where status in ('pending', 'processing')
        do nothing
        returning scheduled_at, priority
    )
    select count(*)::int, array_agg(scheduled_at), array_agg(priority)
      into v_n, v_due, v_priority
      from ins;

    -- 3. the workspace: its line moves to the re-checks; it remembers the reconciliation
    --    (the newest edit seen is the next one's watermark)
    if v_n > 0 then
        perform workspaces_line_move(array_fill(b.workspace_id, array[v_n]), v_due, v_priority,
                                     array_fill(false, array[v_n]));
    end if;
    update workspaces w
       set reconciled_at       = v_now,
           reconcile_watermark = greatest(w.reconcile_watermark, b.newest_seen),
           full_reconciled_at  = case when b.kind <> 'reconcile' then v_now
                                      else w.full_reconciled_at end
     where w.id = b.workspace_id;

    -- 4. the backfill done
    return query
    update backfills x
       set status = 'done', finished_at = v_now, updated_at = v_now, cursor = null,
           rechecks = x.rechecks + v_n, lease_owner = null, lease_expires_at = null
     where x.id = b.id
    returning x.*;
end
$$;
