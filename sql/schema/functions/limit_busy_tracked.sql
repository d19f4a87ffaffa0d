-- How many of q's jobs hold a lease at clk, for a claim of want more under
-- l.global_concurrency, and when the first of them ends: the bound while
-- it leaves room; else the holders as version 27 kept them; else (no
-- holders, or the bound used up) one count over the queue's unfinished
-- jobs, which decides which of the two the queue keeps.
create or replace function pgjob.limit_busy_tracked(l inout pgjob.limits,
	q text, want int, clk timestamptz, out busy int,
	out first_expiry timestamptz)
language plpgsql
-- Planned once, as the worker's session plans: under pgjob.claim_limited()'s
-- plan_cache_mode = auto, which its callees inherit, the look-up of the
-- holders by their ids was planned again at every call (62 µs, for a few
-- of work; version 45).
set plan_cache_mode = force_generic_plan
as $$
declare
	unfinished bigint;
begin
	if l.running_ub is not null
	   and l.running_ub + want <= l.global_concurrency then
		busy := l.running_ub;
		return;
	end if;
	if l.running_ub is not null or l.holders is null then
		select coalesce(array_agg(x.id) filter (where x.state = 'running'
				and x.locked_until >= clk), '{}'),
		       min(x.locked_until) filter (where x.state = 'running'
				and x.locked_until >= clk),
		       count(*)
		  into l.holders, first_expiry, unfinished
		  from pgjob.jobs x
		 where x.queue = q and x.finished_at is null
		   and coalesce(x.parents_left, 0) = 0;
		busy := cardinality(l.holders);
		l.busy_ub := busy;
		if l.global_concurrency - busy - want
		   >= greatest(1024, unfinished / 4) then
			l.running_ub := busy;
			l.holders := null;
		else
			l.running_ub := null;
		end if;
		return;
	end if;
	if cardinality(l.holders) + want <= l.global_concurrency
	   and cardinality(l.holders) < 2 * coalesce(l.busy_ub, 0) + 64 then
		busy := cardinality(l.holders);
		return;
	end if;
	select coalesce(array_agg(j.id), '{}'), min(j.locked_until)
	  into l.holders, first_expiry
	  from pgjob.jobs j
	 where j.id = any(l.holders) and j.state = 'running'
	   and j.locked_until >= clk and j.queue = q;
	busy := cardinality(l.holders);
	l.busy_ub := busy;
end
$$;
