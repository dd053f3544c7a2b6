-- 003: handshake tokens a source sends before any signing secret exists (Notion's
-- verification request). Kept so the operator can read it back (`debounce notion-token`,
-- GET /admin/verification-token/{source}) and paste it into the source's settings.

create table verification_tokens (
    source_type text        not null,
    token       text        not null,
    received_at timestamptz not null default now(),
    primary key (source_type, token)
);
