-- save_verification_token --
-- Remember a handshake token a source sent (Notion's verification request).
insert into verification_tokens (source_type, token)
values (%(source_type)s, %(token)s)
on conflict (source_type, token) do update set received_at = now()

-- latest_verification_token --
-- The most recent handshake token of a source.
select token, received_at from verification_tokens
 where source_type = %(source_type)s
 order by received_at desc
 limit 1

-- ping --
-- Readiness probe.
select 1 as ok
