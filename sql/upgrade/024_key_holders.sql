-- pgjobd schema, version 24: a key's running jobs counted from the ids its
-- claims let start, not through an index of running jobs.
--
-- per_key_concurrency needs, at each turn of a key, how many of its jobs
-- hold a lease.  Until now pgjob.key_room() counted them through
-- jobs_running_key_idx, an index on state = 'running' that every claim of a
-- keyed job wrote an entry into and every end left a dead one in.  Now each
-- key's row in pgjob.limit_keys keeps the ids of the jobs its claims let
-- start (holders), as pgjob.limits does for a global_concurrency up to 1000
-- (pgjob.limit_busy_tracked()): a turn looks them up by primary key and
-- counts those still running under a live lease.  A key whose row has no
-- holders (a new key, or after its queue's per_key_concurrency changed) is
-- counted once from the running jobs of its queue.  The claims of a queue
-- take turns on its limits row (pgjob.claim_limited() locks it), so a
-- key's holders are exact: every job of the key that can hold a lease was
-- started by a claim that added it.  An id may be there twice (an expired
-- lease claimed again) or no longer hold (its end does not touch the row):
-- the look-up counts neither, and the row is written back without them
-- once they are half of it.
--
-- This is the first of the readers of running jobs answered without an
-- index on state (docs/performance.md, "The switch: what is left,
-- decided"): a claim whose update writes no index entry needs them all
-- gone.

alter table pgjob.limit_keys
	alter column tokens drop not null,
	alter column tokens_at drop not null,
	-- The jobs of this key that claims let start while the queue had a
	-- per_key_concurrency; null: not known (count them).
	add column holders bigint[];

-- How many jobs and application holds of key k of the queue whose row is l
-- hold a lease or a slot at clk, and when the first of them ends; the
-- key's holders brought up to date in its pgjob.limit_keys row.
create function pgjob.key_busy(l pgjob.limits, k text, clk timestamptz,
	out busy int, out first_expiry timestamptz)
language plpgsql
-- Generic plans, as the worker's session has them: under
-- pgjob.claim_limited()'s auto, the look-up by an array of ids was planned
-- again at every call (a custom plan looked cheaper than the generic one
-- for every array): 40 us of planning for 7 us of work.
set plan_cache_mode = force_generic_plan
as $$
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
		 where x.queue = l.queue and x.state = 'running'
		   and (x.limit_key is not null or x.ordering_key is not null)
		   and coalesce(x.limit_key, x.ordering_key) = k
		   and x.locked_until >= clk;
	else
		-- By primary key: with state = 'running' and the queue in the
		-- condition, the planner read the queue's running jobs
		-- through jobs_running_idx instead (0.3 ms a look, not 0.01).
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
$$;


-- As version 10's, and each claimed job's id added to its key's holders
-- where they are known (pgjob.key_room() made them so for the key of every
-- job a queue with per_key_concurrency claims; the only callers are the
-- key-by-key claims of pgjob.claim_limited()).
create or replace function pgjob.claim_ids(ids bigint[], holder text,
	lease_ms bigint, clk timestamptz) returns void
-- plpgsql with generic plans, where version 10's was SQL: a SQL
-- function's statement is planned at every call, and this one's plan cost
-- more than its run (pgjob.key_busy() says why generic).
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
	with u as (
		update pgjob.jobs j set state = 'running', locked_by = holder,
			locked_until = clk + lease_ms * interval '1 millisecond',
			lease_token = j.lease_token + 1, attempts = j.attempts + 1,
			lost_attempts = j.lost_attempts
				+ case when j.state = 'running' then 1 else 0 end,
			attempted_at = clk
		 where j.id = any(ids)
		returning j.id, j.queue, coalesce(j.limit_key, j.ordering_key) as k)
	update pgjob.limit_keys lk set holders = lk.holders || t.ids
	  from (select u.queue, u.k, array_agg(u.id order by u.id) as ids
		  from u where u.k is not null group by u.queue, u.k) t
	 where lk.queue = t.queue and lk.key = t.k and lk.holders is not null;
end
$$;

-- A queue's keys' holders are known only while its per_key_concurrency
-- stays set: claims made without it (no row, or no per-key limit) added
-- nothing.  A new row, or a change of it, forgets them.  (Two triggers: a
-- claim updates the row's tokens and cursor, and should not call a
-- function for it.)
create function pgjob.limit_keys_forget() returns trigger
language plpgsql
as $$
begin
	update pgjob.limit_keys k set holders = null
	 where k.queue = new.queue and k.holders is not null;
	return null;
end
$$;
create trigger limits_forget_keys_insert after insert on pgjob.limits
	for each row execute function pgjob.limit_keys_forget();
create trigger limits_forget_keys_update after update on pgjob.limits
	for each row
	when (old.per_key_concurrency is distinct from new.per_key_concurrency)
	execute function pgjob.limit_keys_forget();

-- pgjob.key_room() and pgjob.acquire_slot() count a key's jobs with
-- pgjob.key_busy() (which counts the holds too): their version 10 text,
-- with that one call changed, found once in each or refused.
do $$
declare
	f record;
	def text;
begin
	for f in select * from (values
		('key_room', 'pgjob.limit_busy(l.queue, k, clk)',
		 'pgjob.key_busy(l, k, clk)'),
		('acquire_slot', 'pgjob.limit_busy(queue, key, clk)',
		 'pgjob.key_busy(l, key, clk)')) v(fn, old, new) loop
		select pg_get_functiondef(p.oid) into def from pg_proc p
		  join pg_namespace n on n.oid = p.pronamespace
		 where n.nspname = 'pgjob' and p.proname = f.fn;
		if def is null or position(f.old in def) = 0
		   or position(f.old in substr(def, position(f.old in def) + 1)) <> 0
		then
			raise exception 'pgjob.%(): its count of a key was not found once',
				f.fn;
		end if;
		execute replace(def, f.old, f.new);
	end loop;
end
$$;

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

-- Every claim of a keyed job wrote an entry here; nothing reads it now.
drop index pgjob.jobs_running_key_idx;
