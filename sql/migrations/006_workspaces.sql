-- 006: workspaces — a Notion workspace or a Slack team connected to this deployment, with its
-- own credentials (encrypted at rest with DEBOUNCE_SECRET_KEY) and status. Jobs and documents
-- carry the workspace they belong to; the job key stays the page (a Slack Connect channel
-- shared by two installed teams is one channel, one job: see docs/design.md).

create table workspaces (
    id                 bigint generated always as identity primary key,
    source_type        text        not null check (source_type <> ''),
    -- The source's own id: Notion workspace_id, Slack team_id. NULL only for the workspace the
    -- environment's token defines, until its id is learned from the source on first use.
    external_id        text,
    enterprise_id      text,                          -- Slack Enterprise Grid org, if any
    name               text        not null default '',
    status             text        not null default 'active'
                       check (status in ('active', 'paused', 'revoked')),
    -- env: NOTION_TOKEN / SLACK_BOT_TOKEN (the token stays in the environment);
    -- oauth: an install flow; cli: `debounce workspaces add`.
    origin             text        not null check (origin in ('env', 'oauth', 'cli')),
    credentials        bytea,                         -- Fernet token of the JSON credentials
    token_fingerprint  text,                          -- sha256 prefix: shown instead of the token
    bot_user_id        text,                          -- Slack: our bot's user id in that team
    connected_at       timestamptz not null default now(),
    updated_at         timestamptz not null default now(),
    last_auth_error    text,
    last_auth_error_at timestamptz,
    check (origin = 'env' or credentials is not null),
    check (origin = 'env' or external_id is not null)
);

create unique index workspaces_external on workspaces (source_type, external_id)
    where external_id is not null;
create unique index workspaces_env on workspaces (source_type) where origin = 'env';

alter table sync_jobs add column workspace_id bigint references workspaces (id) on delete set null;
alter table documents add column workspace_id bigint references workspaces (id) on delete set null;
create index documents_workspace on documents (workspace_id) where workspace_id is not null;
create index sync_jobs_workspace on sync_jobs (workspace_id, status) where workspace_id is not null;

-- Single-use OAuth state parameters of the install flows (expire after a few minutes).
create table oauth_states (
    state       text        primary key,
    source_type text        not null,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz not null
);
