-- Version 33: the roles that read the jobs get the operator actions
-- (grants.sql gives no one else: PUBLIC does not).  Run after the
-- restatement made the functions.
do $$
declare
	r record;
begin
	for r in select a.rolname from pg_catalog.pg_roles a
		  where not a.rolsuper and a.rolname !~ '^pg_'
		    and a.oid <> (select n.nspowner from pg_catalog.pg_namespace n
				  where n.nspname = 'pgjob')
		    and (has_table_privilege(a.oid, 'pgjob.jobs', 'SELECT')
			 or has_table_privilege(a.oid, 'pgjob.all_jobs', 'SELECT'))
	loop
		execute format('grant execute on function'
			' pgjob.action_states(text), pgjob.retry_jobs(bigint[]),'
			' pgjob.cancel_jobs(bigint[], boolean),'
			' pgjob.delete_jobs(bigint[]) to %I', r.rolname);
	end loop;
end
$$;
