-- _public_columns --
-- What a statement that changes a workspace answers: the row as an operator sees it (the
-- API, the CLI), not the encrypted credentials nor the claim's bookkeeping (its lines' due
-- times, holds and budget level: sql/queries/claim.sql, sql/queries/budgets.sql).
id, source_type, external_id, enterprise_id, name, status, origin, token_fingerprint,
bot_user_id, connected_at, updated_at, last_auth_error, last_auth_error_at, credentials_error,
credentials_error_at, blocked_until, rate_limit_reason, budget_per_minute, budget_burst,
reconcile, missing_scopes, missing_scopes_at

-- ensure_env_workspace --
-- The workspace the environment's token defines (NOTION_TOKEN, SLACK_BOT_TOKEN): created on
-- first start, its fingerprint kept current. Its external id is learned on first use. A new
-- token (another fingerprint) reactivates a revoked workspace: the operator replaced it. A
-- removed one is connected again (the same row), as the environment still names its token.
insert into workspaces as w (source_type, origin, token_fingerprint, name)
values (%(source_type)s, 'env', %(fingerprint)s, %(name)s)
on conflict (source_type) where origin = 'env' do update
   set status = case when w.token_fingerprint is distinct from excluded.token_fingerprint
                          and w.status = 'revoked' then 'active'
                     when w.status = 'removed' then 'active' else w.status end,
       purge_documents = false,
       missing_scopes = case when w.token_fingerprint is distinct from excluded.token_fingerprint
                             then '{}' else w.missing_scopes end,
       missing_scopes_at = case when w.token_fingerprint is distinct from excluded.token_fingerprint
                                then null else w.missing_scopes_at end,
       token_fingerprint = excluded.token_fingerprint, updated_at = now()
returning {{_public_columns}}

-- save_workspace --
-- Connect (or re-connect) a workspace with its encrypted credentials: an install reactivates a
-- revoked, paused or removed workspace (the same row, so its documents and history are its
-- own again) and clears its last auth error, its credentials error and its missing scopes (new
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
       missing_scopes = '{}', missing_scopes_at = null, purge_documents = false, updated_at = now()
returning {{_public_columns}}, (xmax = 0) as inserted

-- learn_external_id --
-- Record the source's id (and name) of the environment's workspace, learned on first use.
update workspaces
   set external_id = %(external_id)s, name = coalesce(nullif(%(name)s, ''), name),
       bot_user_id = coalesce(%(bot_user_id)s, bot_user_id), updated_at = now()
 where id = %(id)s and external_id is null
returning {{_public_columns}}

-- routes --
-- What the web process needs to route an event to its workspace, every workspace (a removed
-- one's events are dropped as an unknown workspace's: workspaces.directory).
select id, source_type, external_id, enterprise_id, status, origin from workspaces

-- workspace_credentials --
-- A workspace's stored credentials (NULL for the environment's) and state, for a sync: the
-- columns the claim returns of a job's workspace (sql/queries/claim.sql, claim), named as it names them.
select id as workspace_id, status as ws_status, origin as ws_origin,
       external_id as ws_external_id, bot_user_id as ws_bot_user_id,
       credentials as ws_credentials
  from workspaces where id = %(id)s

-- add_missing_scope --
-- The token of workspace %(id)s lacks scope %(scope)s (a sync was refused it): add it to the
-- workspace's missing scopes (sorted, once each; missing_scopes_at: when the first was
-- found). No row: the workspace is gone, or the scope was already recorded.
update workspaces
   set missing_scopes = array(select distinct s from unnest(missing_scopes || %(scope)s::text) s order by s),
       missing_scopes_at = coalesce(missing_scopes_at, now()), updated_at = now()
 where id = %(id)s and not (%(scope)s::text = any (missing_scopes))
returning id, missing_scopes

-- set_status --
-- Pause, resume or revoke a workspace; %(error)s (revoked: why) becomes its last auth error.
update workspaces
   set status = %(status)s,
       last_auth_error = coalesce(%(error)s, last_auth_error),
       last_auth_error_at = case when %(error)s::text is not null then now()
                                 else last_auth_error_at end,
       updated_at = now()
 where id = %(id)s and status <> 'removed'
returning {{_public_columns}}

-- revoke_by_external_id --
-- A source said a workspace's token is gone (Slack app_uninstalled / tokens_revoked).
update workspaces
   set status = 'revoked', last_auth_error = %(error)s, last_auth_error_at = now(),
       updated_at = now()
 where source_type = %(source_type)s and external_id = %(external_id)s
   and status <> 'removed'
returning {{_public_columns}}

-- remove --
-- Remove workspace %(id)s (docs/claim.md, "Removing a workspace"): status 'removed', its
-- credentials erased, its name and ids kept; with %(purge_documents)s its documents are to be
-- marked deleted too (documents.purge_removed). One row changed and nothing else locked: the
-- claim, the web's routes and the backfills serve active workspaces only, and its pending jobs
-- and running backfills are finished in batches (queue.cancel_removed,
-- backfills.cancel_removed). Removing it again changes nothing but may ask for the purge.
-- Returns the row as an operator sees it and its pending jobs (no row: no such workspace).
update workspaces w
   set status = 'removed', credentials = null,
       purge_documents = w.purge_documents or %(purge_documents)s::bool,
       updated_at = case when w.status = 'removed' then w.updated_at else now() end
 where w.id = %(id)s
returning {{_public_columns}},
          (select count(*) from sync_jobs j
            where j.workspace_id = w.id and j.status = 'pending')::int as pending_jobs

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
       w.rate_limit_reason, w.missing_scopes, w.missing_scopes_at,
       (select count(*) from sync_jobs j where j.workspace_id = w.id and j.status = 'pending')
           as pending_jobs,
       (select count(*) from sync_jobs j where j.workspace_id = w.id and j.status = 'processing')
           as processing_jobs,
       (select count(*) from finished_jobs j where j.workspace_id = w.id and j.status = 'failed')
           as failed_jobs,
       (select count(*) from documents d where d.workspace_id = w.id) as documents,
       (select max(d.synced_at) from documents d where d.workspace_id = w.id) as last_synced_at,
       (select j.last_error
          from (select a.last_error, a.updated_at from sync_jobs a
                 where a.workspace_id = w.id and a.last_error is not null
                union all
                select f.last_error, f.updated_at from finished_jobs f
                 where f.workspace_id = w.id and f.last_error is not null) j
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
