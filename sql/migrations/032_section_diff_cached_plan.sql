-- The section diff of every document write (migration 027) as PL/pgSQL around the same query.
-- A SQL-language function that cannot be inlined (this one has a FROM) is planned again at
-- every call made from a trigger: the plan lives only as long as the calling statement's
-- execution, and each trigger firing is a new one. That planning cost about 330 us of server
-- CPU per document write (bench feed_write: log overhead 49.6 % against 26.5 % for migration
-- 017's trigger, 2026-11-29). PL/pgSQL keeps the plan of its query for the session, so the
-- diff costs what the query costs: under 0.1 ms for a one-section document, 0.7 ms for a
-- hundred sections (bench/HISTORY.md, section 21). Same arguments, same result; NULL when the
-- new row carries no sections.
create or replace function debounce_section_changes(old_s jsonb, new_s jsonb) returns jsonb
language plpgsql immutable parallel safe as $$
begin
    if new_s is null then return null; end if;
    return (with o as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(old_s, '[]'::jsonb)) e
    ), n as (
        select coalesce(jsonb_object_agg(e->>'id', e->>'sha256'), '{}'::jsonb) as m
          from jsonb_array_elements(coalesce(new_s, '[]'::jsonb)) e
    )
    select jsonb_build_object(
        'added', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                             from jsonb_array_elements(new_s) with ordinality x(e, i), o
                            where not o.m ? (x.e->>'id')), '[]'::jsonb),
        'changed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(new_s) with ordinality x(e, i), o
                              where o.m->>(x.e->>'id') <> x.e->>'sha256'), '[]'::jsonb),
        'removed', coalesce((select jsonb_agg(x.e->'id' order by x.i)
                               from jsonb_array_elements(coalesce(old_s, '[]'::jsonb))
                                    with ordinality x(e, i), n
                              where not n.m ? (x.e->>'id')), '[]'::jsonb))
      from o, n);
end $$;
