-- save_verification_token --
-- Remember a handshake token a source sent (Notion's verification request), keeping only the
-- newest %(keep)s of the source: such requests are unsigned before a secret is configured, so
-- anyone may send them, and what they can store is bounded.
with saved as (
    insert into verification_tokens (source_type, token)
    values (%(source_type)s, %(token)s)
    on conflict (source_type, token) do update set received_at = now()
    returning source_type, token, received_at
), older as (
    delete from verification_tokens v
     where v.source_type = %(source_type)s
       and v.token <> %(token)s
       and v.token not in (select k.token from verification_tokens k
                            where k.source_type = %(source_type)s
                            order by k.received_at desc
                            limit greatest(%(keep)s::int - 1, 0))
    returning 1
)
select s.*, (select count(*) from older) as forgotten from saved s

-- latest_verification_token --
-- The most recent handshake token of a source.
select token, received_at from verification_tokens
 where source_type = %(source_type)s
 order by received_at desc
 limit 1
