-- 021: removing a workspace in two steps, without a deadlock (issue 29).
--
-- remove_workspace was one statement: it locked the rows its snapshot saw that refer to the
-- workspace, then deleted the workspace row. A row that came to refer to it *while* it ran (a
-- backfill requested, leased and recorded after its snapshot) was not among them: its cascade
-- reached that row after the workspace row, and the backfill page holding it waited for the
-- workspace row (its line's upkeep) — a deadlock, seen once in five runs of the mixed-load
-- benchmark. A removal now begins with a transaction of its own, workspace_removal_begins,
-- which sets status 'removing'; every statement that makes a row refer to a workspace holds,
-- until it commits, a lock that this first step waits for, and refuses a workspace being
-- removed. So remove_workspace's snapshot, taken after it, holds every row that will ever refer
-- to the workspace (docs/claim.md, "Removing a workspace").
--
-- The lock is the workspace's *reference lock*, an advisory lock (namespace 21, the id modulo
-- 2^31: two workspaces sharing a key only wait for each other), taken shared by
-- workspaces_referable and exclusive by workspace_removal_begins. Not a row lock: a FOR KEY
-- SHARE lock on a workspace row held while a statement then waits for job rows turns the row's
-- lock into a multixact, and a claim's FOR NO KEY UPDATE SKIP LOCKED on such a row can wait
-- (Postgres follows the row's update chain without SKIP LOCKED) — the mixed-load benchmark saw
-- claims deadlock with enqueues that way. The statements that schedule backfills touch many
-- workspaces at once (as many reference locks would not fit the lock table) and wait for
-- nothing a claim holds: they read the rows FOR KEY SHARE, which the first step's FOR UPDATE
-- waits for too.
--
-- 'removing' keeps the workspace out of the claim (workspace_line_at serves 'active' only),
-- out of the web's routes and off every backfill; the pruner finishes a removal that a crash
-- interrupted between its two steps.
alter table workspaces drop constraint workspaces_status_check;
alter table workspaces add constraint workspaces_status_check
    check (status in ('active', 'paused', 'revoked', 'removing'));

-- The workspaces of `ids` a statement may make rows refer to: their reference locks taken
-- shared (held to the end of the transaction, in id order), then those not being removed,
-- read with a snapshot taken after the locks (a volatile function's query takes its own), so
-- a removal that began before is seen.
create function workspaces_referable(ids bigint[]) returns setof bigint
language plpgsql volatile as $$
begin
    perform pg_advisory_xact_lock_shared(21, (i % 2147483648)::int)
       from (select distinct unnest(ids) as i) k
      order by i;
    return query select w.id from workspaces w where w.id = any(ids) and w.status <> 'removing';
end $$;

-- The first step of a removal: the reference lock taken exclusive (waiting for every statement
-- that holds it shared), the row FOR UPDATE (waiting for those that read it FOR KEY SHARE, and
-- for every insert's foreign key check in flight), then status 'removing'. Returns the id
-- (NULL: no such workspace).
create function workspace_removal_begins(ws bigint) returns bigint
language plpgsql volatile as $$
declare
    removed bigint;
begin
    perform pg_advisory_xact_lock(21, (ws % 2147483648)::int);
    perform 1 from workspaces where id = ws for update;
    update workspaces set status = 'removing', updated_at = now() where id = ws
    returning id into removed;
    return removed;
end $$;
