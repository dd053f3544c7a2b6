-- 020: the change feed's per-document order across a row deleted and inserted again, fixed
-- (issue 30).
--
-- Migration 017 raised an insert's position to the grave of the document's deleted row, but
-- kept the sequence number its BEFORE trigger took. That number can be *smaller* than the
-- delete's: T3's DELETE removes D's row and takes its sequence number only in its AFTER
-- trigger, at the end of its statement; T1 (older) inserts D in between — its BEFORE trigger
-- takes a number, then the insert waits for T3 on the unique key — and is raised to T3's
-- transaction id with the smaller number: its upsert sorted before T3's delete, and the last
-- change served for D was the delete while the row held T1's content (found by the standby
-- switching test under load; tests/test_feed_contract.py reproduces it with an advisory lock).
-- An insert raised to a grave (or placed at its own transaction's grave) now takes a new
-- sequence number: the grave's transaction has committed (or is this one), so its delete's
-- number was taken before, and the new one is larger.
--
-- The change log's own cost (docs/benchmarks.md, "feed"): the BEFORE UPDATE trigger copied the
-- old row, patched its bookkeeping columns and compared it with the new one on every update —
-- about a third of the trigger's time (EXPLAIN ANALYZE: 34–43 µs a row, 13 of them the copy
-- and compare), and the comparison reached `content` (before `content_sha256` in the row) and
-- decompressed the old content whenever the two had the same length. A new content hash is a
-- change a consumer sees (the hash is served): the copy and compare now run only when the hash
-- is unchanged, which a content write — most writes that reach the trigger — skips.
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
                                      source_page_id, op, updated_at, content_sha256)
        values (position, seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256);
    end if;
    return null;
end $$;

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
