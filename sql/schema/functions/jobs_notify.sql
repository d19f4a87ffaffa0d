-- New due work wakes idle workers: one NOTIFY per statement (and PostgreSQL
-- folds identical notifications within a transaction), never one per row;
-- polling stays on as the fallback.  The payload is "<transaction id> <due
-- jobs inserted> <lowest priority> <earliest run_at of that priority,
-- microseconds since the epoch>": a worker reads each busy queue from past
-- the last job it claimed, and a new job that sorts before that position
-- (a more urgent priority, a run_at in the past, a transaction that
-- committed long after it began) needs a scan from the head; the last two
-- fields say which (claim_on_notify() in src/worker/claim.c).  A payload
-- without them (pgjob retry, a workflow's released steps) makes a worker
-- read every queue from its head.
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
