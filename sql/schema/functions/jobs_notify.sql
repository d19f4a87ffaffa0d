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
