-- state --
-- Where the feed stands for one read: the database's epoch (its system identifier), the
-- retention frontier (a cursor below it is gone), and the current snapshot's xmin and xmax
-- (changes below xmin are servable; a cursor at or past xmax names a transaction that never
-- ran here). When the stored identifier is another cluster's (a logical restore), the log
-- copied from there is emptied and the frontier reset, once: the first read after a restore.
with sys as (
    select system_identifier::text as id from pg_control_system()
), reset as (
    update document_feed f
       set system_identifier = sys.id, pruned_xid = '0', pruned_seq = 0
      from sys
     where f.system_identifier <> sys.id
    returning 1
), purge as (
    delete from document_changes where exists (select 1 from reset)
    returning 1
), snap as (
    select pg_current_snapshot() as s
)
select sys.id as epoch,
       case when exists (select 1 from reset) then '0' else f.pruned_xid::text end as pruned_xid,
       case when exists (select 1 from reset) then 0 else f.pruned_seq end as pruned_seq,
       pg_snapshot_xmin(snap.s)::text as xmin,
       pg_snapshot_xmax(snap.s)::text as xmax,
       (select count(*) from purge) as purged
  from sys, document_feed f, snap

-- changes --
-- The next %(limit)s changes after position (%(after_xid)s, %(after_seq)s) and below
-- %(below)s (the xmin of a snapshot taken before: every transaction below it has ended), in
-- feed order, each with `matches`: whether it passes the filters (source %(source_type)s,
-- workspace %(workspace_id)s; NULL: any). Unmatched rows come back so the caller can move its
-- cursor past them. Every row also carries the retention frontier seen by the same snapshot
-- (a prune that removed changes after the cursor shows there); one row of NULL changes when
-- there is none.
select f.pruned_xid::text as pruned_xid, f.pruned_seq, c.*
  from document_feed f
  left join lateral (
    select c.feed_xid::text as feed_xid, c.seq, c.source_type, c.workspace_id, c.document_id,
           c.source_page_id, c.op, c.updated_at, c.content_sha256,
           (%(source_type)s::text is null or c.source_type = %(source_type)s::text)
           and (%(workspace_id)s::bigint is null or c.workspace_id = %(workspace_id)s::bigint)
               as matches
      from document_changes c
     where (c.feed_xid, c.seq) > (%(after_xid)s::text::xid8, %(after_seq)s::bigint)
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
-- Delete the oldest changes (a prefix of the feed order, at most %(limit)s) written more than
-- %(older_than)s seconds before %(now)s (NULL: now()) and servable, and move the retention
-- frontier to the last one deleted. With %(exclusive)s, only if this transaction gets the
-- advisory lock %(lock_id)s (the prune's: one worker at a time). Returns how many, and
-- whether it ran.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), lock as (
    select case when %(exclusive)s::bool then pg_try_advisory_xact_lock(%(lock_id)s::bigint)
                else true end as got
), oldest as (
    select c.feed_xid, c.seq,
           bool_and(c.changed_at < clock.now - make_interval(secs => %(older_than)s::float8))
               over (order by c.feed_xid, c.seq) as expired
      from (select feed_xid, seq, changed_at from document_changes
             where feed_xid < pg_snapshot_xmin(pg_current_snapshot())
             order by feed_xid, seq
             limit %(limit)s) c, clock
     where (select got from lock)
), doomed as (
    delete from document_changes d using oldest o
     where o.expired and d.feed_xid = o.feed_xid and d.seq = o.seq
    returning d.feed_xid, d.seq
), frontier as (
    update document_feed f
       set pruned_xid = m.feed_xid, pruned_seq = m.seq
      from (select feed_xid, seq from doomed order by feed_xid desc, seq desc limit 1) m
     where (m.feed_xid, m.seq) > (f.pruned_xid, f.pruned_seq)
    returning 1
)
select (select count(*) from doomed) as changes, (select got from lock) as ran,
       (select count(*) from frontier) as moved

-- follow --
-- A follower waits: ask the writers to NOTIFY for the next %(seconds)s seconds (never shortens
-- what another follower asked for).
update document_feed
   set followers_until = greatest(followers_until, now() + make_interval(secs => %(seconds)s::float8))
