-- pgjobd schema, version 18: a limited claim says how long each job waited.
--
-- The daemon records each claimed job's time in its queue (now() less
-- run_at, the wait histogram of docs/metrics.md).  The ordinary claim
-- returns it; pgjob.claim_limited() did not, so the daemon's call looked
-- each claimed job up again by primary key after the function returned:
-- 1,000 index lookups per claim of 1,000, 1.3 ms of a 12.5 ms claim
-- (pg_stat_statements with track = all, 200,000 no-op jobs, 2 workers,
-- limits that never bind).  The function now returns it in c_ra of its 'c'
-- rows, from the row it already holds; c_ra keeps its meaning on 'w' rows
-- (in how many ms to look again).  A pgjobd older than this version reads
-- no c_ra on 'c' rows, so it is unaffected.  Only the two 'c' queries
-- changed; the rest is version 10's function as it was.

-- The claim of a limited queue: up to want jobs of q, of the kinds given, in
-- mode queue_mode, under every limit of q's row.  Rows as the daemon's
-- claim returns them ('c', the job's columns; c_ra, the ms it waited since
-- its run_at), then at most one more:
--   'u'  q has no row any more: claim it the ordinary way
--   'w'  fewer than want were claimed because of a limit; c_kind names it
--        (paused, throttled, concurrency, rate, key_concurrency, key_rate,
--        busy: another claimer held the row too long), c_ra says in how
--        many ms to look again (null: when something ends, or at the next
--        poll).
-- Claims of one limited queue take turns on its row: each waits at most
-- 20 ms for it (an application's pgjob.take_rate() may hold it longer),
-- then answers busy rather than hold up its worker's pipeline.  Every
-- statement after the lock sees what the claimers before committed (read
-- committed takes a new snapshot per statement), so counts are exact.
create or replace function pgjob.claim_limited(q text, want int, kinds text[],
	queue_mode text, holder text, lease_ms bigint, max_payload bigint)
returns table (c_t text, c_id bigint, c_kind text, c_queue text,
	c_payload text, c_attempts int, c_max_attempts int, c_token bigint,
	c_ordering_key text, c_pr smallint, c_ra bigint, c_lost int,
	c_bytes bigint)
language plpgsql
-- The worker's session forces generic plans (its own statements do not
-- depend on their parameters); these do: a generic plan of the candidate
-- scan sorted the whole queue.
set plan_cache_mode = auto
as $$
declare
	l pgjob.limits;
	clk timestamptz;
	allow int := want;
	b int;
	h int;
	hx timestamptz;
	fx timestamptz;
	cap int;
	tok float8;
	kcap int;
	ids bigint[] := '{}';
	got bigint[];
	costs int[];
	took bigint[];
	spent bigint;
	next_cost int;
	why text;
	wait_ms bigint;
	tcap boolean := false;
	keyed boolean;
	cur text;
	k text;
	visits int := 0;
	wraps int := 0;
	room int;
	kr record;
	r record;
	n int;
	from_head boolean;
	last_pr smallint;
	last_ra timestamptz;
	last_id bigint;
begin
	perform set_config('lock_timeout', '20ms', true);
	begin
		select * into l from pgjob.limits x where x.queue = q for update;
	exception when lock_not_available then
		return query select 'w'::text, null::bigint, 'busy'::text, q,
			null::text, null::int, null::int, null::bigint, null::text,
			null::smallint, 1::bigint, null::int, null::bigint;
		return;
	end;
	perform set_config('lock_timeout', '0', true);
	if l.queue is null then
		return query select 'u'::text, null::bigint, null::text, q,
			null::text, null::int, null::int, null::bigint, null::text,
			null::smallint, null::bigint, null::int, null::bigint;
		return;
	end if;
	clk := clock_timestamp();
	if l.paused then
		why := 'paused';
		allow := 0;
	elsif l.throttled_until > clk then
		why := 'throttled';
		wait_ms := ceil(extract(epoch from l.throttled_until - clk) * 1000)::bigint;
		allow := 0;
	end if;
	if allow > 0 and l.global_concurrency is not null then
		select count(*), min(z.expires_at) into h, hx
		  from pgjob.limit_holds z
		 where z.queue = q and z.expires_at >= clk;
		select * into kr from pgjob.limit_busy_tracked(l, q, allow + h, clk);
		l := kr.l;
		b := kr.busy;
		fx := least(kr.first_expiry, hx);
		if l.global_concurrency - b - h < allow then
			allow := greatest(l.global_concurrency - b - h, 0);
			why := 'concurrency';
			wait_ms := ceil(extract(epoch from fx - clk) * 1000)::bigint + 1;
		end if;
	end if;
	if l.rate is not null then
		cap := coalesce(l.burst, l.rate);
		tok := pgjob.bucket(l.tokens, l.tokens_at, clk, l.rate,
			l.rate_period_ms, cap);
	end if;
	-- No more candidates than the bucket can pay for (every one locked
	-- is a WAL record): costs are 1 or more, but for cost 0, which waits
	-- for a token like the others.
	if allow > 0 and tok is not null and tok < 1 then
		allow := 0;
		why := 'rate';
		wait_ms := pgjob.bucket_wait(tok, 1, l.rate, l.rate_period_ms);
	elsif allow > 0 and tok is not null and floor(tok) < allow then
		allow := greatest(floor(tok)::int, 1);
		tcap := true;
	end if;
	kcap := coalesce(l.burst_per_key, l.rate_per_key);
	keyed := (l.per_key_concurrency is not null or l.rate_per_key is not null
		  or l.fair) and queue_mode <> 'serial';
	cur := l.key_cursor;

	if allow <= 0 then
		null;
	elsif not keyed then
		-- Jobs whose lease expired first (their worker died), then due
		-- jobs in the queue's order; each with its cost.
		select coalesce(array_agg(e.id), '{}'), coalesce(array_agg(e.cost), '{}')
		  into got, costs
		  from (select x.id, x.cost from pgjob.jobs x
			where x.queue = q and x.state = 'running'
			  and x.locked_until < clk and x.kind = any(kinds)
			  and x.kind <> all(l.paused_kinds)
			limit allow for update skip locked) e;
		n := allow - cardinality(got);
		if n > 0 and queue_mode = 'serial' then
			select got || coalesce(array_agg(a.id), '{}'),
			       costs || coalesce(array_agg(a.cost), '{}')
			  into got, costs
			  from (select j.id, j.cost from pgjob.jobs j
				where j.id = (select min(h.id) from pgjob.jobs h
					where h.queue = q and h.state = 'available')
				  and j.state = 'available' and j.run_at <= clk
				  and j.kind = any(kinds) and j.kind <> all(l.paused_kinds)
				  and not exists (select 1 from pgjob.jobs o
					where o.queue = q and o.state = 'running'
					  and o.id < j.id)
				for update skip locked) a;
		elsif n > 0 and queue_mode = 'per_key' then
			select got || coalesce(array_agg(a.id order by a.priority,
					a.run_at, a.id), '{}'),
			       costs || coalesce(array_agg(a.cost order by a.priority,
					a.run_at, a.id), '{}')
			  into got, costs
			  from (select j.id, j.cost, j.priority, j.run_at
				from pgjob.jobs j
				where j.queue = q and j.state = 'available'
				  and j.run_at <= clk and j.kind = any(kinds)
				  and j.kind <> all(l.paused_kinds)
				  and (j.ordering_key is null or not exists (
					select 1 from pgjob.jobs o where o.queue = q
					   and o.ordering_key = j.ordering_key
					   and o.id < j.id
					   and o.state in ('available', 'running')))
				order by j.priority, j.run_at, j.id
				limit n for update skip locked) a;
		elsif n > 0 then
			-- From where the last full claim stopped, as the ordinary
			-- claim does (a snapshot held open elsewhere keeps the
			-- entries of claimed jobs in the index), and from the head
			-- once a second.
			from_head := l.pos_id is null or l.pos_at is null
				or l.pos_at < clk - interval '1 second';
			-- The aggregates read the rows in the scan's order (no
			-- sort of their own: the subquery's order is kept), so
			-- the last elements are where the claim stopped.
			select got || coalesce(array_agg(a.id), '{}'),
			       costs || coalesce(array_agg(a.cost), '{}'),
			       count(*), (array_agg(a.priority))[count(*)::int],
			       (array_agg(a.id))[count(*)::int],
			       (array_agg(a.run_at))[count(*)::int]
			  into got, costs, b, last_pr, last_id, last_ra
			  from (select j.id, j.cost, j.priority, j.run_at
				from pgjob.jobs j
				where j.queue = q and j.state = 'available'
				  and j.run_at <= clk and j.kind = any(kinds)
				  and j.kind <> all(l.paused_kinds)
				  and (j.priority, j.run_at, j.id) > (
					case when from_head then (-32768)::smallint
						else l.pos_pr end,
					case when from_head then '-infinity'::timestamptz
						else l.pos_ra end,
					case when from_head then (-9223372036854775807)::bigint
						else l.pos_id end)
				order by j.priority, j.run_at, j.id
				limit n for update skip locked) a;
			if b >= n then
				l.pos_pr := last_pr;
				l.pos_ra := last_ra;
				l.pos_id := last_id;
				if from_head then
					l.pos_at := clk;
				end if;
			else
				l.pos_id := null;
			end if;
		end if;
		-- The longest prefix whose cost fits in the bucket.
		took := got;
		spent := 0;
		if tok is not null and tok >= (select sum(c) from unnest(costs) c) then
			-- All of them fit: no need to go one by one.
			spent := coalesce((select sum(c) from unnest(costs) c), 0);
			tok := tok - spent;
		elsif tok is not null then
			n := 0;
			for i in 1 .. coalesce(cardinality(got), 0) loop
				exit when spent + costs[i] > tok
					and not (i = 1 and tok >= least(costs[i], cap));
				spent := spent + costs[i];
				n := i;
			end loop;
			if n < cardinality(got) then
				took := got[1:n];
				why := 'rate';
				wait_ms := pgjob.bucket_wait(tok - spent,
					least(costs[n + 1], cap), l.rate, l.rate_period_ms);
			end if;
			tok := tok - spent;
		end if;
		ids := took;
		if l.holders is not null then
			l.holders := l.holders || took;
		end if;
		l.busy_ub := l.busy_ub + cardinality(took);
		update pgjob.limits x set tokens = coalesce(tok, x.tokens),
			tokens_at = case when tok is null then x.tokens_at else clk end,
			holders = l.holders, busy_ub = l.busy_ub,
			pos_pr = l.pos_pr, pos_ra = l.pos_ra, pos_id = l.pos_id,
			pos_at = l.pos_at
		 where x.queue = q;
		return query with u as (
			update pgjob.jobs j set state = 'running', locked_by = holder,
				locked_until = clk + lease_ms * interval '1 millisecond',
				lease_token = j.lease_token + 1, attempts = j.attempts + 1,
				lost_attempts = j.lost_attempts
					+ case when j.state = 'running' then 1 else 0 end,
				attempted_at = clk
			 where j.id = any(ids)
			returning j.id, j.kind, j.queue, j.payload::text as p,
				j.attempts, j.max_attempts, j.lease_token,
				j.ordering_key, j.lost_attempts, j.run_at)
			select 'c'::text, u.id, u.kind, u.queue,
				case when octet_length(u.p) <= max_payload then u.p end,
				u.attempts, coalesce(u.max_attempts, 0), u.lease_token,
				u.ordering_key, null::smallint,
				(extract(epoch from now() - u.run_at) * 1000)::bigint,
				u.lost_attempts, octet_length(u.p)::bigint
			  from u;
		if l.throttled_until is not null then
			perform pgjob.limits_tidy_throttle(q, clk);
		end if;
		if tcap and why is null and cardinality(ids) < want then
			-- Fewer than asked because the bucket had no more: the
			-- queue is not drained, the worker comes back for more.
			why := 'rate';
			wait_ms := pgjob.bucket_wait(tok, 1, l.rate, l.rate_period_ms);
		end if;
		if why is not null and cardinality(ids) < want then
			return query select 'w'::text, null::bigint, why, q, null::text,
				null::int, null::int, null::bigint, null::text,
				null::smallint, wait_ms, null::int, null::bigint;
		end if;
		return;
	else
		-- Key by key.  Restarts first, each within its key's limits.
		for r in select x.id, case when x.limit_key is not null
				or x.ordering_key is not null
				then coalesce(x.limit_key, x.ordering_key) end as k
			from pgjob.jobs x
			where x.queue = q and x.state = 'running'
			  and x.locked_until < clk and x.kind = any(kinds)
			  and x.kind <> all(l.paused_kinds)
			limit allow for update skip locked loop
			exit when cardinality(ids) >= allow;
			select * into kr from pgjob.key_room(l, r.k, clk);
			continue when kr.room <= 0;
			select * into took, spent, next_cost
			  from pgjob.take_prefix(array[r.id], tok, cap, kr.ktok, kcap);
			continue when cardinality(took) = 0;
			perform pgjob.claim_ids(took, holder, lease_ms, clk);
			ids := ids || took;
			l.busy_ub := l.busy_ub + cardinality(took);
			if l.holders is not null then
				l.holders := l.holders || took;
			end if;
			tok := tok - spent;
			if kr.ktok is not null then
				insert into pgjob.limit_keys as lk
				values (q, r.k, kr.ktok - spent, clk)
				on conflict on constraint limit_keys_pkey do update
				   set tokens = excluded.tokens, tokens_at = excluded.tokens_at;
			end if;
		end loop;
		-- Then the keys in turn, from where the last claim stopped: the
		-- keys in order, then the jobs without a key, and round again.
		-- Each turn gives a key up to its weight (fair) or what its
		-- limits leave; a key with a huge backlog waits for its turn
		-- like the others.
		while cardinality(ids) < allow and visits < allow + 32 and wraps < 2 loop
			visits := visits + 1;
			if tok is not null and tok < 1 then
				why := 'rate';
				wait_ms := pgjob.bucket_wait(tok, 1, l.rate, l.rate_period_ms);
				exit;
			end if;
			-- The next key: one probe of jobs_limit_key_idx (the two
			-- cases apart, so that the bound is an index condition).
			if cur is null then
				k := (select min(coalesce(j.limit_key, j.ordering_key))
					from pgjob.jobs j
					where j.queue = q and j.state = 'available'
					 and (j.limit_key is not null or j.ordering_key is not null));
			else
				k := (select min(coalesce(j.limit_key, j.ordering_key))
					from pgjob.jobs j
					where j.queue = q and j.state = 'available'
					 and (j.limit_key is not null or j.ordering_key is not null)
					 and coalesce(j.limit_key, j.ordering_key) > cur);
			end if;
			room := allow - cardinality(ids);
			if l.fair then
				room := least(room, coalesce((select w.weight
					from pgjob.limit_weights w where w.queue = q
					 and w.key = coalesce(k, '')), 1));
			end if;
			select * into kr from pgjob.key_room(l, k, clk);
			if kr.room <= 0 then
				why := coalesce(why, kr.why);
				wait_ms := least(wait_ms, kr.wait_ms);
				cur := k;
				continue;
			end if;
			room := least(room, kr.room);
			if tok is not null then
				room := least(room, greatest(floor(tok)::int, 1));
			end if;
			if kr.ktok is not null then
				room := least(room, greatest(floor(kr.ktok)::int, 1));
			end if;
			if k is null then
				-- Past the last key: the jobs without one, from among
				-- the first 256 due jobs of the queue.  No index
				-- holds keyless jobs apart (every queue would pay for
				-- it), and a scan past a backlog of keyed jobs would
				-- read all of them (docs/queues.md).
				got := array(select j.id from pgjob.jobs j
					where j.id = any(array(select h.id from pgjob.jobs h
						where h.queue = q and h.state = 'available'
						  and h.run_at <= clk
						order by h.priority, h.run_at, h.id limit 256))
					  and j.state = 'available'
					  and j.limit_key is null and j.ordering_key is null
					  and j.kind = any(kinds)
					  and j.kind <> all(l.paused_kinds)
					order by j.priority, j.run_at, j.id
					limit room for update skip locked);
				wraps := wraps + 1;
			else
				got := array(select j.id from pgjob.jobs j
					where j.queue = q and j.state = 'available'
					  and (j.limit_key is not null or j.ordering_key is not null)
					  and coalesce(j.limit_key, j.ordering_key) = k
					  and j.run_at <= clk and j.kind = any(kinds)
					  and j.kind <> all(l.paused_kinds)
					  and (queue_mode <> 'per_key' or j.ordering_key is null
					   or not exists (select 1 from pgjob.jobs o
						where o.queue = q and o.ordering_key = j.ordering_key
						  and o.id < j.id
						  and o.state in ('available', 'running')))
					order by j.priority, j.run_at, j.id
					limit room for update skip locked);
			end if;
			cur := k;
			select * into took, spent, next_cost
			  from pgjob.take_prefix(got, tok, cap, kr.ktok, kcap);
			if cardinality(took) < cardinality(got) then
				why := case when tok is not null
					and tok - spent < least(next_cost, cap)
					then 'rate' else 'key_rate' end;
			end if;
			continue when cardinality(took) = 0;
			perform pgjob.claim_ids(took, holder, lease_ms, clk);
			ids := ids || took;
			l.busy_ub := l.busy_ub + cardinality(took);
			if l.holders is not null then
				l.holders := l.holders || took;
			end if;
			tok := tok - spent;
			if kr.ktok is not null then
				insert into pgjob.limit_keys as lk
				values (q, k, kr.ktok - spent, clk)
				on conflict on constraint limit_keys_pkey do update
				   set tokens = excluded.tokens, tokens_at = excluded.tokens_at;
			end if;
		end loop;
		if cardinality(ids) < allow and visits >= allow + 32 then
			-- Keys left unvisited may have room: come back soon.
			why := coalesce(why, 'key_concurrency');
			wait_ms := 1;
		end if;
	end if;

	update pgjob.limits x set tokens = coalesce(tok, x.tokens),
		tokens_at = case when tok is null then x.tokens_at else clk end,
		key_cursor = case when keyed then cur else x.key_cursor end,
		holders = l.holders, busy_ub = l.busy_ub
	 where x.queue = q;
	if l.throttled_until is not null then
		perform pgjob.limits_tidy_throttle(q, clk);
	end if;
	if tcap and why is null and cardinality(ids) < want then
		why := 'rate';
		wait_ms := pgjob.bucket_wait(tok, 1, l.rate, l.rate_period_ms);
	end if;
	return query select 'c'::text, j.id, j.kind, j.queue,
		case when octet_length(p.t) <= max_payload then p.t end,
		j.attempts, coalesce(j.max_attempts, 0), j.lease_token,
		j.ordering_key, null::smallint,
		(extract(epoch from now() - j.run_at) * 1000)::bigint, j.lost_attempts,
		octet_length(p.t)::bigint
	  from pgjob.jobs j cross join lateral (select j.payload::text as t) p
	 where j.id = any(ids);
	if why is not null and cardinality(ids) < want then
		return query select 'w'::text, null::bigint, why, q, null::text,
			null::int, null::int, null::bigint, null::text, null::smallint,
			wait_ms, null::int, null::bigint;
	end if;
end
$$;
