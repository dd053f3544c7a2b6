-- The worker processes' heartbeats (migration 015's table `workers`). Times are the
-- database's clock.

-- beat --
-- Worker %(worker_id)s is alive now; it last claimed a job %(claimed_ago)s seconds ago (NULL:
-- not since it started). A later beat never moves last_claim_at back.
insert into workers as w (worker_id, last_claim_at)
values (%(worker_id)s, now() - make_interval(secs => %(claimed_ago)s::float8))
on conflict (worker_id) do update
   set seen_at = now(),
       last_claim_at = greatest(w.last_claim_at, excluded.last_claim_at)

-- leave --
-- Worker %(worker_id)s stopped cleanly.
delete from workers where worker_id = %(worker_id)s

-- forget_silent --
-- Workers not seen for %(older_than)s seconds (killed, never to come back under that id).
delete from workers where seen_at < now() - make_interval(secs => %(older_than)s::float8)

-- summary --
-- How many workers were seen within %(alive_within)s seconds, and how long ago (seconds) any
-- worker last claimed a job (NULL: none has since the table was last emptied).
select count(*) filter (where seen_at >= now() - make_interval(secs => %(alive_within)s::float8))
           as alive,
       extract(epoch from now() - max(last_claim_at))::float8 as last_claim_age_seconds
  from workers
