-- set_statement_timeout --
-- Session setting of every pooled connection of a process with a deadline (the web): the
-- server cancels any statement running longer than %(milliseconds)s ms, rolling it back whole.
select set_config('statement_timeout', %(milliseconds)s, false)

-- connection_limit --
-- The server's connection limit as a client may use it: max_connections, the slots kept for
-- superusers (and, from Postgres 16, for roles with pg_use_reserved_connections), and the
-- client connections open now (this one included).
select current_setting('max_connections')::int as max_connections,
       current_setting('superuser_reserved_connections')::int
         + coalesce(current_setting('reserved_connections', true)::int, 0) as reserved,
       (select count(*) from pg_stat_activity where backend_type = 'client backend')::int
         as in_use
