-- 013: the change feed (docs/consumers.md). Every write to `documents` that a consumer can see
-- (an insert, a change of content, title, url, metadata, page, workspace, deletion mark or any
-- column added later, a row deleted) appends one row to `document_changes` in the same
-- transaction, written by the triggers below; writes only of bookkeeping columns (synced_at,
-- source_updated_at, listed_at, updated_at) append nothing.
--
-- Order and gap-freedom: a change's position is (feed_xid, seq). feed_xid is the writing
-- transaction's pg_current_xact_id(), raised to the document's previous feed_xid when that is
-- higher (a transaction that took its id earlier but wrote the document after a younger one
-- committed), so the last change of each document is the one its row shows; seq comes from
-- a sequence taken while the row is locked. A reader serves only positions whose feed_xid is
-- below pg_snapshot_xmin(pg_current_snapshot()): every transaction that could still append a
-- change below that bound has ended, so a reader that passed a position never misses a row
-- committed later.

alter table documents add column feed_xid xid8;    -- position of the row's last change
alter table documents add column feed_seq bigint;

create sequence document_changes_seq;

create table document_changes (
    feed_xid       xid8        not null,
    seq            bigint      not null,
    source_type    text        not null,
    workspace_id   bigint,
    document_id    text        not null,   -- documents.document_id (Slack: "channel/thread_ts")
    source_page_id text        not null,
    op             text        not null check (op in ('upsert', 'delete')),
    updated_at     timestamptz not null,
    content_sha256 text        not null,
    changed_at     timestamptz not null default now(),   -- retention and lag
    primary key (feed_xid, seq)
);

-- The feed's one row: the database's identity (a cursor of another cluster answers 410; a
-- logical restore into another cluster empties the log on first read), how far retention
-- pruned (a cursor below it answers 410), and until when a follower waits for notifications
-- (a web process long-polling or `documents changes --follow` keeps it a minute ahead).
create table document_feed (
    one               boolean     primary key default true check (one),
    system_identifier text        not null,
    pruned_xid        xid8        not null default '0',
    pruned_seq        bigint      not null default 0,
    followers_until   timestamptz not null default '-infinity'
);
insert into document_feed (system_identifier)
select system_identifier::text from pg_control_system();

-- Before a write: give a row that changes for a consumer its new position.
create function document_feed_position() returns trigger language plpgsql as $$
declare
    prev documents;
begin
    if tg_op = 'UPDATE' then
        prev := old;
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
    new.feed_xid := greatest(pg_current_xact_id(), case when tg_op = 'UPDATE' then old.feed_xid end);
    new.feed_seq := nextval('document_changes_seq');
    return new;
end $$;

-- After a write: append the change (a row that got a new position, or a row deleted) and,
-- while a follower waits, queue one NOTIFY for the transaction (Postgres folds identical
-- notifications of one transaction into one). NOTIFY serialises the commits that carry one on
-- a global lock (docs/benchmarks-history.md, section 9): with no follower, writes skip it.
create function document_feed_append() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' then
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (greatest(pg_current_xact_id(), old.feed_xid), nextval('document_changes_seq'),
                old.source_type, old.workspace_id, old.document_id, old.source_page_id,
                'delete', now(), old.content_sha256);
    elsif tg_op = 'INSERT' or new.feed_seq is distinct from old.feed_seq then
        insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id,
                                      source_page_id, op, updated_at, content_sha256)
        values (new.feed_xid, new.feed_seq, new.source_type, new.workspace_id, new.document_id,
                new.source_page_id,
                case when new.deleted_at is null then 'upsert' else 'delete' end,
                new.updated_at, new.content_sha256);
    else
        return null;
    end if;
    if (select followers_until from document_feed) > now() then
        perform pg_notify('debounce_documents', '');
    end if;
    return null;
end $$;

create trigger documents_feed_position before insert or update on documents
    for each row execute function document_feed_position();
create trigger documents_feed_append after insert or update or delete on documents
    for each row execute function document_feed_append();
