-- Whether the session's role reads every job: it may act on any.
create or replace function pgjob.session_reads() returns boolean
language sql
stable
as $$
	select pg_catalog.has_table_privilege(session_user, 'pgjob.jobs',
		'SELECT')
$$;
