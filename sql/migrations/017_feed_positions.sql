-- 017: the change feed past one primary (issue 30).
--
-- 1. Per-document order across a row deleted and inserted again. A change's position is raised
--    to the document's previous one (migration 013), but a deleted row left nothing to raise
--    against: T1 takes its transaction id, T2 inserts D, T3 deletes D's row, T1 inserts D again
--    and commits last — T1's upsert came before T3's delete in feed order although the row
--    shows T1's write. A deleted row now leaves its last position in `document_graves`, and an
--    insert is raised to it. The grave is read by the AFTER INSERT trigger: by then the insert
--    has waited for a concurrent deleter of the same key (the unique index), so the statement
--    there sees its grave. Graves below every running transaction (pg_snapshot_xmin) can no
--    longer raise anything: the prune removes them.
-- 2. Writers no longer NOTIFY. A NOTIFY inside the writing transaction takes a global lock at
--    commit, and a follower is always waiting in a real deployment: every document write paid
--    it. Followers now wait on the feed's frontier, polled by one task per web process
--    (debounce.documents.feed_listen), which works on a hot standby too (no LISTEN there).
--    `document_feed.followers_until` is gone with it.
-- 3. Every change the feed serves moves `updated_at` (a workspace removed sets its documents'
--    workspace_id to null: a change, which `GET /documents?updated_after=` must show too),
--    unless the statement set it itself.

create table document_graves (
    source_type text not null,
    document_id text not null,
    feed_xid    xid8 not null,   -- the position of the row's delete change
    primary key (source_type, document_id)
);

alter table document_feed drop column followers_until;

-- 4. The change of an UPDATE is appended by the BEFORE trigger (the row is locked there and
--    the write will happen), so an update no longer queues an AFTER trigger event with both
--    row versions; the AFTER trigger stays for INSERT (the grave) and DELETE. Content is
--    compared by its hash: comparing the text itself detoasts both versions.
create or replace function document_feed_position() returns trigger language plpgsql as $$
declare
    prev documents;
begin
    if tg_op = 'UPDATE' then
        prev := old;
        if old.content_sha256 = new.content_sha256 then
            prev.content := new.content;   -- the same hash: the same content
        end if;
        prev.synced_at := new.synced_at;
        prev.source_updated_at := new.source_updated_at;
        prev.listed_at := new.listed_at;
        prev.updated_at := new.updated_at;
        prev.feed_xid := new.feed_xid;
        prev.feed_seq := new.feed_seq;
        if prev is not distinct from new then
            return new;   -- only bookkeeping moved: no change for consumers
        end if;
        if new.updated_at is not distinct from old.updated_at then
            new.updated_at := now();   -- a change a consumer sees is a new updated_at
        end if;
        new.feed_xid := greatest(pg_current_xact_id(), old.feed_xid);
        new.feed_seq := nextval('document_changes_seq');
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (new.feed_xid, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256);
        return new;
    end if;
    new.feed_xid := pg_current_xact_id();
    new.feed_seq := nextval('document_changes_seq');
    return new;
end $$;

create or replace function document_feed_append() returns trigger language plpgsql as $$
declare
    position xid8;
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
        select g.feed_xid into grave from document_graves g
         where g.source_type = new.source_type and g.document_id = new.document_id;
        if grave > position then
            -- Raised past the deletion of an earlier row of this document; the nested update
            -- moves only the position (bookkeeping: it appends nothing itself).
            position := grave;
            update documents set feed_xid = position where id = new.id;
        end if;
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (position, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256);
    end if;
    return null;
end $$;

drop trigger documents_feed_append on documents;
create trigger documents_feed_append after insert or delete on documents
    for each row execute function document_feed_append();
