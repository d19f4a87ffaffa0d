-- A slot the session may not act on is no slot to it: false, as for one
-- that does not exist.
create or replace function pgjob.release_slot(hold bigint) returns boolean
language sql
security definer
set search_path = pg_catalog, pg_temp
as $$
	with d as (delete from pgjob.limit_holds x where x.id = hold
		and pgjob.session_may(x.held_by, pgjob.session_reads()) returning 1)
	select exists (select 1 from d)
$$;
