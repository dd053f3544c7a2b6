-- 028: the change log partitioned for retention (issue 40, point 4). Pruning the feed was a
-- DELETE of every change past retention (millions of rows, their index entries and the
-- vacuum after); it is now a DROP of whole partitions.
--
-- The key: range partitions on feed_xid, the first column of the feed's order (feed_xid, seq).
-- A time column would not do: changed_at is the writing transaction's start, which is not in
-- feed order (a transaction that started earlier can take a later transaction id, and a
-- position is raised to the document's previous one), so dropping a time range could remove
-- a change while keeping one before it, and the retention frontier (a cursor below it answers
-- 410) would no longer be exact. Ranges of feed_xid are prefixes of the feed order, so
-- dropping the oldest partitions removes exactly the changes up to the last one they held,
-- and the frontier moves to that change. A partition is dropped only when
--   1. it is closed: its upper bound is at or below pg_snapshot_xmin (every transaction that
--      could still write a position in its range has ended — a position is never below its
--      writer's own transaction id), and
--   2. every change in it was written more than the retention before the prune's clock, and
--   3. every partition below it was dropped (the prefix).
-- So the feed keeps a change at least the retention (a partition spans about an eighth of
-- it: a change may stay that much longer) and never drops one a reader could still see after.
--
-- Partitions are created ahead by the pruner (document_changes_extend, every prune): the
-- newest one's upper bound stays at least one partition's width above the newest transaction
-- id, a width sized from the rate transaction ids were used since the last partition was
-- made (times the span a partition should cover, at least 1000 ids). A DEFAULT partition is
-- the safety net for a burst that outruns that headroom between two prunes (or a worker that
-- never prunes); the next prune turns what it holds into a range partition of its own and
-- makes a new, empty default (document_changes_adopt), so it holds nothing between prunes of
-- a normal run — the prune reports its rows (`overflow`).
--
-- The table keeps its name, columns, constraints and primary key (the feed's triggers insert
-- into it unchanged, and the feed's reads scan the primary key's index of each partition in
-- order: an ordered Append, with partitions outside the cursor's range pruned).
-- `document_change_partitions` lists the range partitions (bounds, when and at which
-- transaction id each was made: the rate's origin).

alter table document_changes rename to document_changes_027;
alter table document_changes_027 rename constraint document_changes_pkey to document_changes_027_pkey;
alter table document_changes_027 rename constraint document_changes_op_check to document_changes_027_op_check;
alter table document_changes_027
    rename constraint document_changes_times_finite to document_changes_027_times_finite;

create table document_changes (
    feed_xid       xid8        not null,
    seq            bigint      not null,
    source_type    text        not null,
    workspace_id   bigint,
    document_id    text        not null,
    source_page_id text        not null,
    op             text        not null,
    updated_at     timestamptz not null,
    content_sha256 text        not null,
    changed_at     timestamptz not null default now(),
    sections       jsonb,
    constraint document_changes_op_check check (op in ('upsert', 'delete')),
    constraint document_changes_times_finite check (isfinite(changed_at) and isfinite(updated_at)),
    primary key (feed_xid, seq)
) partition by range (feed_xid);

create table document_changes_default partition of document_changes default;

create table document_change_partitions (
    name        text        primary key,
    lo          xid8        not null unique,   -- from (inclusive)
    hi          xid8        not null,          -- to (exclusive)
    created_at  timestamptz not null,
    created_xid xid8        not null,          -- pg_snapshot_xmax when it was made
    -- read once by the first prune that finds it closed (NULL: not yet): its newest
    -- changed_at (NULL: empty) and how many changes it holds
    closed_newest  timestamptz,
    closed_changes bigint,
    check (lo < hi),
    constraint document_change_partitions_times_finite check (
        isfinite(created_at) and isfinite(closed_newest))
);

-- A partition for [lo, hi): created, attached and listed. Only for the two functions below.
-- Created apart and then attached: ATTACH PARTITION takes a SHARE UPDATE EXCLUSIVE lock on the
-- log, which neither writers nor readers wait for (CREATE TABLE … PARTITION OF would take an
-- ACCESS EXCLUSIVE one), and an ACCESS EXCLUSIVE lock only on the (empty) DEFAULT partition,
-- which it scans.
create function document_changes_add(p_lo xid8, p_hi xid8, p_now timestamptz) returns text
language plpgsql as $$
declare
    name text := 'document_changes_' || p_lo::text;
begin
    execute format('create table %I (like document_changes including defaults including constraints)',
                   name);
    execute format('alter table document_changes attach partition %I for values from (%L) to (%L)',
                   name, p_lo::text, p_hi::text);
    insert into document_change_partitions (name, lo, hi, created_at, created_xid)
    values (name, p_lo, p_hi, p_now, pg_snapshot_xmax(pg_current_snapshot()));
    return name;
end $$;

-- The DEFAULT partition's rows (a burst past the partitions made ahead) become a range
-- partition of their own, [newest upper bound, their highest feed_xid + 1), and a new, empty
-- default takes its place. Returns how many rows it held (0: nothing done). Takes an ACCESS
-- EXCLUSIVE lock on the log (the detach) until the caller's transaction ends.
create function document_changes_adopt(p_now timestamptz) returns bigint
language plpgsql set lock_timeout = '1s' as $$
declare
    n bigint;
    top xid8;
    lo xid8;
    name text;
begin
    select count(*), max(feed_xid) into n, top from document_changes_default;
    if n = 0 then
        return 0;
    end if;
    lock table document_changes in access exclusive mode;
    select count(*), max(feed_xid) into n, top from document_changes_default;  -- now settled
    select coalesce(max(hi), '1') into lo from document_change_partitions;
    name := 'document_changes_' || lo::text;
    alter table document_changes detach partition document_changes_default;
    execute format('alter table document_changes_default rename to %I', name);
    execute format('alter index document_changes_default_pkey rename to %I', name || '_pkey');
    execute format('alter table document_changes attach partition %I for values from (%L) to (%L)',
                   name, lo::text, ((top::text::numeric + 1)::text));
    insert into document_change_partitions (name, lo, hi, created_at, created_xid)
    values (name, lo, (top::text::numeric + 1)::text::xid8, p_now,
            pg_snapshot_xmax(pg_current_snapshot()));
    create table document_changes_default partition of document_changes default;
    return n;
end $$;

-- Partitions ahead: adopt the default's rows, then add partitions of a width sized to hold
-- p_span seconds of transaction ids at the rate seen since the newest partition was made (at
-- least 1000 ids; wider when more than 32 would be needed) until the newest upper bound is at
-- least that width above the newest transaction id. Returns (partitions added, rows the
-- default held).
create function document_changes_extend(p_now timestamptz, p_span float8,
                                        out added integer, out overflow bigint)
language plpgsql set lock_timeout = '1s' as $$
declare
    newest document_change_partitions;
    xmax numeric := pg_snapshot_xmax(pg_current_snapshot())::text::numeric;
    rate float8;
    width numeric;
    lo numeric;
begin
    added := 0;
    overflow := document_changes_adopt(p_now);
    select * into newest from document_change_partitions order by lo desc limit 1;
    rate := greatest(xmax - newest.created_xid::text::numeric, 0)
            / greatest(extract(epoch from p_now - newest.created_at)::float8, 1.0);
    lo := newest.hi::text::numeric;
    -- at least 1000 ids; after a long pause (no prune for many spans), at most about 32 new
    -- partitions: wider ones then
    width := greatest(ceil(rate * greatest(p_span, 0)), 1000, ceil((xmax - lo) / 32));
    while lo < xmax + width loop
        perform document_changes_add(lo::text::xid8, (lo + width)::text::xid8, p_now);
        lo := lo + width;
        added := added + 1;
    end loop;
end $$;

-- Retention: drop the oldest partitions that are closed and hold only changes written before
-- p_cutoff, in order, stopping at the first that is not; the frontier moves to the last
-- change dropped (one step of the primary key's index). A partition's newest change and count
-- are read once, by the first prune that finds it closed: later prunes, and the drop itself,
-- read none of its rows. Returns (partitions dropped, changes they held).
create function document_changes_drop(p_cutoff timestamptz, out dropped integer, out changes bigint)
language plpgsql set lock_timeout = '1s' as $$
declare
    p document_change_partitions;
    xmin xid8 := pg_snapshot_xmin(pg_current_snapshot());
    newest timestamptz;
    n bigint;
    last_xid xid8;
    last_seq bigint;
begin
    dropped := 0;
    changes := 0;
    for p in select * from document_change_partitions order by lo loop
        exit when p.hi > xmin;   -- open: a running transaction may still write in its range
        if p.closed_changes is null then
            -- closed since the last prune: what it holds, read once (no write reaches it now)
            execute format('select max(changed_at), count(*) from %I', p.name) into newest, n;
            update document_change_partitions
               set closed_newest = newest, closed_changes = n
             where name = p.name;
        else
            newest := p.closed_newest;
            n := p.closed_changes;
        end if;
        exit when newest >= p_cutoff;
        execute format('select feed_xid, seq from %I order by feed_xid desc, seq desc limit 1', p.name)
           into last_xid, last_seq;
        execute format('drop table %I', p.name);
        delete from document_change_partitions where name = p.name;
        if n > 0 then
            update document_feed f set pruned_xid = last_xid, pruned_seq = last_seq
             where (last_xid, last_seq) > (f.pruned_xid, f.pruned_seq);
        end if;
        dropped := dropped + 1;
        changes := changes + n;
    end loop;
end $$;

-- After a logical restore into another cluster (feed.sql's reset_epoch): the restored
-- partitions' ranges are the other cluster's transaction ids, which may lie above this one's
-- (writes would then fall below every range, where nothing could adopt them). Every range
-- partition is dropped and the DEFAULT one emptied, and one partition is made from '1' to
-- 1000 ids past this cluster's newest, as the migration does. Returns the changes removed.
create function document_changes_restart(p_now timestamptz) returns bigint
language plpgsql set lock_timeout = '1s' as $$
declare
    p document_change_partitions;
    n bigint;
begin
    lock table document_changes in access exclusive mode;
    select count(*) into n from document_changes;
    for p in select * from document_change_partitions order by lo loop
        execute format('drop table %I', p.name);
    end loop;
    delete from document_change_partitions;
    truncate document_changes_default;
    perform document_changes_add('1', (pg_snapshot_xmax(pg_current_snapshot())::text::numeric + 1000)::text::xid8,
                                 p_now);
    return n;
end $$;

-- One prune of the log: partitions ahead (document_changes_extend), then retention
-- (document_changes_drop), in that order.
create function document_changes_retain(p_now timestamptz, p_older_than float8, p_span float8,
                                        out added integer, out overflow bigint,
                                        out dropped integer, out changes bigint)
language plpgsql as $$
begin
    select e.added, e.overflow into added, overflow from document_changes_extend(p_now, p_span) e;
    select d.dropped, d.changes into dropped, changes
      from document_changes_drop(p_now - make_interval(secs => p_older_than)) d;
end $$;

-- The first range partition holds every change written so far (an upgrade keeps them) and
-- the next 1000 transaction ids; the first prune sizes the ones after it.
select document_changes_add('1', (pg_snapshot_xmax(pg_current_snapshot())::text::numeric + 1000)::text::xid8,
                            now());

insert into document_changes (feed_xid, seq, source_type, workspace_id, document_id, source_page_id,
                              op, updated_at, content_sha256, changed_at, sections)
select feed_xid, seq, source_type, workspace_id, document_id, source_page_id,
       op, updated_at, content_sha256, changed_at, sections
  from document_changes_027;

drop table document_changes_027;
