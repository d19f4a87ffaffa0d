-- pgjobd schema, version 7: a NOTIFY that says whose it is and how much.
--
-- The payload is "<transaction id> <due jobs inserted>".  The workers of an
-- instance share out a notification by it: one claims for a job that comes
-- alone, as many as the jobs need for a burst (see answer_notify() in
-- src/worker.c).  Until now every worker claimed on every NOTIFY, so a
-- single job cost one claim per worker, all but one of them empty.  A
-- worker that cannot read the payload (an empty one, from pgjob retry or
-- an older trigger) claims, as before.
create or replace function pgjob.jobs_notify() returns trigger
language plpgsql
as $$
declare
	due bigint;
begin
	select count(*) into due from new_jobs
	 where state = 'available' and run_at <= now();
	if due > 0 then
		perform pg_notify('pgjob', pg_current_xact_id()::text || ' ' || due);
	end if;
	return null;
end
$$;
