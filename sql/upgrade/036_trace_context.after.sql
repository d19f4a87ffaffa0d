-- Version 36: the roles granted the functions 036_trace_context.sql dropped
-- get the new ones (the restatement made them).
do $$
declare
	r record;
begin
	for r in select * from pg_temp.pgjob_036_grants loop
		execute format('grant execute on function %s to %I', r.new_sig,
			       r.grantee);
	end loop;
end
$$;
