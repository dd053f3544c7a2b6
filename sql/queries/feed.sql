-- state --
-- Where the feed stands for one read, writing nothing (a hot standby runs it too): the
-- cluster's epoch (its system identifier: a physical standby shares the primary's), whether
-- the log is this cluster's (false after a logical restore, until `reset_epoch` runs), the
-- retention frontier (a cursor below it is gone), the current snapshot's xmin and xmax
-- (changes below xmin are servable; a cursor at or past xmax names a transaction this server
-- has not seen), whether this server is a standby, and its replay lag in seconds (0 on a
-- primary, and on a standby that has replayed everything it received).
select sys.id as epoch,
       f.system_identifier = sys.id as epoch_current,
       f.pruned_xid::text as pruned_xid, f.pruned_seq,
       pg_snapshot_xmin(snap.s)::text as xmin,
       pg_snapshot_xmax(snap.s)::text as xmax,
       pg_is_in_recovery() as standby,
       case when not pg_is_in_recovery()
                 or pg_last_wal_receive_lsn() is not distinct from pg_last_wal_replay_lsn()
            then 0.0
            else coalesce(extract(epoch from now() - pg_last_xact_replay_timestamp()), 0.0)
       end::float8 as replica_lag_seconds
  from (select system_identifier::text as id from pg_control_system()) sys,
       document_feed f,
       (select pg_current_snapshot() as s) snap

-- reset_epoch --
-- After a logical restore into another cluster (the stored system identifier is not this
-- cluster's), empty the log copied from there and reset the retention frontier; nothing
-- otherwise. Run by places that may write: `debounce migrate` and the prune. Returns how many changes it removed (no row: nothing to do).
with sys as (
    select system_identifier::text as id from pg_control_system()
), reset as (
    update document_feed f
       set system_identifier = sys.id, pruned_xid = '0', pruned_seq = 0
      from sys
     where f.system_identifier <> sys.id
    returning 1
), purge as (
    -- the partitions of the other cluster's transaction ids dropped, one made for ours
    -- (migration 028)
    select document_changes_restart(now()) as n from reset
), graves as (
    delete from document_graves where exists (select 1 from reset)
    returning 1
)
select (select n from purge) as purged
  from reset

-- frontier --
-- The newest servable change's position (NULL: none): it moves exactly when a change becomes
-- servable (every change below it was servable already when it was), so a process polls it
-- while followers wait and wakes them when it moves. One backward step of the primary key.
select (select c.feed_xid::text || '.' || c.seq
          from document_changes c
         where c.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
         order by c.feed_xid desc, c.seq desc
         limit 1) as position,
       pg_is_in_recovery() as standby

-- primary_xmax --
-- The xmax of the current snapshot (a transaction id at or past it has not started here).
select pg_snapshot_xmax(pg_current_snapshot())::text as xmax

-- changes --
-- The next %(limit)s changes after position (%(after_xid)s, %(after_seq)s) and below
-- %(below)s (the xmin of a snapshot taken before: every transaction below it has ended), in
-- feed order, each with `matches`: whether it passes the filters (source %(source_type)s,
-- workspace %(workspace_id)s; NULL: any), and its document's `kind` (`document_kind`,
-- migration 029: by the id, or by the document's metadata for the few documents the index
-- documents_kind_by_metadata holds — one probe of that small index per change; the caller
-- filters on it). Unmatched rows come back so the caller can move its cursor past them. Every
-- row also carries the retention frontier seen by the same snapshot (a prune that removed
-- changes after the cursor shows there); one row of NULL changes when there is none.
select f.pruned_xid::text as pruned_xid, f.pruned_seq, c.*
  from document_feed f
  left join lateral (
    select c.feed_xid::text as feed_xid, c.seq, c.source_type, c.workspace_id, c.document_id,
           c.source_page_id, c.op, c.updated_at, c.content_sha256, c.sections,
           (%(source_type)s::text is null or c.source_type = %(source_type)s::text)
           and (%(workspace_id)s::bigint is null or c.workspace_id = %(workspace_id)s::bigint)
               as matches,
           coalesce((select document_kind(d.source_type, d.document_id, d.metadata)
                       from documents d
                      where d.source_type = c.source_type and d.document_id = c.document_id
                        and document_kind(d.source_type, d.document_id, d.metadata)
                            <> document_kind(d.source_type, d.document_id, null)),
                    document_kind(c.source_type, c.document_id, null)) as kind
      from document_changes c
     where (c.feed_xid, c.seq) > (%(after_xid)s::text::xid8, %(after_seq)s::bigint)
       and c.feed_xid >= %(after_xid)s::text::xid8   -- implied: lets partitions below be pruned
       and c.feed_xid < %(below)s::text::xid8
     order by c.feed_xid, c.seq
     limit %(limit)s
  ) c on true

-- pending --
-- Changes committed but not servable yet (an older transaction is still open): how many (at
-- most 1000 counted) and the age in seconds of the oldest (0 when none): the feed's lag.
select count(*) as pending,
       coalesce(extract(epoch from now() - min(changed_at)), 0)::float8 as lag_seconds
  from (select changed_at from document_changes
         where feed_xid >= pg_snapshot_xmin(pg_current_snapshot())
         limit 1000) p

-- prune --
-- Retention, a partition drop (migration 028): create the log's partitions ahead (each sized to
-- hold about %(span)s seconds of writes; a DEFAULT partition's overflow becomes a partition of
-- its own), then drop the oldest closed partitions whose changes were all written more than
-- %(older_than)s seconds before %(now)s (NULL: now()), moving the retention frontier to the last
-- change dropped. With %(exclusive)s, only if this transaction gets the advisory lock
-- %(lock_id)s (the prune's: one worker at a time). Returns how many changes and partitions it
-- dropped, how many it added, the rows the DEFAULT partition held, and whether it ran.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), lock as (
    select case when %(exclusive)s::bool then pg_try_advisory_xact_lock(%(lock_id)s::bigint)
                else true end as got
), retain as (
    select r.*
      from clock, document_changes_retain(clock.now, %(older_than)s::float8, %(span)s::float8) r
     where (select got from lock)
)
select coalesce((select changes from retain), 0) as changes,
       coalesce((select dropped from retain), 0) as dropped,
       coalesce((select added from retain), 0) as added,
       coalesce((select overflow from retain), 0) as overflow,
       (select got from lock) as ran

-- bury_graves --
-- Delete the graves below every running transaction: they can no longer raise a position
-- (migration 017). Its own statement and transaction, after the prune's: the prune's DDL
-- locks the log, a writer takes the log's lock before a grave's, and a transaction that held
-- graves while it waited for the log could deadlock with one. Returns how many.
with buried as (
    delete from document_graves g
     where g.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
    returning 1
)
select count(*) as graves from buried

-- workspace_in_feed --
-- Whether the change feed holds a change of workspace %(workspace_id)s (a removed workspace's
-- changes stay, with its id: `documents changes --workspace` may still follow them).
select exists (select 1 from document_changes where workspace_id = %(workspace_id)s) as found
