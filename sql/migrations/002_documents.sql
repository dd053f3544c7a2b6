-- 002: the product's output. One row per synced document (a Notion page or database, a Slack
-- thread), written by the integrations' sync half.

create table documents (
    id                bigint generated always as identity primary key,
    source_type       text        not null,
    document_id       text        not null,   -- Notion page/database id; Slack "channel/thread_ts"
    source_page_id    text        not null,   -- the sync_jobs key it came from
    title             text        not null default '',
    url               text,
    content           text        not null default '',   -- Markdown
    content_sha256    text        not null,
    metadata          jsonb       not null default '{}'::jsonb,
    source_updated_at timestamptz,
    synced_at         timestamptz not null default now(),
    deleted_at        timestamptz,
    created_at        timestamptz not null default now(),
    updated_at        timestamptz not null default now(),
    unique (source_type, document_id)
);

create index documents_page on documents (source_type, source_page_id);

-- Per-page sync state an integration keeps between syncs (Slack: the history watermark).
create table sync_state (
    source_type    text        not null,
    source_page_id text        not null,
    state          jsonb       not null default '{}'::jsonb,
    updated_at     timestamptz not null default now(),
    primary key (source_type, source_page_id)
);
