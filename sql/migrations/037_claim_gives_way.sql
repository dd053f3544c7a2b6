-- 037: the claim gives way instead of waiting, and the line's repair never waits.
--
-- The claim takes workspace rows with FOR NO KEY UPDATE SKIP LOCKED and was meant never to
-- wait (docs/claim.md, "No deadlocks, by construction"). PostgreSQL honours SKIP LOCKED for
-- the row version it finds, but when that version's updater commits at that very moment, it
-- goes on to lock the newer versions of the row and waits for their lockers whatever the
-- wait policy (heap_lock_updated_tuple: "while locking updated version … of tuple"). If such a
-- locker — a statement moving the line (workspaces_line_move, from enqueue and settle) or the
-- line's repair, both locking workspace rows in id order and waiting — is itself waiting for a
-- row the claim holds, the two deadlock; `python -m bench --only deadlocks` saw one in a 20 s
-- run (2026-11-29 07:19, the claim against workspaces_line_repair). Two changes close it:
--
-- 1. claim_jobs runs with lock_timeout 100 ms: a claim caught in that wait gives way (SQLSTATE
--    55P03, its transaction rolled back, nothing claimed) long before the deadlock detector
--    (deadlock_timeout, 1 s) would cancel either statement, so the enqueue or settle it
--    blocked goes on, and the worker claims again at once (debounce/worker/loop.py).
-- 2. workspaces_line_repair locks with SKIP LOCKED and repairs the rows it got: a row that a
--    claim or a line move holds is repaired by the next pass (the repair is the line's safety
--    net, run after each prune), so the repair never waits for anything.

alter function claim_jobs(timestamptz, text, float8, int, text[], int[], text[], float8[],
                          float8[], float8[], int)
    set lock_timeout = '100ms';

create or replace function workspaces_line_repair(ids bigint[], workspace_concurrency int)
returns int
language plpgsql as $$
declare
    locked bigint[];
    changed integer;
begin
    locked := array(select id from workspaces where id = any(ids) order by id
                       for no key update skip locked);
    update workspaces w
       set live_due_at = v.live_due_at, bulk_due_at = v.bulk_due_at,
           at_concurrency_limit = v.at_concurrency_limit
      from (select r.id, l.live_due_at, l.bulk_due_at,
                   r.at_concurrency_limit
                   and (select count(*) from sync_jobs p
                         where p.workspace_id = r.id and p.status = 'processing')
                       >= workspace_concurrency as at_concurrency_limit
              from workspaces r cross join lateral workspace_lanes(r.id, '{}') l
             where r.id = any(locked)) v
     where w.id = v.id
       and (w.live_due_at, w.bulk_due_at, w.at_concurrency_limit)
           is distinct from (v.live_due_at, v.bulk_due_at, v.at_concurrency_limit);
    get diagnostics changed = row_count;
    return changed;
end
$$;
