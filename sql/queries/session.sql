-- set_statement_timeout --
-- Session setting of every pooled connection of a process with a deadline (the web): the
-- server cancels any statement running longer than %(milliseconds)s ms, rolling it back whole.
select set_config('statement_timeout', %(milliseconds)s, false)
