-- files_shown_elsewhere --
-- Of the file ids %(file_ids)s, those another job's last sync showed: a sync_state row of
-- source %(source_type)s keyed %(state_prefix)s<job key> (not %(state_key)s, the asking job's),
-- {"files": {<file id>: …}} (debounce/worker/files.py). A scan of the source's rows of shown
-- files: run only for files a parent stopped showing.
select f.file_id
  from unnest(%(file_ids)s::text[]) as f(file_id)
 where exists (select 1 from sync_state o
                where o.source_type = %(source_type)s
                  and starts_with(o.source_page_id, %(state_prefix)s)
                  and o.source_page_id <> %(state_key)s
                  and o.state->'files' ? f.file_id)
