-- 034: finished jobs moved out of sync_jobs into finished_jobs, partitioned for retention
-- (issue 40, point 4). Pruning finished jobs was a DELETE in batches of every job finished
-- past the retention (millions of rows, their entries in every index of sync_jobs, and the
-- vacuum after), through a filter on finished_at that only a partial index served; it is now
-- a DROP of whole partitions, as the change log's (migration 028).
--
-- Why a table of its own rather than sync_jobs partitioned by status: a job's status changes
-- on every claim and completion, and a row changing partition is a delete and an insert
-- anyway; and the unique index on a page's active job (sync_jobs_active_page, the enqueue's
-- ON CONFLICT arbiter) would have to be confined to one partition. So every statement that
-- finishes a job (queue.sql settle, requeue_expired, cancel_removed) deletes its row from
-- sync_jobs and inserts it here in the same statement; a manual retry moves it back.
-- sync_jobs then holds active jobs only (pending, processing).
--
-- The key: range of finished_at (a finished job never changes, so the key never moves).
-- Unlike the change log's transaction ids, no reader depends on an exact prefix: a partition
-- is dropped once its upper bound is at or below the prune's clock minus the retention, so a
-- finished job is kept at least the retention and at most about a partition's width longer.
-- The pruner makes partitions ahead (finished_jobs_extend), each PARTITIONS_PER_RETENTION-th
-- of the retention wide (7 days: 21 h; the figure is the change log's, one knob for both), so
-- about nine partitions exist: few enough that a read by id (which cannot prune partitions)
-- looks into a handful of indexes, and fine enough that a job stays at most an eighth of the
-- retention past it. A DEFAULT partition catches rows no partition covers (a worker that
-- never prunes, a clock far ahead); the next prune moves them into range partitions of their
-- own (finished_jobs_adopt) and reports how many (`overflow`).
--
-- The columns are sync_jobs' own, in the same order, so a job reads the same from either
-- table (queue.get, list: union all) and a move is `insert … select` of the deleted row.

create table finished_jobs (
    id               bigint      not null,
    source_type      text        not null,
    source_page_id   text        not null,
    status           text        not null,
    payload          jsonb       not null default '{}'::jsonb,
    event_id         text,
    event_count      integer     not null default 1,
    priority         integer     not null default 0,
    attempts         integer     not null default 0,
    max_attempts     integer     not null default 5,
    scheduled_at     timestamptz not null,
    first_event_at   timestamptz not null,
    max_wait_until   timestamptz not null,
    retry_at         timestamptz,
    lease_expires_at timestamptz,
    locked_by        text,
    lease_token      uuid,
    revision         bigint      not null default 0,
    claimed_revision bigint,
    last_error       text,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    finished_at      timestamptz not null,
    workspace_id     bigint,
    checkpoint       jsonb,
    change_kinds     text[]      not null default '{}'::text[],
    constraint finished_jobs_status_check check (status in ('completed', 'failed')),
    constraint finished_jobs_times_finite check (
        isfinite(scheduled_at) and isfinite(first_event_at) and isfinite(max_wait_until)
        and isfinite(retry_at) and isfinite(lease_expires_at) and isfinite(created_at)
        and isfinite(updated_at) and isfinite(finished_at)),
    primary key (id, finished_at)
) partition by range (finished_at);

-- what the dashboard and the admin API read: a window of finished_at, overall, per source and
-- per workspace (activity.sql), and the newest error of a workspace or source
create index finished_jobs_finished on finished_jobs (finished_at);
create index finished_jobs_source on finished_jobs (source_type, finished_at);
create index finished_jobs_workspace on finished_jobs (workspace_id, finished_at)
    where workspace_id is not null;

create table finished_jobs_default partition of finished_jobs default;

create table finished_job_partitions (
    name text        primary key,
    lo   timestamptz not null unique,   -- from (inclusive)
    hi   timestamptz not null,          -- to (exclusive)
    check (lo < hi),
    constraint finished_job_partitions_times_finite check (isfinite(lo) and isfinite(hi))
);

-- A partition for [lo, hi): created apart, attached (a SHARE UPDATE EXCLUSIVE lock on the
-- table, which settle's inserts do not wait for, and a scan of the DEFAULT partition) and
-- listed. Only for the functions below.
create function finished_jobs_add(p_lo timestamptz, p_hi timestamptz) returns text
language plpgsql as $$
declare
    name text := 'finished_jobs_' || to_char(p_lo at time zone 'UTC', 'YYYYMMDD"t"HH24MISSUS');
begin
    execute format('create table %I (like finished_jobs including defaults including constraints)',
                   name);
    execute format('alter table finished_jobs attach partition %I for values from (%L) to (%L)',
                   name, p_lo, p_hi);
    insert into finished_job_partitions (name, lo, hi) values (name, p_lo, p_hi);
    return name;
end $$;

-- Partitions ahead: of p_width (wider when more than 32 would be needed) from the newest
-- upper bound (none yet: from p_from rounded down to a multiple of p_width since the epoch)
-- until one reaches past p_to. Returns how many it added.
create function finished_jobs_cover(p_from timestamptz, p_to timestamptz, p_width interval)
returns integer
language plpgsql as $$
declare
    width interval := greatest(p_width, interval '1 second');
    lo timestamptz;
    added integer := 0;
begin
    select max(p.hi) into lo from finished_job_partitions p;
    if lo is null then
        lo := to_timestamp(floor(extract(epoch from p_from) / extract(epoch from width))
                           * extract(epoch from width));
    end if;
    width := greatest(width, (p_to - lo) / 32);
    while lo <= p_to loop
        perform finished_jobs_add(lo, lo + width);
        lo := lo + width;
        added := added + 1;
    end loop;
    return added;
end $$;

-- The DEFAULT partition's rows move into range partitions of their own and a new, empty
-- default takes its place. The range partitions need not be contiguous (no reader depends on
-- a prefix, unlike the change log's): each new one is a cell of p_width (wider when the rows
-- span more than 64 of them) on the grid of multiples of its width since the epoch that holds
-- rows, cut to the gap between the partitions around them. Returns how many rows it held (0:
-- nothing done). Takes an ACCESS EXCLUSIVE lock on finished_jobs until the caller's
-- transaction ends.
create function finished_jobs_adopt(p_width interval) returns bigint
language plpgsql set lock_timeout = '1s' as $$
declare
    n bigint;
    low timestamptz;
    high timestamptz;
    w float8;
    g record;
begin
    if not exists (select 1 from finished_jobs_default) then
        return 0;
    end if;
    lock table finished_jobs in access exclusive mode;
    alter table finished_jobs detach partition finished_jobs_default;
    alter table finished_jobs_default rename to finished_jobs_spill;
    create table finished_jobs_default partition of finished_jobs default;
    select count(*), min(finished_at), max(finished_at) into n, low, high from finished_jobs_spill;
    w := greatest(extract(epoch from p_width)::float8, extract(epoch from high - low)::float8 / 64,
                  1.0);
    for g in
        select distinct greatest(c.a, c.gap_lo) as lo, least(c.a + make_interval(secs => w), c.gap_hi) as hi
          from (select to_timestamp(floor(extract(epoch from s.finished_at) / w) * w) as a,
                       coalesce((select max(p.hi) from finished_job_partitions p
                                  where p.hi <= s.finished_at), '-infinity') as gap_lo,
                       coalesce((select min(p.lo) from finished_job_partitions p
                                  where p.lo > s.finished_at), 'infinity') as gap_hi
                  from finished_jobs_spill s) c
         order by 1
    loop
        perform finished_jobs_add(g.lo, g.hi);
    end loop;
    insert into finished_jobs select * from finished_jobs_spill;
    drop table finished_jobs_spill;
    return n;
end $$;

-- One prune: adopt the DEFAULT partition's rows, make partitions ahead (p_span seconds wide,
-- at least a minute, until one reaches past p_now + that width), then drop the oldest
-- partitions whose upper bound is at or below p_now - p_older_than seconds, in order. Returns
-- (partitions added, rows the default held, partitions dropped, jobs they held).
--
-- A partition attached while a statement inserts a row of its range into the DEFAULT
-- partition makes that insert fail (the row is re-checked against the default's new
-- constraint: "violates partition constraint"). Partitions made ahead begin after a minute
-- from now, where no job finishes yet, and need nothing more; but when no partition covers
-- the next minute (the first prune, or after a pause) or the DEFAULT partition holds rows,
-- the prune first takes finished_jobs in ACCESS EXCLUSIVE mode (waiting for the statements
-- that finish jobs, at most 1 s, and holding them back until it commits), so nothing is
-- inserted while it adopts and attaches.
create function finished_jobs_retain(p_now timestamptz, p_older_than float8, p_span float8,
                                     out added integer, out overflow bigint,
                                     out dropped integer, out jobs bigint)
language plpgsql set lock_timeout = '1s' as $$
declare
    width interval := make_interval(secs => greatest(p_span, 60.0));
    cutoff timestamptz := p_now - make_interval(secs => p_older_than);
    p finished_job_partitions;
    n bigint;
begin
    if not exists (select 1 from finished_job_partitions c
                    where c.lo <= clock_timestamp()
                      and c.hi > clock_timestamp() + interval '1 minute')
       or exists (select 1 from finished_jobs_default) then
        lock table finished_jobs in access exclusive mode;
    end if;
    overflow := finished_jobs_adopt(width);
    added := finished_jobs_cover(p_now, p_now + width, width);
    dropped := 0;
    jobs := 0;
    for p in select * from finished_job_partitions order by lo loop
        exit when p.hi > cutoff;
        execute format('select count(*) from %I', p.name) into n;
        execute format('drop table %I', p.name);
        delete from finished_job_partitions where name = p.name;
        dropped := dropped + 1;
        jobs := jobs + n;
    end loop;
end $$;

-- The finished rows move into the DEFAULT partition and from there into partitions of one day
-- (finished_jobs_adopt: at most 64 of them, wider then); none is made ahead here (the schema
-- stays the same whatever the day: the worker's first prune, soon after it starts, makes them,
-- and adopts what finished before). Then sync_jobs keeps active jobs only.
insert into finished_jobs
select id, source_type, source_page_id, status, payload, event_id, event_count, priority, attempts,
       max_attempts, scheduled_at, first_event_at, max_wait_until, retry_at, lease_expires_at,
       locked_by, lease_token, revision, claimed_revision, last_error, created_at, updated_at,
       coalesce(finished_at, updated_at), workspace_id, checkpoint, change_kinds
  from sync_jobs
 where status in ('completed', 'failed');

select finished_jobs_adopt(interval '1 day');

delete from sync_jobs where status in ('completed', 'failed');

drop index sync_jobs_finished;
alter table sync_jobs drop constraint sync_jobs_status_check;
alter table sync_jobs add constraint sync_jobs_status_check
    check (status in ('pending', 'processing'));
