-- 012: who may read each document (issue 23, "Each document's audience"; docs/slack.md and
-- docs/notion.md, "Audience").
--
-- documents.audience_kind        slack: public_channel | private_channel | mpim | im (the
--                                conversation's kind); notion: workspace (the document's
--                                workspace_id says which). NULL: unknown (a document synced
--                                before this release; its next sync or member event fills it).
-- documents.audience_members     the conversation's member user ids (Slack), for every kind
--                                but public_channel; NULL where not applicable or unknown.
-- documents.audience_accessible_by  Notion: the user and bot ids a webhook event of a public
--                                integration said can access the page (its accessible_by),
--                                NULL when no event said so.
--
-- The read API's visible_to filter (sql/queries/audiences.sql, _visible_to) reads a workspace's public
-- channel documents through documents_audience_public and a user's conversations through the
-- GIN index documents_audience_members: both index scans, whatever the number of workspaces.
alter table documents add column audience_kind text
    check (audience_kind in ('public_channel', 'private_channel', 'mpim', 'im', 'workspace'));
alter table documents add column audience_members text[];
alter table documents add column audience_accessible_by text[];

create index documents_audience_members on documents using gin (audience_members)
    where audience_members is not null;
create index documents_audience_public on documents (workspace_id, id)
    where audience_kind = 'public_channel';

-- What a source last learned of a conversation's audience (Slack: conversations.info and
-- conversations.members), per workspace and conversation, so a sync of a busy channel does
-- not list its members each time. Refreshed by member_joined_channel / member_left_channel
-- events, a sync that finds the row older than the source's maximum age, and the
-- reconciliation sweep. workspace_id NULL: the source's configured token without a workspace.
create table conversation_audiences (
    source_type     text        not null,
    workspace_id    bigint      references workspaces (id) on delete cascade,
    conversation_id text        not null,
    kind            text        not null
                    check (kind in ('public_channel', 'private_channel', 'mpim', 'im')),
    members         text[],
    refreshed_at    timestamptz not null default now()
);
-- One row per (source, workspace, conversation); workspace ids start at 1, so 0 stands for
-- "no workspace" in the key.
create unique index conversation_audiences_key
    on conversation_audiences (source_type, (coalesce(workspace_id, 0)), conversation_id);
