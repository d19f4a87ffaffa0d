-- Version 37: whoever may call pgjob.claim_limited() (the worker role) may
-- call pgjob.claimed_traces(), which the same statement calls.
do $$
declare
	r record;
begin
	for r in select distinct ro.rolname
		   from pg_catalog.pg_proc p
		  cross join lateral pg_catalog.aclexplode(p.proacl) a
		   join pg_catalog.pg_roles ro on ro.oid = a.grantee
		  where p.oid = to_regprocedure('pgjob.claim_limited(text, integer, text[], text, text, bigint, bigint)')
		    and a.privilege_type = 'EXECUTE' and a.grantee <> 0
		    and a.grantee <> p.proowner
	loop
		execute format('grant execute on function pgjob.claimed_traces(bigint[]) to %I',
			       r.rolname);
	end loop;
end
$$;
