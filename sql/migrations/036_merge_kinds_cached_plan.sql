-- The change kinds' merge (migration 018) as PL/pgSQL with the same result, and no query run when
-- there is nothing to merge. The SQL-language version cannot be inlined (its body has a
-- subquery), so every enqueue planned it again (its plan lives only as long as the calling
-- statement's execution) and ran its subquery through a fresh executor at every call: once per
-- event in the batch's merge (the aggregate debounce_union_kinds calls it as its transition) and
-- once per page in the upsert. That was about 0.4 ms of a batch of 8 events, a third of the
-- statement (issue 38; bench/HISTORY.md, "The web's statement on a diet"). PL/pgSQL keeps its
-- plans for the session, answers the common cases (a first kind set, the same single kind again,
-- "everything") from its arguments alone, and runs the sorted, distinct union only for two
-- different sets.
create or replace function debounce_merge_kinds(a text[], b text[]) returns text[]
language plpgsql immutable parallel safe as $$
begin
    if a is null then return b; end if;
    if b is null then return a; end if;
    if cardinality(a) = 0 or cardinality(b) = 0 then return '{}'::text[]; end if;
    if cardinality(a) = 1 and a = b then return a; end if;
    return array(select distinct k from unnest(a || b) as u(k) order by k);
end
$$;
