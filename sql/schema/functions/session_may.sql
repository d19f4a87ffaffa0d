-- Whether the session may act on what the role owner made, for a session
-- that reads pgjob.jobs (reads) or not.  A role that was dropped, or null
-- (made before version 30), is no one's.  (No SET clause, so that a query
-- inlines it: it names every object with its schema.)
create or replace function pgjob.session_may(owner oid, reads boolean) returns boolean
language sql
stable
as $$
	select reads or coalesce(pg_catalog.pg_has_role(session_user, owner,
		'USAGE'), false)
$$;
