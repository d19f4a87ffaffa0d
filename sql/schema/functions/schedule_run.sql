-- Asks for one run of schedule name now (also when it is disabled: an
-- operator asked); returns the time of the request.  A request that has
-- not been served yet stays the one request: asking twice before the
-- scheduler's next round runs it once.
create or replace function pgjob.schedule_run(name text) returns timestamptz
language plpgsql
as $$
#variable_conflict use_variable
declare
	at timestamptz;
begin
	perform pgjob.schedule_row(name);
	update pgjob.schedules s
	   set run_requested_at = coalesce(s.run_requested_at, now())
	 where s.name = name
	returning s.run_requested_at into at;
	return at;
end
$$;
