-- Deletes q's row when it limits nothing any more.
create or replace function pgjob.limits_tidy(q text) returns void
language sql
as $$
	delete from pgjob.limits l where l.queue = q and not l.paused
	   and l.paused_kinds = '{}' and l.global_concurrency is null
	   and l.per_key_concurrency is null and l.rate is null
	   and l.rate_per_key is null and not l.fair
	   and (l.throttled_until is null or l.throttled_until <= clock_timestamp())
$$;
