-- The held deletion's reason counted once its documents are held (migration 027's
-- debounce_delete_documents, the one guard, otherwise unchanged): concurrent deletions of one
-- workspace each judged the threshold without the others' uncommitted ones, and the reason
-- each wrote was its own view, so the last one could name fewer documents than the hold held.
-- Holders of one workspace take its hold row in turn (FOR UPDATE); counted after that lock,
-- the last holder's reason counts every held document and every re-check still to run.
create or replace function debounce_delete_documents(p_ids bigint[], p_why text, p_max_count integer,
                                          p_max_share float8, p_window float8)
returns table (document_id text, held boolean) language plpgsql as $$
declare
    w record;
    fresh bigint[];
    recent bigint;
    pending bigint;
    live bigint;
    total bigint;
    awaiting bigint;
    hold bigint;
    span text;
begin
    span := case when p_window >= 60 and p_window::numeric % 60 = 0
                 then (p_window / 60)::bigint || ' minute' ||
                      case when p_window = 60 then '' else 's' end
                 else p_window::numeric || ' seconds' end;
    for w in
        select d.workspace_id, d.source_type, array_agg(d.id order by d.id) as ids
          from documents d
         where d.id = any(p_ids) and d.deleted_at is null
         group by d.workspace_id, d.source_type
         order by d.source_type, d.workspace_id
    loop
        hold := null;
        -- documents of their workspace's open hold stay held (a hold of a workspace since
        -- removed holds nothing: its documents were attached to another one since)
        return query
            select d.document_id, true
              from documents d join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                and h.workspace_id is not distinct from d.workspace_id
             where d.id = any(w.ids);
        select array_agg(d.id order by d.id) into fresh
          from documents d
         where d.id = any(w.ids)
           and not exists (select 1 from deletion_holds h
                            where h.id = d.held_by and h.status = 'held'
                              and h.workspace_id is not distinct from d.workspace_id);
        continue when fresh is null;
        select count(*) into recent from documents d
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is not null and d.held_by is null
           and d.deleted_at >= now() - make_interval(secs => p_window);
        select count(*) filter (where h.id is not null), count(*) into pending, live
          from documents d
          left join deletion_holds h on h.id = d.held_by and h.status = 'held'
                                     and h.workspace_id is not distinct from d.workspace_id
         where d.workspace_id is not distinct from w.workspace_id
           and d.source_type = w.source_type
           and d.deleted_at is null;
        -- re-checks of a sweep still to run (sync_jobs payload {"recheck": true}: the queue's
        -- finish_backfill), other than this deletion's own pages
        select count(*) into awaiting
          from sync_jobs j
          join documents d on d.source_type = j.source_type
                          and d.source_page_id = j.source_page_id
         where j.workspace_id = w.workspace_id and j.source_type = w.source_type
           and j.status in ('pending', 'processing') and j.payload ? 'recheck'
           and d.deleted_at is null and d.held_by is null and not d.id = any(w.ids);
        total := recent + pending + cardinality(fresh) + awaiting;
        if total > p_max_count and total > p_max_share * (live + recent) then
            select h.id into hold from deletion_holds h
             where h.source_type = w.source_type
               and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
               and h.status = 'held'
               for update;
            if hold is null then   -- a concurrent first hold of the workspace wins the insert
                insert into deletion_holds (workspace_id, source_type, reason)
                values (w.workspace_id, w.source_type, '')
                on conflict (source_type, coalesce(workspace_id, 0)) where status = 'held'
                do nothing
                returning id into hold;
            end if;
            if hold is null then
                select h.id into hold from deletion_holds h
                 where h.source_type = w.source_type
                   and coalesce(h.workspace_id, 0) = coalesce(w.workspace_id, 0)
                   and h.status = 'held'
                   for update;
            end if;
            return query
                update documents d set held_by = hold
                 where d.id = any(fresh)
                returning d.document_id, true;
            -- The reason, counted after the hold row's lock: a holder of the same workspace
            -- that took it first has committed, and this statement's snapshot sees its
            -- documents held, so the last holder's reason counts every one (counted before
            -- the lock, it missed those still in flight: "10 … with the 1 more" for 12 held).
            update deletion_holds h
               set reason = format('%s %s document%s %s within %s: %s %% of the workspace%s',
                                   recent + n.held, w.source_type,
                                   case when recent + n.held = 1 then '' else 's' end,
                                   p_why, span,
                                   round(100.0 * (recent + n.held + n.awaiting)
                                         / greatest(live + recent, 1)),
                                   case when n.awaiting > 0
                                        then format(' with the %s more a sweep is re-checking',
                                                    n.awaiting) else '' end),
                   updated_at = now()
              from (select (select count(*) from documents d
                             where d.held_by = hold and d.deleted_at is null) as held,
                           (select count(*)
                              from sync_jobs j
                              join documents d on d.source_type = j.source_type
                                              and d.source_page_id = j.source_page_id
                             where j.workspace_id = w.workspace_id
                               and j.source_type = w.source_type
                               and j.status in ('pending', 'processing')
                               and j.payload ? 'recheck'
                               and d.deleted_at is null and d.held_by is null) as awaiting) n
             where h.id = hold;
        else
            return query
                update documents d
                   set deleted_at = now(), synced_at = now(), updated_at = now(), held_by = null
                 where d.id = any(fresh)
                returning d.document_id, false;
        end if;
    end loop;
end $$;
