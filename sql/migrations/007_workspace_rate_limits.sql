-- 007: a source's 429 (or Notion's 529 service_overload) is shared knowledge: the workspace is
-- blocked for every worker until its Retry-After has passed, with the reason the source gave.
alter table workspaces add column blocked_until timestamptz;
alter table workspaces add column rate_limit_reason text;
