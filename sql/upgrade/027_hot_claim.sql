-- pgjobd schema, version 27: a claim that writes no index entry.
--
-- A claim updates state, locked_by, locked_until, lease_token, attempts,
-- lost_attempts and attempted_at.  PostgreSQL makes an update HOT (the new
-- row version on the same page, no index entry written) only when no
-- index names a column it changed, in its key, an expression or its
-- predicate, whether the row matches the predicate or not.  Until now
-- every index on state did; each claim wrote an entry into jobs_pkey and
-- jobs_running_idx (docs/performance.md, "The switch: what is left,
-- decided").  Every index is restated here over columns the claim does
-- not write: an unfinished, released job is one whose finished_at is null
-- and whose parents_left is 0 or null (versions 23 and 26 make that the
-- same as state in ('available', 'running')).  The claim takes available
-- jobs and expired leases in one scan of jobs_claim_idx (src/db/queue.c);
-- the readers that read running jobs read them among the unfinished ones.
--
-- The indexes are rebuilt under the lock DROP INDEX and CREATE INDEX take,
-- which holds the claims until the migration commits: seconds for a
-- backlog of millions (docs/operations.md).

-- Room on each page for the claim's new row version (at 50, 17 % of the
-- claims of the trial found none and were not HOT).  Pages written from
-- now on; a VACUUM FULL or pg_repack applies it to the rest.
alter table pgjob.jobs set (fillfactor = 40);

drop index pgjob.jobs_claim_idx;
create index jobs_claim_idx on pgjob.jobs (queue, priority, run_at, id)
	where finished_at is null and coalesce(parents_left, 0) = 0;

drop index pgjob.jobs_running_idx;

drop index pgjob.jobs_unique_key_idx;
create unique index jobs_unique_key_idx on pgjob.jobs (unique_key)
	where unique_key is not null and finished_at is null
	  and coalesce(parents_left, 0) = 0;

drop index pgjob.jobs_finished_idx;
create index jobs_finished_idx on pgjob.jobs (finished_at)
	where finished_at is not null;

drop index pgjob.jobs_key_order_idx;
create index jobs_key_order_idx on pgjob.jobs (queue, ordering_key, id)
	where finished_at is null and coalesce(parents_left, 0) = 0
	  and ordering_key is not null;

-- cost is not null, true of every row (NOT NULL), is said only by the
-- statements that go key by key (pgjob.key_candidates(), the next key's
-- probe, a key's first count): per_key's "no older unfinished job of the
-- key" implies the rest of this predicate, and on a generic plan's
-- estimates the planner read this index for it, by queue alone, where
-- jobs_key_order_idx finds the key (14 ms a claim, not 0.8).
drop index pgjob.jobs_limit_key_idx;
create index jobs_limit_key_idx on pgjob.jobs
	(queue, (coalesce(limit_key, ordering_key)), priority, run_at, id)
	where finished_at is null and coalesce(parents_left, 0) = 0
	  and (limit_key is not null or ordering_key is not null)
	  and cost is not null;

drop index pgjob.jobs_waiting_idx;
create index jobs_waiting_idx on pgjob.jobs (queue)
	where finished_at is null and parents_left > 0;

-- Dead jobs by queue, for the console, the metrics and pgjob retry
-- --dead: along a column generated from the state.  The claim changes the
-- state but never this column (false before and after), so the update
-- stays HOT.  Adding a stored column rewrites the table, under the lock
-- ALTER TABLE takes (docs/operations.md).
alter table pgjob.jobs
	add column dead boolean generated always as (state = 'dead') stored;
drop index pgjob.jobs_dead_idx;
create index jobs_dead_idx on pgjob.jobs (queue, id) where dead;

-- pgjob.all_jobs with it (false for the plain jobs done).
create or replace view pgjob.all_jobs as
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status, dead
  from pgjob.jobs
union all
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status, false
  from pgjob.jobs_done;

-- The serial head: the queue's lowest unfinished, released id.  created_at
-- is not null is true of every row (NOT NULL) and implied by nothing the
-- parallel claim says, so only the serial head's statements, which say
-- it, can use this index (version 21 did the same with lease_token, which
-- the claim writes).
drop index pgjob.jobs_queue_order_idx;
create index jobs_queue_order_idx on pgjob.jobs (queue, id)
	where finished_at is null and coalesce(parents_left, 0) = 0
	  and created_at is not null;

-- The functions that read jobs by state, restated so that an index still
-- serves them: the unfinished, released jobs' condition beside the state.
-- Their text is otherwise their last version's (pg_get_functiondef()).

-- pgjob.claim_limited() as versions 18, 21 and 25 left it, with its
-- expired-lease scans gone (a scan of the running jobs would read the
-- whole backlog now): an expired lease is taken where it stands in the
-- queue's order, in place, as the daemon's claim does.
CREATE OR REPLACE FUNCTION pgjob.claim_limited(q text, want integer, kinds text[], queue_mode text, holder text, lease_ms bigint, max_payload bigint)
 RETURNS TABLE(c_t text, c_id bigint, c_kind text, c_queue text, c_payload text, c_attempts integer, c_max_attempts integer, c_token bigint, c_ordering_key text, c_pr smallint, c_ra bigint, c_lost integer, c_bytes bigint)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'auto'
AS $function$
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
		-- Due jobs in the queue's order, each with its cost; a job
		-- whose lease expired (its worker died) where it stands in
		-- that order (schema 27: no index holds running jobs apart).
		got := '{}';
		costs := '{}';
		n := allow;
		if n > 0 and queue_mode = 'serial' then
			select got || coalesce(array_agg(a.id), '{}'),
			       costs || coalesce(array_agg(a.cost), '{}')
			  into got, costs
			  from (select j.id, j.cost from pgjob.jobs j
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
					a.run_at, a.id), '{}')
			  into got, costs
			  from (select j.id, j.cost, j.priority, j.run_at
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
			       (array_agg(a.run_at))[count(*)::int]
			  into got, costs, b, last_pr, last_id, last_ra
			  from (select j.id, j.cost, j.priority, j.run_at
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
		if l.holders is not null then
			l.holders := l.holders || took;
		end if;
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
			  from pgjob.take_prefix(got, tok, cap, kr.ktok, kcap);
			if cardinality(took) < cardinality(got) then
				why := case when tok is not null
					and tok - spent < least(next_cost, cap)
					then 'rate' else 'key_rate' end;
			end if;
			continue when cardinality(took) = 0;
			perform pgjob.claim_ids(took, holder, lease_ms, clk);
			ids := ids || took;
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
$function$;

-- A key's jobs, expired leases among them (the key-by-key claim has no
-- restart scan of its own any more).
create or replace function pgjob.key_candidates(q text, k text, kinds text[],
	paused_kinds text[], clk timestamptz, room int, queue_mode text)
returns bigint[]
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
	return array(select j.id from pgjob.jobs j
		where j.queue = q and j.finished_at is null
		  and coalesce(j.parents_left, 0) = 0
		  and (j.state = 'available' or j.locked_until < clk)
		  and (j.limit_key is not null or j.ordering_key is not null)
		  and j.cost is not null
		  and coalesce(j.limit_key, j.ordering_key) = k
		  and j.run_at <= clk and j.kind = any(kinds)
		  and j.kind <> all(paused_kinds)
		  and (queue_mode <> 'per_key' or j.ordering_key is null
		   or not exists (select 1 from pgjob.jobs o
			where o.queue = q and o.ordering_key = j.ordering_key
			  and o.id < j.id and o.finished_at is null
			  and coalesce(o.parents_left, 0) = 0))
		order by j.priority, j.run_at, j.id
		limit room for update skip locked);
end
$$;

CREATE OR REPLACE FUNCTION pgjob.key_busy(l pgjob.limits, k text, clk timestamp with time zone, OUT busy integer, OUT first_expiry timestamp with time zone)
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
declare
	known bigint[];
	hs bigint[];
	f1 timestamptz;
	n2 bigint;
	f2 timestamptz;
begin
	select x.holders into known from pgjob.limit_keys x
	 where x.queue = l.queue and x.key = k;
	if known is null then
		select coalesce(array_agg(x.id order by x.id), '{}'),
		       min(x.locked_until)
		  into hs, f1
		  from pgjob.jobs x
		 where x.queue = l.queue and x.finished_at is null and coalesce(x.parents_left, 0) = 0 and x.state = 'running'
		   and (x.limit_key is not null or x.ordering_key is not null)
		   and x.cost is not null
		   and coalesce(x.limit_key, x.ordering_key) = k
		   and x.locked_until >= clk;
	else
		-- By primary key: with state = 'running' and the queue in the
		-- condition, the planner read the queue's running jobs
		-- through jobs_running_idx instead (0.3 ms a look, not 0.02).
		select coalesce(array_agg(j.id order by j.id) filter (where
			j.state = 'running' and j.locked_until >= clk
			and j.queue = l.queue), '{}'),
		       min(j.locked_until) filter (where j.state = 'running'
			and j.locked_until >= clk and j.queue = l.queue)
		  into hs, f1
		  from pgjob.jobs j
		 where j.id = any(known);
	end if;
	-- Written back when first counted, and when at least half the ids
	-- kept no longer hold (ended ones cost a look-up each until then;
	-- writing at every end would cost the key's row an update a turn).
	if known is null or cardinality(known) >= 2 * cardinality(hs) + 4 then
		insert into pgjob.limit_keys as lk (queue, key, holders)
		values (l.queue, k, hs)
		on conflict on constraint limit_keys_pkey do update
		   set holders = excluded.holders;
	end if;
	select count(*), min(z.expires_at) into n2, f2 from pgjob.limit_holds z
	 where z.queue = l.queue and z.key = k and z.expires_at >= clk;
	busy := cardinality(hs) + n2;
	first_expiry := least(f1, f2);
end
$function$;

CREATE OR REPLACE FUNCTION pgjob.limit_busy(q text, key text, clk timestamp with time zone, OUT busy integer, OUT first_expiry timestamp with time zone)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
AS $function$
#variable_conflict use_variable
declare
	n1 bigint;
	f1 timestamptz;
	n2 bigint;
	f2 timestamptz;
begin
	if key is null then
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.finished_at is null and coalesce(x.parents_left, 0) = 0 and x.state = 'running' and x.locked_until >= clk;
	else
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.finished_at is null and coalesce(x.parents_left, 0) = 0 and x.state = 'running'
		   and (x.limit_key is not null or x.ordering_key is not null)
		   and x.cost is not null
		   and coalesce(x.limit_key, x.ordering_key) = key
		   and x.locked_until >= clk;
	end if;
	select count(*), min(z.expires_at) into n2, f2 from pgjob.limit_holds z
	 where z.queue = q and z.expires_at >= clk and (key is null or z.key = key);
	busy := n1 + n2;
	first_expiry := least(f1, f2);
end
$function$;

-- How many of q's jobs hold a lease at clk, for a claim of want more under
-- l.global_concurrency, and when the first of them ends.  Version 10 kept
-- the ids of the jobs a limit up to 1000 let start (l.holders) and, for a
-- larger one, counted through jobs_running_idx near the limit, which is
-- gone: now every limit keeps its holders.  They are looked up by primary
-- key when the claim could pass the limit, or once the array holds twice
-- as many ids as the last look-up found running, plus 64 (l.busy_ub, now
-- that count): ended ids are then at most half the array, which a claim
-- rewrites, and a look-up costs at most two probes a job claimed since the
-- last, whatever the limit.  Null holders (a new row, or its limits
-- changed) are counted once over the queue's unfinished jobs.
create or replace function pgjob.limit_busy_tracked(l inout pgjob.limits,
	q text, want int, clk timestamptz, out busy int,
	out first_expiry timestamptz)
language plpgsql
as $$
begin
	if l.holders is null then
		l.holders := array(select x.id from pgjob.jobs x
			where x.queue = q and x.finished_at is null
			  and coalesce(x.parents_left, 0) = 0
			  and x.state = 'running' and x.locked_until >= clk);
	elsif cardinality(l.holders) + want <= l.global_concurrency
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

CREATE OR REPLACE FUNCTION pgjob.limit_waiting(q text, OUT paused bigint, OUT throttled bigint, OUT concurrency bigint, OUT rate bigint, OUT key_concurrency bigint, OUT tokens double precision)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;

-- The look-ups by unique key after an "on conflict do nothing": the
-- condition of jobs_unique_key_idx, where they named the state.
do $$
declare
	f record;
	old text := 'j.state in (''available'', ''running'')';
	new text := 'j.finished_at is null and coalesce(j.parents_left, 0) = 0';
begin
	for f in select p.oid, p.proname, pg_get_functiondef(p.oid) as def
		   from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		  where n.nspname = 'pgjob' and p.proname in ('enqueue',
			'enqueue_many') loop
		if position(old in f.def) = 0 then
			raise exception 'pgjob.%(): the unique key''s look-up was not found',
				f.proname;
		end if;
		execute replace(f.def, old, new);
	end loop;
end
$$;
