-- 004: the worker claims per source (each source has its own share of a worker's slots), so the
-- claim walks pending rows of one source in priority, due-time order.
create index sync_jobs_claim_source
    on sync_jobs (source_type, priority desc, scheduled_at)
    where status = 'pending';
