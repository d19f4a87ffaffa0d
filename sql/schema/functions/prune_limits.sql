-- prune_limits() as version 10's, but a key's row goes only when its
-- bucket is full and none of its holders holds a lease any more (the row
-- would otherwise be counted again from the running jobs at its next turn:
-- exact, but a read of the queue's running jobs); and only once its
-- queue's pgjob.limits row is locked, skipping queues whose row a claim
-- holds.  Claims lock that row first and then write their keys' rows;
-- deleting the keys' rows first deadlocked with them (40P01, seen in
-- bench.short once claims wrote a key's row at each turn).
create or replace function pgjob.prune_limits() returns bigint
language plpgsql
as $$
declare
	n bigint;
	m bigint;
	o bigint;
begin
	delete from pgjob.limit_holds
	 where expires_at < clock_timestamp() - interval '1 minute';
	get diagnostics n = row_count;
	delete from pgjob.limit_keys k
	 where (not exists (select 1 from pgjob.limits l0
			where l0.queue = k.queue)
		or k.queue in (select l1.queue from pgjob.limits l1
			where l1.queue in (select distinct x.queue
				from pgjob.limit_keys x)
			for update skip locked))
	   and not exists (select 1 from pgjob.limits l where l.queue = k.queue
		and l.rate_per_key is not null
		and pgjob.bucket(k.tokens, k.tokens_at, clock_timestamp(),
			l.rate_per_key, l.rate_per_key_period_ms,
			coalesce(l.burst_per_key, l.rate_per_key))
		    < coalesce(l.burst_per_key, l.rate_per_key))
	   and not exists (select 1 from pgjob.jobs j
		where j.id = any(k.holders) and j.state = 'running'
		  and j.locked_until >= clock_timestamp());
	get diagnostics m = row_count;
	delete from pgjob.limits l where not l.paused
	   and l.paused_kinds = '{}' and l.global_concurrency is null
	   and l.per_key_concurrency is null and l.rate is null
	   and l.rate_per_key is null and not l.fair
	   and (l.throttled_until is null or l.throttled_until <= clock_timestamp());
	get diagnostics o = row_count;
	return n + m + o;
end
$$;
