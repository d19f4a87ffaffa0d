-- A throttle that has passed: cleared, and the row deleted if that was all
-- it held.
create or replace function pgjob.limits_tidy_throttle(q text, clk timestamptz)
returns void
language plpgsql
as $$
begin
	update pgjob.limits x set throttled_until = null
	 where x.queue = q and x.throttled_until <= clk;
	if found then
		perform pgjob.limits_tidy(q);
	end if;
end
$$;
