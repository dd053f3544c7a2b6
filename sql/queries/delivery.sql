-- _public_columns --
-- A subscription as an operator sees it (the API, the CLI, the dashboard): not its secrets
-- nor the body of the batch in flight.
s.id, s.url, s.description, s.source_type, s.workspace_id, s.kinds, s.document_kinds,
s.full_content, s.status, s.disabled_reason, s.disabled_at, s.epoch, s.after_xid::text as after_xid, s.after_seq,
s.batch_id, s.batch_changes, s.attempts, s.next_attempt_at, s.failing_since, s.last_status,
s.last_error, s.last_attempt_at, s.last_success_at, s.delivered_changes, s.delivered_batches,
s.leased_by, s.lease_until, s.previous_secret_until, s.created_at

-- create --
-- A new subscription following the feed from position (%(epoch)s, %(after_xid)s,
-- %(after_seq)s) (NULL: from the oldest change retained), signed with %(secret)s; %(kinds)s
-- kinds of change (op) and %(document_kinds)s kinds of document (empty: every one).
insert into subscriptions as s (url, description, source_type, workspace_id, kinds,
                                document_kinds, full_content, secret, epoch, after_xid, after_seq)
values (%(url)s, %(description)s, %(source_type)s, %(workspace_id)s, %(kinds)s,
        %(document_kinds)s, %(full_content)s, %(secret)s, %(epoch)s, %(after_xid)s::text::xid8,
        %(after_seq)s)
returning {{_public_columns}}

-- list --
-- Subscriptions (%(id)s; NULL: every one, by id) with their lag: the changes after their
-- position that pass their filters (a kind of document as the feed's changes query computes
-- it: sql/queries/feed.sql) and are servable (counted up to 10001), and when the oldest
-- of them was written (NULL: none waits).
select {{_public_columns}}, lag.changes as lag_changes, lag.oldest as lag_oldest_at,
       now() as read_at
  from subscriptions s
  left join lateral (
    select count(*) as changes, min(w.changed_at) as oldest
      from (select c.changed_at
              from document_changes c
             where (c.feed_xid, c.seq) > (coalesce(s.after_xid, '0'::xid8),
                                          coalesce(s.after_seq, 0))
               and c.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
               and (s.source_type is null or c.source_type = s.source_type)
               and (s.workspace_id is null or c.workspace_id = s.workspace_id)
               and (cardinality(s.kinds) = 0 or c.op = any (s.kinds))
               and (cardinality(s.document_kinds) = 0
                    or coalesce((select document_kind(d.source_type, d.document_id, d.metadata)
                                   from documents d
                                  where d.source_type = c.source_type
                                    and d.document_id = c.document_id
                                    and document_kind(d.source_type, d.document_id, d.metadata)
                                        <> document_kind(d.source_type, d.document_id, null)),
                                document_kind(c.source_type, c.document_id, null))
                       = any (s.document_kinds))
             order by c.feed_xid, c.seq
             limit 10001) w
  ) lag on true
 where %(id)s::bigint is null or s.id = %(id)s::bigint
 order by s.id

-- delete --
-- Remove subscription %(id)s (a deliverer holding it stops at its next step).
delete from subscriptions s where s.id = %(id)s returning s.id

-- rotate --
-- Sign subscription %(id)s with %(secret)s from now on, and with its current secret too
-- until %(overlap_seconds)s seconds after %(now)s (NULL: now()).
update subscriptions s
   set previous_secret = s.secret, secret = %(secret)s,
       previous_secret_until = coalesce(%(now)s::timestamptz, now())
                               + make_interval(secs => %(overlap_seconds)s::float8)
 where s.id = %(id)s
returning {{_public_columns}}

-- disable --
-- Stop delivering to subscription %(id)s, saying why (%(reason)s); its position and the batch
-- in flight are kept for a later enable.
update subscriptions s
   set status = 'disabled', disabled_reason = %(reason)s,
       disabled_at = coalesce(%(now)s::timestamptz, now())
 where s.id = %(id)s
returning {{_public_columns}}

-- enable --
-- Deliver to subscription %(id)s again from where it stopped (the batch in flight first, under
-- its webhook-id), its retry schedule started over.
update subscriptions s
   set status = 'active', disabled_reason = null, disabled_at = null, attempts = 0,
       failing_since = null, next_attempt_at = coalesce(%(now)s::timestamptz, now())
 where s.id = %(id)s
returning {{_public_columns}}

-- replay --
-- Deliver to subscription %(id)s again from position (%(epoch)s, %(after_xid)s,
-- %(after_seq)s) (NULL: the oldest change retained): the batch in flight is dropped (its
-- changes come again in new batches), the subscription is active again.
update subscriptions s
   set epoch = %(epoch)s, after_xid = %(after_xid)s::text::xid8, after_seq = %(after_seq)s,
       batch_id = null, batch_body = null, batch_xid = null, batch_seq = null,
       batch_changes = null, status = 'active', disabled_reason = null, disabled_at = null,
       attempts = 0, failing_since = null,
       next_attempt_at = coalesce(%(now)s::timestamptz, now())
 where s.id = %(id)s
returning {{_public_columns}}

-- lease --
-- Take up to %(limit)s active subscriptions no deliverer holds (never leased, or its lease
-- ran out before %(now)s, NULL: now()) for %(lease_seconds)s seconds, each with a new token.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
), free as (
    select s.id from subscriptions s, clock
     where s.status = 'active' and (s.lease_until is null or s.lease_until < clock.now)
     order by s.lease_until nulls first, s.id
     limit %(limit)s
       for update of s skip locked
)
update subscriptions s
   set lease_token = gen_random_uuid(), leased_by = %(worker_id)s,
       lease_until = clock.now + make_interval(secs => %(lease_seconds)s::float8)
  from free, clock
 where s.id = free.id
returning s.id, s.lease_token

-- renew --
-- Extend the lease %(token)s holds on subscription %(id)s to %(lease_seconds)s seconds after
-- %(now)s (NULL: now()) and read what the deliverer needs (no row: the lease is gone, or the
-- subscription). The secrets come back: the previous one only while its overlap lasts.
update subscriptions s
   set lease_until = coalesce(%(now)s::timestamptz, now())
                     + make_interval(secs => %(lease_seconds)s::float8)
 where s.id = %(id)s and s.lease_token = %(token)s
returning s.id, s.url, s.status, s.source_type, s.workspace_id, s.kinds, s.document_kinds,
          s.full_content, s.secret,
          case when s.previous_secret_until > coalesce(%(now)s::timestamptz, now())
               then s.previous_secret end as previous_secret,
          s.epoch, s.after_xid::text as after_xid, s.after_seq, s.batch_id, s.batch_body,
          s.batch_changes, s.attempts, s.next_attempt_at, s.failing_since

-- release --
-- Give the lease %(token)s holds on subscription %(id)s back (another deliverer may take it;
-- its lease_until, now, puts it after the subscriptions waiting longer).
update subscriptions s
   set lease_token = null, leased_by = null, lease_until = now()
 where s.id = %(id)s and s.lease_token = %(token)s

-- waiting --
-- How many active subscriptions no deliverer holds (a full worker then lets its idle ones go).
select count(*) as waiting
  from subscriptions s
 where s.status = 'active' and (s.lease_until is null or s.lease_until < now())

-- advance --
-- Move subscription %(id)s past changes its filters exclude: from (%(epoch)s, %(from_xid)s,
-- %(from_seq)s) to (%(to_xid)s, %(to_seq)s), only for the lease %(token)s, with no batch in
-- flight and the position unchanged meanwhile (an operator's replay wins).
update subscriptions s
   set epoch = %(epoch)s, after_xid = %(to_xid)s::text::xid8, after_seq = %(to_seq)s
 where s.id = %(id)s and s.lease_token = %(token)s and s.batch_id is null
   and s.after_xid is not distinct from %(from_xid)s::text::xid8
   and s.after_seq is not distinct from %(from_seq)s::bigint
returning s.id

-- stage --
-- Make %(batch_id)s (body %(body)s, %(changes)s changes, up to position (%(to_xid)s,
-- %(to_seq)s)) subscription %(id)s's batch in flight, due now, only for the lease %(token)s,
-- with no batch in flight and the position still (%(from_xid)s, %(from_seq)s).
update subscriptions s
   set batch_id = %(batch_id)s, batch_body = %(body)s, batch_xid = %(to_xid)s::text::xid8,
       batch_seq = %(to_seq)s, batch_changes = %(changes)s, attempts = 0,
       epoch = %(epoch)s, next_attempt_at = coalesce(%(now)s::timestamptz, now())
 where s.id = %(id)s and s.lease_token = %(token)s and s.batch_id is null
   and s.after_xid is not distinct from %(from_xid)s::text::xid8
   and s.after_seq is not distinct from %(from_seq)s::bigint
returning s.id

-- delivered --
-- Batch %(batch_id)s of subscription %(id)s was answered 2xx (%(status)s) at %(now)s (NULL:
-- now()): the position moves past it, only for the lease %(token)s (the fence: a deliverer
-- whose lease ran out moves nothing) and only if it is still the batch in flight.
update subscriptions s
   set after_xid = s.batch_xid, after_seq = s.batch_seq, batch_id = null, batch_body = null,
       batch_xid = null, batch_seq = null, batch_changes = null, attempts = 0,
       failing_since = null, last_status = %(status)s, last_error = null,
       last_attempt_at = coalesce(%(now)s::timestamptz, now()),
       last_success_at = coalesce(%(now)s::timestamptz, now()),
       delivered_changes = s.delivered_changes + s.batch_changes,
       delivered_batches = s.delivered_batches + 1
 where s.id = %(id)s and s.lease_token = %(token)s and s.batch_id = %(batch_id)s
returning s.id

-- failed --
-- An attempt of batch %(batch_id)s of subscription %(id)s failed at %(now)s (NULL: now())
-- with %(status)s (NULL: no answer) and %(error)s: the next attempt at %(retry_seconds)s
-- seconds after it, or the subscription disabled (%(disable)s, saying %(reason)s); only for the
-- lease %(token)s and the batch still in flight. Returns the new state.
update subscriptions s
   set attempts = s.attempts + 1, last_status = %(status)s, last_error = %(error)s,
       last_attempt_at = coalesce(%(now)s::timestamptz, now()),
       failing_since = coalesce(s.failing_since, coalesce(%(now)s::timestamptz, now())),
       next_attempt_at = coalesce(%(now)s::timestamptz, now())
                         + make_interval(secs => %(retry_seconds)s::float8),
       status = case when %(disable)s::bool then 'disabled' else s.status end,
       disabled_reason = case when %(disable)s::bool then %(reason)s else s.disabled_reason end,
       disabled_at = case when %(disable)s::bool then coalesce(%(now)s::timestamptz, now())
                          else s.disabled_at end
 where s.id = %(id)s and s.lease_token = %(token)s and s.batch_id = %(batch_id)s
returning s.id, s.status, s.attempts, s.next_attempt_at, s.failing_since

-- documents --
-- The content, title and url of documents (%(source_types)s, %(document_ids)s), pairwise: a
-- subscription with full content sends them with its changes.
select d.source_type, d.document_id, d.title, d.url, d.content
  from documents d
  join unnest(%(source_types)s::text[], %(document_ids)s::text[]) as k(source_type, document_id)
    on d.source_type = k.source_type and d.document_id = k.document_id
