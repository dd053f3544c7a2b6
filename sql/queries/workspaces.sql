-- _public_columns --
-- What a statement that changes a workspace answers: the row as an operator sees it (the
-- API, the CLI), not the encrypted credentials nor the claim's bookkeeping (its lines' due
-- times, holds and budget level: sql/queries/claim.sql, sql/queries/budgets.sql).
id, source_type, external_id, enterprise_id, name, status, origin, token_fingerprint,
bot_user_id, connected_at, updated_at, last_auth_error, last_auth_error_at, credentials_error,
credentials_error_at, blocked_until, rate_limit_reason, budget_per_minute, budget_burst,
reconcile

-- ensure_env_workspace --
-- The workspace the environment's token defines (NOTION_TOKEN, SLACK_BOT_TOKEN): created on
-- first start, its fingerprint kept current. Its external id is learned on first use. A new
-- token (another fingerprint) reactivates a revoked workspace: the operator replaced it.
insert into workspaces as w (source_type, origin, token_fingerprint, name)
values (%(source_type)s, 'env', %(fingerprint)s, %(name)s)
on conflict (source_type) where origin = 'env' do update
   set status = case when w.token_fingerprint is distinct from excluded.token_fingerprint
                          and w.status = 'revoked' then 'active' else w.status end,
       token_fingerprint = excluded.token_fingerprint, updated_at = now()
returning {{_public_columns}}

-- save_workspace --
-- Connect (or re-connect) a workspace with its encrypted credentials: an install reactivates a
-- revoked or paused workspace and clears its last auth error and its credentials error (new
-- credentials: the workers try them again).
insert into workspaces as w (source_type, external_id, enterprise_id, name, origin, credentials,
                             token_fingerprint, bot_user_id)
values (%(source_type)s, %(external_id)s, %(enterprise_id)s, %(name)s, %(origin)s,
        %(credentials)s, %(fingerprint)s, %(bot_user_id)s)
on conflict (source_type, external_id) where external_id is not null do update
   set credentials = excluded.credentials, token_fingerprint = excluded.token_fingerprint,
       name = excluded.name, enterprise_id = excluded.enterprise_id,
       bot_user_id = excluded.bot_user_id, status = 'active', last_auth_error = null,
       last_auth_error_at = null, credentials_error = null, credentials_error_at = null,
       updated_at = now()
 where w.status <> 'removing'     -- no row: finish that removal first (workspaces.store.save)
returning {{_public_columns}}, (xmax = 0) as inserted

-- learn_external_id --
-- Record the source's id (and name) of the environment's workspace, learned on first use.
update workspaces
   set external_id = %(external_id)s, name = coalesce(nullif(%(name)s, ''), name),
       bot_user_id = coalesce(%(bot_user_id)s, bot_user_id), updated_at = now()
 where id = %(id)s and external_id is null
returning {{_public_columns}}

-- routes --
-- What the web process needs to route an event to its workspace (one being removed is not
-- routed: its events are dropped as an unknown workspace's).
select id, source_type, external_id, enterprise_id, status, origin from workspaces
 where status <> 'removing'

-- workspace_credentials --
-- A workspace's stored credentials (NULL for the environment's) and state, for a sync: the
-- columns the claim returns of a job's workspace (sql/queries/claim.sql, claim), named as it names them.
select id as workspace_id, status as ws_status, origin as ws_origin,
       external_id as ws_external_id, bot_user_id as ws_bot_user_id,
       credentials as ws_credentials
  from workspaces where id = %(id)s

-- set_status --
-- Pause, resume or revoke a workspace; %(error)s (revoked: why) becomes its last auth error.
update workspaces
   set status = %(status)s,
       last_auth_error = coalesce(%(error)s, last_auth_error),
       last_auth_error_at = case when %(error)s::text is not null then now()
                                 else last_auth_error_at end,
       updated_at = now()
 where id = %(id)s and status <> 'removing'
returning {{_public_columns}}

-- revoke_by_external_id --
-- A source said a workspace's token is gone (Slack app_uninstalled / tokens_revoked).
update workspaces
   set status = 'revoked', last_auth_error = %(error)s, last_auth_error_at = now(),
       updated_at = now()
 where source_type = %(source_type)s and external_id = %(external_id)s
   and status <> 'removing'
returning {{_public_columns}}

-- _referable --
-- The guard of every statement that makes a row refer to a workspace (a job, a backfill page,
-- a re-check, a cost row, a document re-attached): the workspaces of its CTE `referred`
-- (ws bigint) it may refer to — never one being removed — with their reference locks held
-- until it commits (workspaces_referable, migration 021; docs/claim.md, "Removing a
-- workspace"). The statement reads it before it locks anything else (as an InitPlan:
-- `(select count(*) from referable) >= 0`). The caller closes the parenthesis.
referable as materialized (
    select r.id
      from (select array(select ws from referred) as ids) a
     cross join lateral workspaces_referable(a.ids) as r(id)
     where cardinality(a.ids) > 0         -- a batch naming no workspace calls nothing

-- begin_removal --
-- The first step of removing workspace %(id)s, a transaction of its own: status 'removing',
-- once no statement is making a row refer to it; none will after it (workspace_removal_begins,
-- migration 021). The claim, the web's routes and the backfills leave it alone from then on.
-- Idempotent. id NULL: no such workspace.
select workspace_removal_begins(%(id)s) as id

-- remove_workspace --
-- The second step of removing workspace %(id)s, after begin_removal committed (its snapshot
-- then holds every row that will ever refer to the workspace): its pending jobs go (nothing
-- will sync them), its documents stay (their workspace becomes NULL), running syncs finish
-- (their jobs' workspace becomes NULL), its backfills, audiences and cost rows go.
-- Every row the removal changes is locked before the workspace row, in the order the other
-- statements lock them (docs/claim.md, "Keeping the line"): its backfills, its active jobs
-- (in (source_type, source_page_id) order), its documents, its audiences, then the row; each
-- step reads the one before, so they run in that order. A workspace not being removed (no
-- begin_removal, or connected again since) is left alone: id is then NULL.
with target as (
    select id from workspaces where id = %(id)s and status = 'removing'
), enums as (
    select id from enumerations where workspace_id = (select id from target) order by id
       for update
), held as (
    select id from sync_jobs
     where workspace_id = (select id from target) and status in ('pending', 'processing')
       and (select count(*) from enums) >= 0
     order by source_type, source_page_id
       for update
), docs as (
    select id from documents
     where workspace_id = (select id from target) and (select count(*) from held) >= 0
     order by id
       for update
), audiences as (
    select conversation_id from conversation_audiences
     where workspace_id = (select id from target) and (select count(*) from docs) >= 0
     order by conversation_id
       for update
), dropped as (
    delete from sync_jobs
     where workspace_id = (select id from target) and status = 'pending'
       and (select count(*) from audiences) >= 0
    returning 1
), gone as (
    delete from workspaces
     where id = (select id from target) and status = 'removing'
       and (select count(*) from dropped) >= 0
    returning id
)
select (select id from gone) as id, (select count(*) from dropped) as dropped_jobs

-- removals --
-- The workspaces whose removal began %(older_than)s seconds ago or more and did not finish (a
-- crash between its two steps): the pruner finishes them.
select id from workspaces
 where status = 'removing' and updated_at <= now() - make_interval(secs => %(older_than)s::float8)
 order by id

-- list_workspaces --
-- Every workspace with its figures: jobs by state, documents, last sync, last error, and its
-- API budget now (the bucket as sql/queries/budgets.sql computes it; the sources' defaults given as
-- %(budget_sources)s text[] / %(budget_per_minutes)s float8[] / %(budget_bursts)s float8[]) at
-- %(now)s (NULL: the database clock).
with clock as (
    select coalesce(%(now)s::timestamptz, clock_timestamp()) as now
), defaults as (
    select * from unnest(%(budget_sources)s::text[], %(budget_per_minutes)s::float8[],
                         %(budget_bursts)s::float8[]) as d(source_type, per_minute, burst)
)
select (b.rate * 60)::float8 as budget_per_minute, b.burst::float8 as budget_burst,
       b.level::float8 as budget_available, w.budget_per_minute is not null as budget_overridden,
       w.id, w.source_type, w.external_id, w.enterprise_id, w.name, w.status, w.origin,
       w.token_fingerprint, w.bot_user_id, w.connected_at, w.updated_at, w.last_auth_error,
       w.last_auth_error_at, w.credentials_error, w.credentials_error_at, w.blocked_until,
       w.rate_limit_reason,
       (select count(*) from sync_jobs j where j.workspace_id = w.id and j.status = 'pending')
           as pending_jobs,
       (select count(*) from sync_jobs j where j.workspace_id = w.id and j.status = 'processing')
           as processing_jobs,
       (select count(*) from sync_jobs j where j.workspace_id = w.id and j.status = 'failed')
           as failed_jobs,
       (select count(*) from documents d where d.workspace_id = w.id) as documents,
       (select max(d.synced_at) from documents d where d.workspace_id = w.id) as last_synced_at,
       (select j.last_error from sync_jobs j
         where j.workspace_id = w.id and j.last_error is not null
         order by j.updated_at desc limit 1) as last_error
  from workspaces w
 cross join clock
  left join defaults d on d.source_type = w.source_type
 {{budgets._bucket}}
 where (%(id)s::bigint is null or w.id = %(id)s::bigint)
 order by w.id

-- stored_count --
-- How many workspaces have stored (encrypted) credentials.
select count(*) as n from workspaces where credentials is not null

-- credentials_to_check --
-- The stored (encrypted) credentials a worker checks against its key: every one at start
-- (%(only_flagged)s false), those with a credentials error later (true).
select id, source_type, external_id, name, credentials, credentials_error
  from workspaces
 where credentials is not null
   and (not %(only_flagged)s::bool or credentials_error is not null)
 order by id

-- set_credentials_error --
-- A worker could not decrypt workspace %(id)s's stored token (%(error)s: why), or could
-- (%(error)s NULL: cleared). credentials_error_at is when the current text was first set.
-- Returns the workspace with its previous error (no row: it is gone).
with old as (
    select id, credentials_error from workspaces where id = %(id)s for update
)
update workspaces w
   set credentials_error = %(error)s::text,
       credentials_error_at = case when %(error)s::text is null then null
                                   when w.credentials_error is not distinct from %(error)s::text
                                   then w.credentials_error_at
                                   else now() end
  from old
 where w.id = old.id
returning w.id, w.source_type, w.external_id, w.name, w.credentials_error,
          w.credentials_error_at, old.credentials_error as previous_error

-- credentials_error --
-- What keeps workspace %(id)s's jobs and backfills parked: its credentials error (NULL:
-- none), and since when.
select credentials_error, credentials_error_at from workspaces where id = %(id)s

-- stored_credentials --
-- Every stored (encrypted) credential, for key rotation.
select id, credentials from workspaces where credentials is not null order by id

-- replace_credentials --
-- Store re-encrypted credentials (key rotation).
update workspaces set credentials = %(credentials)s where id = %(id)s

-- issue_oauth_state --
-- A single-use OAuth state parameter, valid for %(ttl)s seconds.
insert into oauth_states (state, source_type, expires_at)
values (%(state)s, %(source_type)s, now() + make_interval(secs => %(ttl)s::float8))

-- consume_oauth_state --
-- Use a state parameter once: it is deleted; returns a row only if it existed, belonged to
-- the source and had not expired. Expired states are swept on the way.
with swept as (
    delete from oauth_states where expires_at < now() returning 1
)
delete from oauth_states
 where state = %(state)s and source_type = %(source_type)s and expires_at >= now()
returning state

-- block_workspace --
-- A source answered 429/529 for this workspace: no worker claims its jobs until
-- now + %(seconds)s (a later block never shortens an earlier one). Returns the new state.
update workspaces
   set blocked_until = greatest(coalesce(blocked_until, now()),
                                now() + make_interval(secs => %(seconds)s::float8)),
       rate_limit_reason = %(reason)s,
       updated_at = now()
 where id = %(id)s
returning id, blocked_until, rate_limit_reason

-- workspace_name --
-- Workspace %(id)s's name and source (no row: there is none), for a filter's heading.
select w.id, w.name, w.source_type from workspaces w where w.id = %(id)s::bigint
