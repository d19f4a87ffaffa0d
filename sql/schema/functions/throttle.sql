-- The adaptive throttle: no job of q starts for the next ms milliseconds
-- (at most an hour).  The http handler's 429 and 503 with Retry-After call
-- it for queues with adaptive: true.
create or replace function pgjob.throttle(queue text, ms bigint)
returns void
language plpgsql
as $$
#variable_conflict use_variable
declare
	until timestamptz := clock_timestamp()
		+ least(greatest(ms, 0), 3600000) * interval '1 millisecond';
begin
	insert into pgjob.limits as l (queue, throttled_until)
	values (queue, until)
	on conflict on constraint limits_pkey do update
	   set throttled_until = greatest(l.throttled_until, excluded.throttled_until)
	 where l.throttled_until is null or l.throttled_until < excluded.throttled_until;
end
$$;
