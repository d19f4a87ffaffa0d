-- What a worker's config says, {"queue": {limits}, ...}: every queue named
-- is known from now on, and its limits are the config's, unless
-- pgjob.set_limits() set them.  Returns the queues whose limits this
-- changed from another config's (two instances that disagree).
create or replace function pgjob.publish_limits(config jsonb)
returns setof text
language plpgsql
as $$
declare
	q text;
	lim jsonb;
	before pgjob.limits;
	after pgjob.limits;
begin
	for q, lim in select * from jsonb_each(config) loop
		insert into pgjob.queues (name) values (q)
		on conflict (name) do update set seen_at = now();
		select * into before from pgjob.limits where queue = q for update;
		if found and before.source = 'sql' then
			continue;
		end if;
		perform pgjob.apply_limits(q, lim, 'config', true);
		select * into after from pgjob.limits where queue = q;
		if before.queue is not null
		   and (before.global_concurrency, before.per_key_concurrency,
			before.rate, before.rate_period_ms, before.burst,
			before.rate_per_key, before.rate_per_key_period_ms,
			before.burst_per_key, before.fair)
		   is distinct from (after.global_concurrency,
			after.per_key_concurrency, after.rate, after.rate_period_ms,
			after.burst, after.rate_per_key,
			after.rate_per_key_period_ms, after.burst_per_key,
			coalesce(after.fair, false))
		   and (before.global_concurrency is not null
			or before.per_key_concurrency is not null
			or before.rate is not null or before.rate_per_key is not null
			or before.fair) then
			return next q;
		end if;
	end loop;
end
$$;
