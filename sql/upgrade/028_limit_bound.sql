-- pgjobd schema, version 28: a global_concurrency far from binding costs a
-- claim nothing but a counter.
--
-- Until now every claim of a queue with limits locked its pgjob.limits row
-- for the whole claim, and a global_concurrency kept the ids of the jobs
-- it let start (holders), rewritten by each claim and looked up by primary
-- key from time to time.  A limit that never binds cost a claim of 1,000
-- jobs about 8 ms of its 17 (the turn on the row, the array's rewrite and
-- its look-ups; docs/performance.md, "A limit far from binding"), and the
-- suite's "limits set, never binding" row ran at 0.69x the row without.
--
-- Now a queue whose limit is far from binding keeps an upper bound of its
-- running jobs instead (running_ub: the jobs running at the last count,
-- plus every job claimed since, plus every slot acquired since).  A claim
-- of such a queue (or of one without global_concurrency), with no key
-- limit, pause or throttle to keep and a rate's bucket holding at least
-- what it asks, reads the row without locking it, claims, and only at its
-- end adds what it took to the bound and takes its cost from the bucket
-- as the row stands then, in a subtransaction undone when the row no
-- longer admits it (the bound would pass the limit, the bucket holds too
-- little, or a pause, a throttle or new limits came meanwhile); the
-- worker then claims again, and that claim takes the row in turn.  Once the bound comes near the limit, a claim in turn
-- counts the queue's running jobs: far from the limit still (by at least
-- a quarter of the queue's unfinished jobs, and 1,024), the bound starts
-- again from that count; near it, the queue keeps holders as before
-- (pgjob.limit_busy_tracked()), until its limits are set again.
--
-- Exact whatever runs at once: every write of running_ub is made under
-- the row's lock, the unlocked claims' as increments checked against the
-- limit as the row stands then; a count in turn is made after the lock is
-- taken, so a claim still running is either in it (committed) or adds its
-- jobs after it (test_flow's test_global_bound_sql and
-- test_global_bound_concurrent).

alter table pgjob.limits add column running_ub int;

-- What an unlocked claim returns, kept until its bound is written.
create type pgjob.claim_row as (t text, id bigint, kind text, queue text,
	payload text, attempts int, max_attempts int, token bigint,
	ordering_key text, pr smallint, ra bigint, lost int, bytes bigint);

-- How many of q's jobs hold a lease at clk, for a claim of want more under
-- l.global_concurrency, and when the first of them ends: the bound while
-- it leaves room; else the holders as version 27 kept them; else (no
-- holders, or the bound used up) one count over the queue's unfinished
-- jobs, which decides which of the two the queue keeps.
create or replace function pgjob.limit_busy_tracked(l inout pgjob.limits,
	q text, want int, clk timestamptz, out busy int,
	out first_expiry timestamptz)
language plpgsql
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

-- The functions' texts rewritten in place, each piece refused unless
-- found as many times as expected.
create function pg_temp.rewrite(f text, pieces text[])
returns void
language plpgsql
as $$
declare
	def text;
	n int;
begin
	select pg_get_functiondef(p.oid) into def from pg_proc p
	  join pg_namespace s on s.oid = p.pronamespace
	 where s.nspname = 'pgjob' and p.proname = f;
	for i in 1 .. cardinality(pieces) / 3 loop
		n := (length(def) - length(replace(def, pieces[3 * i - 2], '')))
			/ length(pieces[3 * i - 2]);
		if n <> pieces[3 * i]::int then
			raise exception 'pgjob.%(): "%" found % times, not %', f,
				pieces[3 * i - 2], n, pieces[3 * i];
		end if;
		def := replace(def, pieces[3 * i - 2], pieces[3 * i - 1]);
	end loop;
	execute def;
end
$$;

-- A change of limits starts the count again.
select pg_temp.rewrite('apply_limits', array[
	'holders = null, busy_ub = null;',
	'holders = null, busy_ub = null, running_ub = null;', '1']);

-- A slot acquired counts against the bound at once: an unlocked claim
-- still running checks its jobs against the bound with the slot in it.
select pg_temp.rewrite('acquire_slot', array[
	'insert into pgjob.limit_holds (queue, key, holder, expires_at)',
	'update pgjob.limits x set running_ub = x.running_ub + 1
	 where x.queue = l.queue and x.running_ub is not null;
	insert into pgjob.limit_holds (queue, key, holder, expires_at)', '1']);

select pg_temp.rewrite('claim_limited', array[
	'l pgjob.limits;',
	'l pgjob.limits;
	fast boolean := false;
	pos0 bigint;
	crows pgjob.claim_row[];
	tids tid[];', '1',

	-- Each branch keeps where its candidates lie, in their order: an
	-- unlocked claim updates them by TID, as the daemon's claim does (no
	-- descent of jobs_pkey: 6.9 buffers a job, 9.0 by id).
	'coalesce(array_agg(a.cost), ''{}'')
			  into got, costs
			  from (select j.id, j.cost from pgjob.jobs j',
	'coalesce(array_agg(a.cost), ''{}''), array_agg(a.ctid)
			  into got, costs, tids
			  from (select j.id, j.cost, j.ctid from pgjob.jobs j', '1',
	'a.run_at, a.id), ''{}'')
			  into got, costs
',
	'a.run_at, a.id), ''{}''),
			       array_agg(a.ctid order by a.priority, a.run_at, a.id)
			  into got, costs, tids
', '1',
	'(array_agg(a.run_at))[count(*)::int]',
	'(array_agg(a.run_at))[count(*)::int], array_agg(a.ctid)', '1',
	'into got, costs, b, last_pr, last_id, last_ra',
	'into got, costs, b, last_pr, last_id, last_ra, tids', '1',
	'from (select j.id, j.cost, j.priority, j.run_at',
	'from (select j.id, j.cost, j.priority, j.run_at, j.ctid', '2',

	'perform set_config(''lock_timeout'', ''20ms'', true);',
	'-- Unlocked (schema 28) when nothing but a limit far from binding
	-- is to be kept: read here, written at the end.
	select * into l from pgjob.limits x where x.queue = q;
	if found and not l.paused
	   and (l.throttled_until is null or l.throttled_until <= clock_timestamp())
	   and want > 0 and (l.rate is null or pgjob.bucket(l.tokens,
		l.tokens_at, clock_timestamp(), l.rate, l.rate_period_ms,
		coalesce(l.burst, l.rate)) >= want)
	   and l.per_key_concurrency is null
	   and l.rate_per_key is null and not l.fair
	   and (l.global_concurrency is null or (l.running_ub is not null
		and l.running_ub + want <= l.global_concurrency)) then
		fast := true;
		pos0 := l.pos_id;
	end if;
	if not fast then
	perform set_config(''lock_timeout'', ''20ms'', true);', '1',

	'perform set_config(''lock_timeout'', ''0'', true);',
	'perform set_config(''lock_timeout'', ''0'', true);
	end if;', '1',

	'select * into kr from pgjob.limit_busy_tracked(l, q, allow + h, clk);',
	'if fast and l.running_ub + allow + h > l.global_concurrency then
			-- Slots held since the row was read: claim in turn.
			return query select ''w''::text, null::bigint, ''busy''::text, q,
				null::text, null::int, null::int, null::bigint, null::text,
				null::smallint, 1::bigint, null::int, null::bigint;
			return;
		end if;
		select * into kr from pgjob.limit_busy_tracked(l, q, allow + h, clk);', '1',

	'if l.holders is not null then',
	'l.running_ub := l.running_ub + cardinality(took);
		if l.holders is not null then', '2',

	'holders = l.holders, busy_ub = l.busy_ub',
	'holders = l.holders, busy_ub = l.busy_ub, running_ub = l.running_ub', '2',

	'ids := took;',
	'ids := took;
		if fast then
			-- The jobs first, the bound last: the row is locked only
			-- from here to the commit.  A bound that no longer admits
			-- them undoes their claim; the worker claims again.
			-- What the bucket let start: a prefix of the candidates.
			tids := coalesce(tids[1:cardinality(ids)], ''{}'');
			begin
				with u as (
					update pgjob.jobs j set state = ''running'',
						locked_by = holder,
						locked_until = clk + lease_ms * interval ''1 millisecond'',
						lease_token = j.lease_token + 1,
						attempts = j.attempts + 1,
						lost_attempts = j.lost_attempts
							+ case when j.state = ''running'' then 1 else 0 end,
						attempted_at = clk
					 where j.ctid = any(tids)
					returning j.id, j.kind, j.queue, j.payload::text as p,
						j.attempts, j.max_attempts, j.lease_token,
						j.ordering_key, j.lost_attempts, j.run_at)
				select coalesce(array_agg(row(''c'', u.id, u.kind, u.queue,
						case when octet_length(u.p) <= max_payload then u.p end,
						u.attempts, coalesce(u.max_attempts, 0), u.lease_token,
						u.ordering_key, null,
						(extract(epoch from now() - u.run_at) * 1000)::bigint,
						u.lost_attempts, octet_length(u.p))::pgjob.claim_row),
					''{}'')
				  into crows from u;
				if cardinality(ids) > 0 or l.pos_id is distinct from pos0 then
					update pgjob.limits x
					   set running_ub = x.running_ub + cardinality(ids),
					       tokens = case when x.rate is null then x.tokens
						else pgjob.bucket(x.tokens, x.tokens_at, clk,
							x.rate, x.rate_period_ms,
							coalesce(x.burst, x.rate)) - spent end,
					       tokens_at = case when x.rate is null
						then x.tokens_at
						else greatest(clk, x.tokens_at) end,
					       pos_pr = l.pos_pr, pos_ra = l.pos_ra,
					       pos_id = l.pos_id, pos_at = l.pos_at
					 where x.queue = q and not x.paused
					   and (x.throttled_until is null or x.throttled_until <= clk)
					   and x.rate is not distinct from l.rate
					   and x.rate_period_ms is not distinct from l.rate_period_ms
					   and x.burst is not distinct from l.burst
					   and (x.rate is null or pgjob.bucket(x.tokens,
						x.tokens_at, clk, x.rate, x.rate_period_ms,
						coalesce(x.burst, x.rate)) >= spent)
					   and x.per_key_concurrency is null
					   and x.rate_per_key is null and not x.fair
					   and x.paused_kinds = l.paused_kinds
					   and (x.global_concurrency is null
						or x.running_ub + cardinality(ids) + coalesce(h, 0)
						   <= x.global_concurrency);
					if not found then
						raise exception using errcode = ''PJ028'';
					end if;
				end if;
			exception when sqlstate ''PJ028'' then
				return query select ''w''::text, null::bigint, ''busy''::text,
					q, null::text, null::int, null::int, null::bigint,
					null::text, null::smallint, 1::bigint, null::int,
					null::bigint;
				return;
			end;
			return query select * from unnest(crows);
			if why is not null and cardinality(ids) < want then
				-- Fewer than asked: the bucket had no more.
				return query select ''w''::text, null::bigint, why, q,
					null::text, null::int, null::int, null::bigint,
					null::text, null::smallint, wait_ms, null::int,
					null::bigint;
			end if;
			return;
		end if;', '1']);
