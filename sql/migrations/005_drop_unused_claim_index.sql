-- 005: the claim filters by source (004's sync_jobs_claim_source) and its plans use that index
-- or sync_jobs_due, never 001's sync_jobs_claim (docs/benchmarks-history.md, section 6): drop it
-- so enqueue and complete stop maintaining an index nothing reads.
drop index if exists sync_jobs_claim;
