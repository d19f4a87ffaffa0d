-- The statement trigger after every update of pgjob.jobs' state: counts
-- the ends its row trigger (pgjob.jobs_ended()) noted, in the statement
-- that wrote them, so that a parent's end and its children's release
-- commit together (docs/workflows.md, "Exactly once").  An update that
-- ended no job with children, workflow or batch pays for this call and one
-- read of a setting.  Inside pgjob.ends_count() (its own updates) it does
-- nothing: the loop there takes what they noted.
create or replace function pgjob.jobs_ended_flush() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	if coalesce(current_setting('pgjob.ended', true), '') <> ''
	   and coalesce(current_setting('pgjob.releasing', true), '') <> 'on' then
		perform pgjob.ends_count();
	end if;
	return null;
end
$$;
