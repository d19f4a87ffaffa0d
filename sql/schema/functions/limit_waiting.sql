-- What holds q's due jobs back now, for /metrics: due jobs counted under the
-- first limit that binds (paused, throttled, concurrency, rate; per key,
-- the due jobs whose key is at its per_key_concurrency), and the tokens
-- left (null: no rate).  All zero for a queue without a row.
create or replace function pgjob.limit_waiting(
	q text,
	out paused bigint,
	out throttled bigint,
	out concurrency bigint,
	out rate bigint,
	out key_concurrency bigint,
	out tokens double precision)
returns record
language plpgsql
stable
as $$
declare
	l pgjob.limits;
	clk timestamptz := clock_timestamp();
	due bigint;
	b int;
begin
	paused := 0; throttled := 0; concurrency := 0; rate := 0;
	key_concurrency := 0;
	select * into l from pgjob.limits x where x.queue = q;
	if not found then
		return;
	end if;
	if l.rate is not null then
		tokens := pgjob.bucket(l.tokens, l.tokens_at, clk, l.rate,
			l.rate_period_ms, coalesce(l.burst, l.rate));
	end if;
	select count(*), count(*) filter (where j.kind = any(l.paused_kinds))
	  into due, paused
	  from pgjob.jobs j
	 where j.queue = q and j.finished_at is null and coalesce(j.parents_left, 0) = 0 and j.state = 'available' and j.run_at <= clk;
	due := due - paused;
	if l.paused then
		paused := paused + due;
	elsif l.throttled_until > clk then
		throttled := due;
	elsif l.global_concurrency is not null
	      and (select x.busy from pgjob.limit_busy(q, null, clk) x)
		  >= l.global_concurrency then
		concurrency := due;
	elsif tokens is not null and tokens < 1 then
		rate := due;
	elsif l.per_key_concurrency is not null then
		select count(*) into key_concurrency from pgjob.jobs j
		 where j.queue = q and j.finished_at is null and coalesce(j.parents_left, 0) = 0 and j.state = 'available' and j.run_at <= clk
		   and j.kind <> all(l.paused_kinds)
		   and (j.limit_key is not null or j.ordering_key is not null)
		   and coalesce(j.limit_key, j.ordering_key) in (
			select coalesce(r.limit_key, r.ordering_key)
			  from pgjob.jobs r
			 where r.queue = q and r.finished_at is null and coalesce(r.parents_left, 0) = 0 and r.state = 'running'
			   and r.locked_until >= clk
			   and (r.limit_key is not null or r.ordering_key is not null)
			 group by 1 having count(*) >= l.per_key_concurrency);
	end if;
end
$$;
