-- pgjobd schema, version 17: a NOTIFY that says where its jobs sort.
--
-- The payload is "<transaction id> <due jobs inserted> <lowest priority>
-- <earliest run_at of that priority, microseconds since the epoch>".  A
-- worker reads each busy queue from past the last job it claimed (its
-- position), so that the index entries of jobs already claimed, which a
-- snapshot held open elsewhere keeps from being cleaned, are not read again
-- by every claim.  A new job that sorts after every position needs no scan
-- from the head; one that sorts before a position (a more urgent priority, a
-- run_at in the past, a transaction that committed long after it began)
-- does, and the last two fields say which (see claim_on_notify() in
-- src/worker/claim.c).  A worker that cannot read them (an older pgjobd)
-- claims on every notification, as before version 7; a payload without
-- them (pgjob retry, a workflow's released steps) makes a worker read
-- every queue from its head.
create or replace function pgjob.jobs_notify() returns trigger
language plpgsql
as $$
declare
	due bigint;
	pr smallint;
	ra timestamptz;
begin
	select count(*), min(priority) into due, pr from new_jobs
	 where state = 'available' and run_at <= now();
	if due > 0 then
		select min(run_at) into ra from new_jobs
		 where state = 'available' and run_at <= now() and priority = pr;
		perform pg_notify('pgjob', pg_current_xact_id()::text || ' ' || due
			|| ' ' || pr || ' '
			|| floor(extract(epoch from ra) * 1000000)::bigint);
	end if;
	return null;
end
$$;
