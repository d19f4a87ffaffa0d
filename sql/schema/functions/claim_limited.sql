-- pgjob.claim_limited() as versions 18, 21 and 25 left it, with its
-- expired-lease scans gone (a scan of the running jobs would read the
-- whole backlog now): an expired lease is taken where it stands in the
-- queue's order, in place, as the daemon's claim does.
--
-- A queue whose global_concurrency is far from binding keeps an upper
-- bound of its running jobs (limits.running_ub: the jobs running at the
-- last count, plus every job claimed since, plus every slot acquired
-- since), version 28.  A claim of such a queue (or of one without
-- global_concurrency), with no key limit, pause or throttle to keep and a
-- rate's bucket holding at least what it asks, reads the row without
-- locking it, picks its jobs, and before it writes them running adds them
-- to the bound and takes their cost from the bucket as the row stands
-- then; when the row no longer admits them it writes none, and the worker
-- claims again, and that claim takes the row in turn (version 50: until
-- then it wrote the jobs first and undid them in a subtransaction).  Once
-- the bound comes near the limit, a claim in turn counts the queue's
-- running jobs:
-- far from the limit still, the bound starts again from that count; near
-- it, the queue keeps holders as before (pgjob.limit_busy_tracked()).
-- Exact whatever runs at once: every write of running_ub is made under the
-- row's lock, the unlocked claims' as increments checked against the limit
-- as the row stands then (test_flow's test_global_bound_sql and
-- test_global_bound_concurrent).  So is the bucket, in the jobs' own start
-- times: an unlocked claim spends only if its clock (its jobs'
-- attempted_at) is not older than the bucket's last spend (tokens_at),
-- so that spends are charged in the order of their starts; until version
-- 34 it charged an older clock's spend at the newer time, and a loaded
-- machine saw starts of 1.006 times the bucket's allowance over a stretch
-- (test_flow's test_rate).
--
-- (This text is the catalog's: version 28 edited version 27's in place.)
--
-- Planned once per session (version 48): force_generic_plan, as the
-- worker's session and this function's callees have it.  Until then it
-- ran under plan_cache_mode = auto, because a generic plan of version
-- 18's candidate scan sorted the whole queue; the scans read
-- jobs_claim_idx in the claim's order since version 27, and auto chose a
-- custom plan at every call: 107 us of planning in a 520 us claim of four
-- jobs (global_concurrency 4; test_plans' test_limited_claim_plans_once
-- checks the generic plans on misleading statistics).
create or replace function pgjob.claim_limited(
	q text,
	want integer,
	kinds text[],
	queue_mode text,
	holder text,
	lease_ms bigint,
	max_payload bigint)
returns table(c_t text, c_id bigint, c_kind text, c_queue text,
	c_payload text, c_attempts integer, c_max_attempts integer,
	c_token bigint, c_ordering_key text, c_pr smallint, c_ra bigint,
	c_lost integer, c_bytes bigint)
language plpgsql
set plan_cache_mode to 'force_generic_plan'
as $$
declare
	l pgjob.limits;
	fast boolean := false;
	pos0 bigint;
	crows pgjob.claim_row[];
	tids tid[];
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
	-- The keyed jobs taken and not yet written running (claim_ids()).
	pending bigint[] := '{}';
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
	ktaken int;
	prior int;
	kw int;
	k text;
	visits int := 0;
	wraps int := 0;
	room int;
	kr record;
	-- A key's room in the key-by-key claim (pgjob.key_room()'s out
	-- parameters), and the keys' busy counts read a chunk at a time
	-- (version 51): keys, busy, first expiry, the position in them, the
	-- key visited last, whether the chunk was full, and whether the key
	-- was in it.
	kroom int;
	kktok float8;
	kwhy text;
	kwait bigint;
	usemap boolean;
	mk text[];
	mb int[];
	mf timestamptz[];
	mp int := 1;
	mlast text;
	mfull boolean;
	mhit boolean;
	csz int;
	r record;
	n int;
	from_head boolean;
	last_pr smallint;
	last_ra timestamptz;
	last_id bigint;
begin
	-- Unlocked (schema 28) when nothing but a limit far from binding
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
	perform set_config('lock_timeout', '20ms', true);
	-- The queue's claims take turns on a transaction's advisory lock
	-- (class "pgjl", the queue's hash), waited for in a subtransaction
	-- that a timeout undoes; the row is then locked by the transaction
	-- itself, which the claim's writes of the row are made by.  Until
	-- version 50 the row was locked in that subtransaction: a row locked
	-- by one transaction id and updated by another (the subtransaction's
	-- parent) gets a MultiXact, one a claim in turn, which cost a claim
	-- ~50 us and used up MultiXact ids at the rate of the claims
	-- (test_flow's test_claims_use_no_multixacts).
	begin
		perform pg_advisory_xact_lock(1885825644, hashtext(q));
	exception when lock_not_available then
		return query select 'w'::text, null::bigint, 'busy'::text, q,
			null::text, null::int, null::int, null::bigint, null::text,
			null::smallint, 1::bigint, null::int, null::bigint;
		return;
	end;
	select * into l from pgjob.limits x where x.queue = q
	   for update skip locked;
	if not found then
		-- Held by a writer that is not a claim in turn (an unlocked
		-- claim's end, pgjob.acquire_slot(), a change of the limits),
		-- or no row: waited for as before, the MultiXact and all.
		begin
			select * into l from pgjob.limits x where x.queue = q
			   for update;
		exception when lock_not_available then
			return query select 'w'::text, null::bigint, 'busy'::text,
				q, null::text, null::int, null::int, null::bigint,
				null::text, null::smallint, 1::bigint, null::int,
				null::bigint;
			return;
		end;
	end if;
	perform set_config('lock_timeout', '0', true);
	end if;
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
		if fast and l.running_ub + allow + h > l.global_concurrency then
			-- Slots held since the row was read: claim in turn.
			return query select 'w'::text, null::bigint, 'busy'::text, q,
				null::text, null::int, null::int, null::bigint, null::text,
				null::smallint, 1::bigint, null::int, null::bigint;
			return;
		end if;
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
	usemap := keyed and l.per_key_concurrency is not null
		and l.rate_per_key is null;
	-- A fair key's turn that a claim's own size cut short (a claim of one
	-- or two jobs, as a binding global_concurrency or a worker with one
	-- free slot makes) goes on in the next claim: key_taken is what the
	-- key at the cursor has had of its weight so far (version 38; before,
	-- each claim gave it at most what it asked, and a key of weight 3 got
	-- one job a turn as a key of weight 1 did).
	ktaken := case when l.fair and cur is not null
		then coalesce(l.key_taken, 0) else 0 end;

	if allow <= 0 then
		null;
	elsif not keyed then
		-- Due jobs in the queue's order, each with its cost; a job
		-- whose lease expired (its worker died) where it stands in
		-- that order (schema 27: no index holds running jobs apart).
		got := '{}';
		costs := '{}';
		n := allow;
		if n > 0 and queue_mode = 'serial' then
			select got || coalesce(array_agg(a.id), '{}'),
			       costs || coalesce(array_agg(a.cost), '{}'), array_agg(a.ctid)
			  into got, costs, tids
			  from (select j.id, j.cost, j.ctid from pgjob.jobs j
				where j.id = (select min(h.id) from pgjob.jobs h
					where h.queue = q and h.finished_at is null
					  and coalesce(h.parents_left, 0) = 0
					  and h.created_at is not null)
				  and (j.state = 'available' or j.locked_until < clk)
				  and j.run_at <= clk
				  and j.kind = any(kinds) and j.kind <> all(l.paused_kinds)
				for update skip locked) a;
		elsif n > 0 and queue_mode = 'per_key' then
			select got || coalesce(array_agg(a.id order by a.priority,
					a.run_at, a.id), '{}'),
			       costs || coalesce(array_agg(a.cost order by a.priority,
					a.run_at, a.id), '{}'),
			       array_agg(a.ctid order by a.priority, a.run_at, a.id)
			  into got, costs, tids
			  from (select j.id, j.cost, j.priority, j.run_at, j.ctid
				from pgjob.jobs j
				where j.queue = q and j.finished_at is null
				  and coalesce(j.parents_left, 0) = 0
				  and (j.state = 'available' or j.locked_until < clk)
				  and j.run_at <= clk and j.kind = any(kinds)
				  and j.kind <> all(l.paused_kinds)
				  and (j.ordering_key is null or not exists (
					select 1 from pgjob.jobs o where o.queue = q
					   and o.ordering_key = j.ordering_key
					   and o.id < j.id
					   and o.finished_at is null
					   and coalesce(o.parents_left, 0) = 0))
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
			       (array_agg(a.run_at))[count(*)::int], array_agg(a.ctid)
			  into got, costs, b, last_pr, last_id, last_ra, tids
			  from (select j.id, j.cost, j.priority, j.run_at, j.ctid
				from pgjob.jobs j
				where j.queue = q and j.finished_at is null
				  and coalesce(j.parents_left, 0) = 0
				  and (j.state = 'available' or j.locked_until < clk)
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
		if fast then
			-- The bound first, then the jobs: a bound that no longer
			-- admits them (the row as it stands now, once any writer
			-- of it has committed) leaves them unclaimed, and the
			-- worker claims again.  Until version 50 the jobs were
			-- written first and undone in a subtransaction when the
			-- bound refused them, so that the row was locked for less
			-- time; but the jobs' rows, locked by the candidate scan
			-- above in the transaction and updated in the
			-- subtransaction, got a MultiXact at every claim
			-- (test_flow's test_claims_use_no_multixacts).
			-- What the bucket let start: a prefix of the candidates.
			tids := coalesce(tids[1:cardinality(ids)], '{}');
			if cardinality(ids) > 0 or l.pos_id is distinct from pos0 then
				update pgjob.limits x
				   set running_ub = x.running_ub + cardinality(ids),
				       tokens = case when x.rate is null then x.tokens
					else pgjob.bucket(x.tokens, x.tokens_at, clk,
						x.rate, x.rate_period_ms,
						coalesce(x.burst, x.rate)) - spent end,
				       tokens_at = case when x.rate is null
					then x.tokens_at else clk end,
				       pos_pr = l.pos_pr, pos_ra = l.pos_ra,
				       pos_id = l.pos_id, pos_at = l.pos_at
				 where x.queue = q and not x.paused
				   and (x.throttled_until is null or x.throttled_until <= clk)
				   and x.rate is not distinct from l.rate
				   and x.rate_period_ms is not distinct from l.rate_period_ms
				   and x.burst is not distinct from l.burst
				   and (x.rate is null or (coalesce(x.tokens_at
					<= clk, true) and pgjob.bucket(x.tokens, x.tokens_at, clk,
					x.rate, x.rate_period_ms,
					coalesce(x.burst, x.rate)) >= spent))
				   and x.per_key_concurrency is null
				   and x.rate_per_key is null and not x.fair
				   and x.paused_kinds = l.paused_kinds
				   and (x.global_concurrency is null
					or x.running_ub + cardinality(ids) + coalesce(h, 0)
					   <= x.global_concurrency);
				if not found then
					return query select 'w'::text, null::bigint,
						'busy'::text, q, null::text, null::int,
						null::int, null::bigint, null::text,
						null::smallint, 1::bigint, null::int,
						null::bigint;
					return;
				end if;
			end if;
			crows := pgjob.claim_write(tids, null, holder, lease_ms, clk,
				max_payload);
			return query select * from unnest(crows);
			if why is not null and cardinality(ids) < want then
				-- Fewer than asked: the bucket had no more.
				return query select 'w'::text, null::bigint, why, q,
					null::text, null::int, null::int, null::bigint,
					null::text, null::smallint, wait_ms, null::int,
					null::bigint;
			end if;
			return;
		end if;
		l.running_ub := l.running_ub + cardinality(took);
		if l.holders is not null then
			l.holders := l.holders || took;
		end if;
		update pgjob.limits x set tokens = coalesce(tok, x.tokens),
			tokens_at = case when tok is null then x.tokens_at else clk end,
			holders = l.holders, busy_ub = l.busy_ub, running_ub = l.running_ub,
			pos_pr = l.pos_pr, pos_ra = l.pos_ra, pos_id = l.pos_id,
			pos_at = l.pos_at
		 where x.queue = q;
		return query select * from unnest(pgjob.claim_write(null, ids,
			holder, lease_ms, clk, max_payload));
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
		-- Key by key; a job whose lease expired is taken in its key's
		-- turn (pgjob.key_candidates(), schema 27).
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
					where j.queue = q and j.finished_at is null
					 and coalesce(j.parents_left, 0) = 0
					 and (j.state = 'available' or j.locked_until < clk)
					 and (j.limit_key is not null or j.ordering_key is not null)
					 and j.cost is not null);
			elsif ktaken > 0 then
				-- The key at the cursor, its turn not over.
				k := (select min(coalesce(j.limit_key, j.ordering_key))
					from pgjob.jobs j
					where j.queue = q and j.finished_at is null
					 and coalesce(j.parents_left, 0) = 0
					 and (j.state = 'available' or j.locked_until < clk)
					 and (j.limit_key is not null or j.ordering_key is not null)
					 and j.cost is not null
					 and coalesce(j.limit_key, j.ordering_key) >= cur);
			else
				k := (select min(coalesce(j.limit_key, j.ordering_key))
					from pgjob.jobs j
					where j.queue = q and j.finished_at is null
					 and coalesce(j.parents_left, 0) = 0
					 and (j.state = 'available' or j.locked_until < clk)
					 and (j.limit_key is not null or j.ordering_key is not null)
					 and j.cost is not null
					 and coalesce(j.limit_key, j.ordering_key) > cur);
			end if;
			-- What the key has had of this turn already (0 but for
			-- the key a claim's size cut short).
			prior := case when k = cur then ktaken else 0 end;
			ktaken := 0;
			room := allow - cardinality(ids);
			if l.fair then
				kw := coalesce((select w.weight
					from pgjob.limit_weights w where w.queue = q
					 and w.key = coalesce(k, '')), 1);
				-- (A weight lowered below what the turn has had
				-- yet: one more job, and the turn ends.)
				room := least(room, greatest(kw - prior, 1));
			end if;
			-- The key's room.  With per_key_concurrency alone (no
			-- rate_per_key), from the keys' busy counts read a chunk
			-- of keys at a time, in one statement (version 51): the
			-- same counts as pgjob.key_busy()'s, from the same rows
			-- (the key's holders in pgjob.limit_keys, each looked up
			-- by primary key, and its application holds), and the
			-- same write of the holders that no longer hold.  A call
			-- of pgjob.key_room() per key visited was ~30 us, most of
			-- it the calls' and their statements' fixed costs (a
			-- binding per-key claim visits about a key a job); the
			-- chunk's statement ~5 us a key.  The keys come in order
			-- within a round, each once, so the chunk is walked with
			-- them; a key past its end (when it was full) reads the
			-- next chunk from there, and the first key of a round
			-- reads it again (its jobs were written running, and their
			-- ids added to their keys' holders, at the end of the round
			-- before: claim_ids()).  A key with no row, or whose
			-- holders are not known yet, is counted by key_room() as
			-- before, which writes its row.  A job that ends while the
			-- round goes on is seen at the next: the count can only be
			-- high.
			mhit := false;
			if usemap and k is not null then
				if mlast is null or k <= mlast
				   or (mfull and k > mk[cardinality(mk)]) then
					-- The first chunk of a claim as many keys as
					-- it may take jobs, and one (a statement costs
					-- ~25 us and ~5 a key, a call of key_room() ~30:
					-- a small claim visits about a key a job); each
					-- next one twice the one before, up to 64 (a
					-- binding limit's claim passes many keys with no
					-- room).
					csz := least(64, coalesce(csz * 2, allow + 1));
					with w as (
						select lk.key, lk.holders
						  from pgjob.limit_keys lk
						 where lk.queue = q and lk.key >= k
						   and lk.holders is not null
						 order by lk.key limit csz),
					m as materialized (
						select w.key, w.holders, x.hs, x.f1, z.n, z.f
						  from w cross join lateral (
							select coalesce(array_agg(j.id order by j.id)
								filter (where j.state = 'running'
								and j.locked_until >= clk
								and j.queue = q), '{}') as hs,
							       min(j.locked_until) filter (where
								j.state = 'running'
								and j.locked_until >= clk
								and j.queue = q) as f1
							  from pgjob.jobs j
							 where j.id = any(w.holders)) x
						  cross join lateral (
							select count(*)::int as n,
							       min(h.expires_at) as f
							  from pgjob.limit_holds h
							 where h.queue = q and h.key = w.key
							   and h.expires_at >= clk) z),
					-- Written as key_busy() writes it: each by
					-- its key, through the primary key, whatever
					-- the statistics (an update joined with m may
					-- read pgjob.limit_keys whole).
					s as (
						insert into pgjob.limit_keys as lk
							(queue, key, holders)
						select q, m.key, m.hs from m
						 where cardinality(m.holders)
							>= 2 * cardinality(m.hs) + 4
						on conflict on constraint limit_keys_pkey
						do update set holders = excluded.holders)
					select coalesce(array_agg(m.key order by m.key), '{}'),
					       array_agg(cardinality(m.hs) + m.n order by m.key),
					       array_agg(least(m.f1, m.f) order by m.key)
					  into mk, mb, mf
					  from m;
					mfull := cardinality(mk) >= csz;
					mp := 1;
				end if;
				mlast := k;
				while mp <= cardinality(mk) and mk[mp] < k loop
					mp := mp + 1;
				end loop;
				mhit := mp <= cardinality(mk) and mk[mp] = k;
			end if;
			if usemap and k is null then
				-- The jobs without a key: no key's limit.
				kroom := allow;
				kktok := null;
			elsif mhit then
				kroom := l.per_key_concurrency - mb[mp];
				kktok := null;
				kwhy := null;
				kwait := null;
				if kroom <= 0 then
					kwhy := 'key_concurrency';
					kwait := ceil(extract(epoch from mf[mp] - clk)
						* 1000)::bigint + 1;
				end if;
			else
				select x.room, x.ktok, x.why, x.wait_ms
				  into kroom, kktok, kwhy, kwait
				  from pgjob.key_room(l, k, clk) x;
			end if;
			if kroom <= 0 then
				why := coalesce(why, kwhy);
				wait_ms := least(wait_ms, kwait);
				cur := k;
				continue;
			end if;
			room := least(room, kroom);
			if tok is not null then
				room := least(room, greatest(floor(tok)::int, 1));
			end if;
			if kktok is not null then
				room := least(room, greatest(floor(kktok)::int, 1));
			end if;
			if k is null then
				-- The keys' jobs taken in this round written running
				-- before the next round, which counts each key's
				-- running jobs again (key_busy()) and would find these
				-- again (rows locked by this transaction are not
				-- skipped).  Within a round each key comes once, in
				-- order: its jobs are written with the others', in one
				-- statement (one per key cost a job 75 us of a binding
				-- per-key claim, docs/performance.md).
				if cardinality(pending) > 0 then
					perform pgjob.claim_ids(pending, holder, lease_ms, clk);
					pending := '{}';
				end if;
				-- Past the last key: the jobs without one, from among
				-- the first 256 due jobs of the queue.  No index
				-- holds keyless jobs apart (every queue would pay for
				-- it), and a scan past a backlog of keyed jobs would
				-- read all of them (docs/queues.md).
				got := array(select j.id from pgjob.jobs j
					where j.id = any(array(select h.id from pgjob.jobs h
						where h.queue = q and h.finished_at is null
						  and coalesce(h.parents_left, 0) = 0
						  and (h.state = 'available' or h.locked_until < clk)
						  and h.run_at <= clk
						order by h.priority, h.run_at, h.id limit 256))
					  and (j.state = 'available' or j.locked_until < clk)
					  and j.limit_key is null and j.ordering_key is null
					  and j.kind = any(kinds)
					  and j.kind <> all(l.paused_kinds)
					order by j.priority, j.run_at, j.id
					limit room for update skip locked);
				wraps := wraps + 1;
			else
				got := pgjob.key_candidates(q, k, kinds, l.paused_kinds, clk, room, queue_mode);
			end if;
			cur := k;
			select * into took, spent, next_cost
			  from pgjob.take_prefix(got, tok, cap, kktok, kcap);
			if cardinality(took) < cardinality(got) then
				why := case when tok is not null
					and tok - spent < least(next_cost, cap)
					then 'rate' else 'key_rate' end;
			end if;
			continue when cardinality(took) = 0;
			pending := pending || took;
			ids := ids || took;
			-- The claim is full before the key's turn is over: the
			-- next claim goes on with this key.
			if l.fair and k is not null and cardinality(ids) >= allow
			   and prior + cardinality(took) < kw then
				ktaken := prior + cardinality(took);
			end if;
			l.running_ub := l.running_ub + cardinality(took);
		if l.holders is not null then
				l.holders := l.holders || took;
			end if;
			tok := tok - spent;
			if kktok is not null then
				insert into pgjob.limit_keys as lk
				values (q, k, kktok - spent, clk)
				on conflict on constraint limit_keys_pkey do update
				   set tokens = excluded.tokens, tokens_at = excluded.tokens_at;
			end if;
		end loop;
		if cardinality(pending) > 0 then
			perform pgjob.claim_ids(pending, holder, lease_ms, clk);
		end if;
		if cardinality(ids) < allow and visits >= allow + 32 then
			-- Keys left unvisited may have room: come back soon.
			why := coalesce(why, 'key_concurrency');
			wait_ms := 1;
		end if;
	end if;

	update pgjob.limits x set tokens = coalesce(tok, x.tokens),
		tokens_at = case when tok is null then x.tokens_at else clk end,
		key_cursor = case when keyed then cur else x.key_cursor end,
		key_taken = case when keyed then nullif(ktaken, 0) else x.key_taken end,
		holders = l.holders, busy_ub = l.busy_ub, running_ub = l.running_ub
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
