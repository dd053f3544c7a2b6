-- recent --
-- What finished in the last %(window_seconds)s seconds, per source and in total (the row whose
-- source_type is NULL): jobs completed and failed, and the end-to-end lag of the completed ones
-- (finished_at - first_event_at: the first event of the burst to the end of its sync), in
-- seconds, at the 50th and 95th percentile and the worst. Reads finished_jobs (migration 034)
-- by its finished_jobs_finished index, in the partitions the window reaches.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select j.source_type,
       count(*) filter (where j.status = 'completed')::bigint as completed,
       count(*) filter (where j.status = 'failed')::bigint as failed,
       percentile_cont(0.5) within group (
           order by extract(epoch from j.finished_at - j.first_event_at)::float8)
           filter (where j.status = 'completed') as lag_p50_seconds,
       percentile_cont(0.95) within group (
           order by extract(epoch from j.finished_at - j.first_event_at)::float8)
           filter (where j.status = 'completed') as lag_p95_seconds,
       max(extract(epoch from j.finished_at - j.first_event_at)::float8)
           filter (where j.status = 'completed') as lag_max_seconds
  from finished_jobs j, clock
 where j.finished_at >= clock.now - make_interval(secs => %(window_seconds)s::float8)
 group by grouping sets ((j.source_type), ())
 order by j.source_type nulls last

-- source_activity --
-- Per source type in %(source_types)s: when its last sync completed, its jobs completed within
-- the last %(window_seconds)s seconds (finished_at), its newest job that carries an error (a
-- failed job, or a pending one waiting out a retry), and its documents (live and marked
-- deleted).
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select s.source_type,
       (select max(j.finished_at) from finished_jobs j
         where j.source_type = s.source_type and j.status = 'completed') as last_sync_at,
       (select count(*) from finished_jobs j
         where j.source_type = s.source_type and j.status = 'completed'
           and j.finished_at >= clock.now - make_interval(secs => %(window_seconds)s::float8)
       )::bigint as completed,
       e.id as last_error_job_id,
       e.status as last_error_status,
       e.last_error,
       e.updated_at as last_error_at,
       (select count(*) from documents d
         where d.source_type = s.source_type and d.deleted_at is null)::bigint as documents,
       (select count(*) from documents d
         where d.source_type = s.source_type and d.deleted_at is not null)::bigint as deleted_documents
  from unnest(%(source_types)s::text[]) as s(source_type)
 cross join clock
  left join lateral (
      select j.id, j.status, j.last_error, j.updated_at
        from (select a.id, a.status, a.last_error, a.updated_at from sync_jobs a
               where a.source_type = s.source_type and a.last_error is not null
              union all
              select f.id, f.status, f.last_error, f.updated_at from finished_jobs f
               where f.source_type = s.source_type and f.last_error is not null) j
       order by j.updated_at desc, j.id desc
       limit 1
  ) e on true
 order by s.source_type

-- workspace_activity --
-- Per workspace (every one, or only %(id)s): its jobs completed within the last
-- %(window_seconds)s seconds (finished_at; reads the finished_jobs_workspace index), when its last
-- job completed, its newest job that carries an error (a failed job, or a pending one waiting
-- out a retry): id, status, error, when; and its documents, live and marked deleted.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select w.id as workspace_id,
       (select count(*) from finished_jobs j
         where j.workspace_id = w.id and j.status = 'completed'
           and j.finished_at >= clock.now - make_interval(secs => %(window_seconds)s::float8)
       )::bigint as completed,
       (select max(j.finished_at) from finished_jobs j
         where j.workspace_id = w.id and j.status = 'completed') as last_completed_at,
       e.id as last_error_job_id,
       e.status as last_error_status,
       e.last_error,
       e.updated_at as last_error_at,
       (select count(*) from documents d
         where d.workspace_id = w.id and d.deleted_at is null)::bigint as documents,
       (select count(*) from documents d
         where d.workspace_id = w.id and d.deleted_at is not null)::bigint as deleted_documents
  from workspaces w
 cross join clock
  left join lateral (
      select j.id, j.status, j.last_error, j.updated_at
        from (select a.id, a.status, a.last_error, a.updated_at from sync_jobs a
               where a.workspace_id = w.id and a.last_error is not null
              union all
              select f.id, f.status, f.last_error, f.updated_at from finished_jobs f
               where f.workspace_id = w.id and f.last_error is not null) j
       order by j.updated_at desc, j.id desc
       limit 1
  ) e on true
 where (%(id)s::bigint is null or w.id = %(id)s::bigint)
 order by w.id

-- list_jobs --
-- Jobs newest id first with their workspace's name, filtered (each filter NULL: any): state
-- %(status)s, source %(source_type)s, page %(source_page_id)s, workspace %(workspace_id)s,
-- finished within the last %(finished_within)s seconds (finished_at, as workspace_activity
-- counts "completed"); %(cursor)s is the last id of the previous page (or NULL). Active
-- jobs and finished ones (finished_jobs) alike.
with clock as (
    select coalesce(%(now)s::timestamptz, now()) as now
)
select j.*, w.name as workspace_name
  from (select * from sync_jobs
        union all
        select * from finished_jobs) j
 cross join clock
  left join workspaces w on w.id = j.workspace_id
 where (%(status)s::text is null or j.status = %(status)s::text)
   and (%(source_type)s::text is null or j.source_type = %(source_type)s::text)
   and (%(source_page_id)s::text is null or j.source_page_id = %(source_page_id)s::text)
   and (%(workspace_id)s::bigint is null or j.workspace_id = %(workspace_id)s::bigint)
   and (%(finished_within)s::float8 is null
        or j.finished_at >= clock.now - make_interval(secs => %(finished_within)s::float8))
   and (%(cursor)s::bigint is null or j.id < %(cursor)s::bigint)
 order by j.id desc
 limit %(limit)s
