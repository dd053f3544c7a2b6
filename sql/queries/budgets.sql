-- API budgets: one token bucket per workspace (migration 008), shared by every worker process.
-- The bucket is refilled lazily from the database clock by the statement that reads it, so
-- there is no refiller and no worker clock: level(now) = least(burst, tokens + rate * elapsed),
-- rate = per_minute / 60 requests per second. A per_minute of 0 means no budget (unlimited).
-- The source's defaults (used where the workspace sets none) come from a relation d
-- (per_minute, burst) that each statement joins: %(default_per_minute)s / %(default_burst)s
-- here, one row per source in the workspace listing (sql/queries/workspaces.sql). %(now)s: a timestamptz or NULL (the
-- database's clock).

-- _bucket --
-- The bucket of workspace row w at clock.now, with the source's defaults d: rate
-- (requests/s, 0: unlimited), burst, level (requests available now): the function
-- workspace_bucket (migration 019), which the claim uses too.
cross join lateral workspace_bucket(clock.now, w.budget_tokens, w.budget_refilled_at,
                                    coalesce(w.budget_per_minute, d.per_minute),
                                    coalesce(w.budget_burst, d.burst)) b

-- take_budget --
-- Charge %(n)s requests to workspace %(id)s, one statement: granted when the bucket holds them
-- and the workspace is not blocked by a 429; otherwise nothing is taken and wait_seconds says
-- when they will be there (or when the block ends). The row lock serialises concurrent takers,
-- so every process together never takes more than burst + rate * elapsed.
-- The row is a hot spot only for a workspace whose syncs all charge it at once, so:
--   * an unmetered workspace (rate 0) is answered from an unlocked read and nothing is written:
--     its requests never wait on each other or on a claim;
--   * the row lock is held until commit, so a metered workspace's charges/s are bounded by how
--     long a commit takes: this statement's transaction commits without waiting for its WAL
--     flush (synchronous_commit off, for this transaction only). A charge lost in a database
--     crash is a request the bucket forgets (the last few hundred milliseconds' worth at most).
with clock as (
    select coalesce(%(now)s::timestamptz, clock_timestamp()) as now,
           set_config('synchronous_commit', 'off', true) as async_commit
), d as (
    select %(default_per_minute)s::float8 as per_minute, %(default_burst)s::float8 as burst
), peek as (
    select w.id, b.rate, b.burst, b.level, w.blocked_until, clock.now
      from workspaces w
     cross join clock
     cross join d
     {{_bucket}}
     where w.id = %(id)s
), cur as (
    select w.id, b.rate, b.burst, b.level, w.blocked_until, clock.now,
           (b.rate = 0 or b.level >= %(n)s) and coalesce(w.blocked_until <= clock.now, true)
               as granted
      from workspaces w
     cross join clock
     cross join d
     {{_bucket}}
     where w.id = %(id)s and (select p.rate from peek p) > 0
       for update of w
), charged as (
    update workspaces w
       set budget_tokens      = case when cur.granted then cur.level - %(n)s else cur.level end,
           budget_refilled_at = greatest(cur.now, coalesce(w.budget_refilled_at, cur.now))
      from cur
     where w.id = cur.id
    returning cur.*
)
select c.granted,
       greatest(case when c.rate = 0 or c.level >= %(n)s then 0
                     else (%(n)s - c.level) / c.rate end,
                coalesce(extract(epoch from c.blocked_until - c.now), 0))::float8 as wait_seconds,
       c.level::float8 as level, c.burst::float8 as burst, (c.rate * 60)::float8 as per_minute
  from charged c
union all
select coalesce(p.blocked_until <= p.now, true),
       greatest(coalesce(extract(epoch from p.blocked_until - p.now), 0), 0)::float8,
       p.level::float8, p.burst::float8, 0::float8
  from peek p
 where p.rate = 0

-- set_budget --
-- Set (or, with NULLs, clear back to the source's default) workspace %(id)s's budget:
-- %(per_minute)s requests per minute (0: unlimited), %(burst)s requests of capacity. The
-- bucket starts full at its new size, so a claim's hold on the empty bucket (held_until,
-- docs/claim.md) ends; a workspace at its concurrency limit stays flagged
-- (at_concurrency_limit). Returns the row, or nothing for an unknown id.
update workspaces
   set budget_per_minute  = %(per_minute)s::float8,
       budget_burst       = %(burst)s::float8,
       budget_tokens      = null,
       budget_refilled_at = null,
       held_until         = null,
       updated_at         = now()
 where id = %(id)s
returning id, source_type, budget_per_minute, budget_burst
