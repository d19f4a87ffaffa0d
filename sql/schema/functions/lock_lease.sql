-- The first statement of an sql handler's transaction: locks the job row and
-- raises SQLSTATE PJ001 unless (id, token) still holds a running lease, so
-- the handler's statement and the job's end commit together or not at all.
create or replace function pgjob.lock_lease(job_id bigint, token bigint)
returns void
language plpgsql
as $$
begin
	perform 1 from pgjob.jobs j
	  where j.id = job_id and j.lease_token = token and j.state = 'running'
	  for update;
	if not found then
		raise exception 'pgjob: the lease of job % (token %) was lost',
			job_id, token using errcode = 'PJ001';
	end if;
end
$$;
