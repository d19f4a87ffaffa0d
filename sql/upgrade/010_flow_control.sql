-- pgjobd schema, version 10: flow control.  Pause and resume, cluster-wide
-- concurrency limits, rate limits and fairness, enforced in the claim
-- (docs/queues.md, "Flow control").
--
-- A queue with a row in pgjob.limits is a *limited* queue.  The daemon's
-- ordinary claim leaves limited queues alone (it tests for the row), and
-- claims them with pgjob.claim_limited(), which first locks the queue's row
-- (FOR UPDATE SKIP LOCKED: a claimer that finds it locked is told to come
-- back in a moment, and never waits), then counts, refills and takes.  The
-- lock serialises the claims of one limited queue, and only of that queue:
-- a queue without a row costs one index probe of a tiny table per claim.
--
-- Every row is deleted again when nothing is left in it (not paused, no
-- limit, no throttle), so that the queue goes back to the ordinary claim.

alter table pgjob.jobs
	-- The key of per-key limits and fairness: limit_key, else ordering_key.
	add column limit_key text,
	-- Tokens the job takes from its queue's rate limits when it starts.
	add column cost int not null default 1,
	-- When the current (or last) attempt was claimed.
	add column attempted_at timestamptz,
	add constraint jobs_cost_check check (cost between 0 and 1000000);

-- The keys that have available jobs, for claims that go key by key (per-key
-- limits, fairness).  Jobs without a key are not in it, so a queue that
-- never uses keys pays nothing for it.
create index jobs_limit_key_idx on pgjob.jobs
	(queue, (coalesce(limit_key, ordering_key)), priority, run_at, id)
	where state = 'available'
	  and (limit_key is not null or ordering_key is not null);
-- The running jobs of a key, for per-key concurrency limits.
create index jobs_running_key_idx on pgjob.jobs
	(queue, (coalesce(limit_key, ordering_key)), locked_until)
	where state = 'running'
	  and (limit_key is not null or ordering_key is not null);

-- The queues some worker's config defines, written by each worker when it
-- connects: a limit or a pause of a queue that no config defines and no job
-- uses is refused as a typo.
create table pgjob.queues (
	name text primary key,
	seen_at timestamptz not null default now()
);

create table pgjob.limits (
	queue text primary key,
	paused boolean not null default false,
	-- Kinds of the queue that are paused while the queue is not.
	paused_kinds text[] not null default '{}',
	-- The limits.  source says who set them: 'config' (a worker published
	-- its config's, or none were ever set; a worker may publish again) or
	-- 'sql' (pgjob.set_limits(); the configs leave them alone until
	-- pgjob.reset_limits()).  A pause or a throttle leaves it as it is.
	global_concurrency int,
	per_key_concurrency int,
	rate int,
	rate_period_ms bigint,
	burst int,
	rate_per_key int,
	rate_per_key_period_ms bigint,
	burst_per_key int,
	fair boolean not null default false,
	source text not null default 'config',
	-- An adaptive throttle (a 429 or 503 with Retry-After): no job of the
	-- queue starts before this.
	throttled_until timestamptz,
	-- The token bucket: tokens at tokens_at (null: full).
	tokens float8,
	tokens_at timestamptz,
	-- The last key a fair or per-key claim served.
	key_cursor text,
	-- What claims keep to count and find cheaply (pgjob.claim_limited()):
	-- the jobs a global_concurrency up to 1000 let start, an upper bound
	-- of the running jobs for a larger one, and where the last full claim
	-- stopped in the queue's order (pos_at: when the head was read).
	holders bigint[],
	busy_ub int,
	pos_pr smallint,
	pos_ra timestamptz,
	pos_id bigint,
	pos_at timestamptz,
	updated_at timestamptz not null default now(),
	constraint limits_queue_check check (length(queue) between 1 and 200),
	constraint limits_global_check check (global_concurrency >= 1),
	constraint limits_per_key_check check (per_key_concurrency >= 1),
	constraint limits_rate_check check (rate >= 1
		and rate_period_ms between 1 and 1000000000000000
		and (rate is null) = (rate_period_ms is null)),
	constraint limits_burst_check check (burst >= 1
		and (burst is null or rate is not null)),
	constraint limits_rate_per_key_check check (rate_per_key >= 1
		and rate_per_key_period_ms between 1 and 1000000000000000
		and (rate_per_key is null) = (rate_per_key_period_ms is null)),
	constraint limits_burst_per_key_check check (burst_per_key >= 1
		and (burst_per_key is null or rate_per_key is not null)),
	constraint limits_source_check check (source in ('config', 'sql'))
) with (fillfactor = 50); -- updated at every claim of a rate-limited queue:
			   -- room on the page keeps those updates HOT

-- Per-key token buckets (rate_per_key); a key without a row has a full
-- bucket.  Rows whose bucket is full again are pruned.
create table pgjob.limit_keys (
	queue text not null,
	key text not null,
	tokens float8 not null,
	tokens_at timestamptz not null,
	primary key (queue, key)
) with (fillfactor = 50);

-- Weights of keys for fair claims: a key of weight w gets up to w jobs per
-- turn (default 1).
create table pgjob.limit_weights (
	queue text not null,
	key text not null,
	weight int not null,
	primary key (queue, key),
	constraint limit_weights_check check (weight between 1 and 1000)
);

-- Concurrency slots an application holds outside jobs
-- (pgjob.acquire_slot()): they count against the queue's limits until
-- released or expired, as a job's lease does.
create table pgjob.limit_holds (
	id bigint generated always as identity primary key,
	queue text not null,
	key text,
	holder text,
	expires_at timestamptz not null
);
create index limit_holds_queue_idx on pgjob.limit_holds (queue, expires_at);

-- Any change of what a limit row says (not of its tokens or cursor) wakes
-- the workers: they claim at once, and so see it.
create function pgjob.limits_notify() returns trigger
language plpgsql
as $$
begin
	if tg_op = 'DELETE' then
		perform pg_notify('pgjob_limits', old.queue);
	else
		perform pg_notify('pgjob_limits', new.queue);
	end if;
	return null;
end
$$;

create trigger limits_notify_insert_delete after insert or delete
	on pgjob.limits for each row execute function pgjob.limits_notify();
create trigger limits_notify_update after update on pgjob.limits
	for each row when ((old.paused, old.paused_kinds, old.global_concurrency,
		old.per_key_concurrency, old.rate, old.rate_period_ms, old.burst,
		old.rate_per_key, old.rate_per_key_period_ms, old.burst_per_key,
		old.fair, old.throttled_until)
	 is distinct from (new.paused, new.paused_kinds,
		new.global_concurrency, new.per_key_concurrency, new.rate,
		new.rate_period_ms, new.burst, new.rate_per_key,
		new.rate_per_key_period_ms, new.burst_per_key, new.fair,
		new.throttled_until))
	execute function pgjob.limits_notify();

-- "10/s", "600/min", "100/10s", "5/1.5h": (count, period in ms).  The same
-- grammar as the config's (src/common/rate.c).
create function pgjob.parse_rate(spec text, out n int, out period_ms bigint)
language plpgsql
immutable
as $$
declare
	m text[];
	num numeric;
	unit_ms numeric;
begin
	m := regexp_match(spec, '^\s*([0-9]{1,9})\s*/\s*([0-9]{1,15}(\.[0-9]{1,6})?)?\s*([a-z]+)\s*$');
	if m is null then
		raise exception 'pgjob: rate "%" is not COUNT/PERIOD (10/s, 600/min, 100/10s)',
			spec using errcode = '22023';
	end if;
	unit_ms := case m[4]
		when 'ms' then 1
		when 's' then 1000 when 'sec' then 1000 when 'second' then 1000
		when 'm' then 60000 when 'min' then 60000 when 'minute' then 60000
		when 'h' then 3600000 when 'hour' then 3600000
		when 'd' then 86400000 when 'day' then 86400000
	end;
	if unit_ms is null then
		raise exception 'pgjob: rate "%": unknown unit "%" (ms, s, min, h, d)',
			spec, m[4] using errcode = '22023';
	end if;
	n := m[1]::int;
	num := coalesce(m[2]::numeric, 1);
	if n < 1 then
		raise exception 'pgjob: rate "%": the count must be at least 1', spec
			using errcode = '22023';
	end if;
	if round(num * unit_ms) < 1 or round(num * unit_ms) > 1000000000000000 then
		raise exception 'pgjob: rate "%": the period must be between 1ms and 31,000 years',
			spec using errcode = '22023';
	end if;
	period_ms := round(num * unit_ms)::bigint;
end
$$;

-- (count, period) as the shortest spelling: 10/s, 600/min, 3/1500ms.
create function pgjob.rate_text(n int, period_ms bigint) returns text
language sql
immutable
as $$
	select case when n is null then null
		else n::text || '/' || case
		when period_ms = 1000 then 's'
		when period_ms = 60000 then 'min'
		when period_ms = 3600000 then 'h'
		when period_ms = 86400000 then 'd'
		when period_ms % 86400000 = 0 then (period_ms / 86400000)::text || 'd'
		when period_ms % 3600000 = 0 then (period_ms / 3600000)::text || 'h'
		when period_ms % 60000 = 0 then (period_ms / 60000)::text || 'min'
		when period_ms % 1000 = 0 then (period_ms / 1000)::text || 's'
		else period_ms::text || 'ms' end end
$$;

-- Refuses a queue that no worker's config defines and no job uses.
create function pgjob.check_queue(q text) returns void
language plpgsql
as $$
declare
	known text;
begin
	if q is null or q = '' then
		raise exception 'pgjob: the queue must not be empty'
			using errcode = '22023';
	end if;
	if exists (select 1 from pgjob.queues where name = q)
	   or exists (select 1 from pgjob.jobs where queue = q)
	   or exists (select 1 from pgjob.limits where queue = q) then
		return;
	end if;
	select string_agg(quote_literal(name), ', ' order by name) into known
	  from (select name from pgjob.queues order by name limit 20) k;
	raise exception 'pgjob: unknown queue %', quote_literal(q)
		using errcode = '42704',
		hint = 'Known queues: ' || coalesce(known, 'none yet') ||
			'.  A queue is known once a worker whose config defines it has connected, or a job uses it.';
end
$$;

-- Deletes q's row when it limits nothing any more.
create function pgjob.limits_tidy(q text) returns void
language sql
as $$
	delete from pgjob.limits l where l.queue = q and not l.paused
	   and l.paused_kinds = '{}' and l.global_concurrency is null
	   and l.per_key_concurrency is null and l.rate is null
	   and l.rate_per_key is null and not l.fair
	   and (l.throttled_until is null or l.throttled_until <= clock_timestamp())
$$;

create function pgjob.pause(queue text, kind text default null)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	if kind = '' then
		raise exception 'pgjob.pause: the kind must not be empty'
			using errcode = '22023';
	end if;
	insert into pgjob.limits as l (queue, paused, paused_kinds)
	values (queue, kind is null, case when kind is null then '{}'
		else array[kind] end)
	on conflict on constraint limits_pkey do update
	   set paused = l.paused or kind is null,
	       paused_kinds = case when kind is null or kind = any(l.paused_kinds)
		then l.paused_kinds else l.paused_kinds || kind end,
	       updated_at = now();
end
$$;

-- Resumes the queue (kind null), or one kind of it.  Each pause is undone
-- by its own resume: resuming the queue leaves a kind paused on its own
-- (for its own reason) paused.
create function pgjob.resume(queue text, kind text default null)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	update pgjob.limits l
	   set paused = case when kind is null then false else l.paused end,
	       paused_kinds = case when kind is null then l.paused_kinds
		else array_remove(l.paused_kinds, kind) end,
	       updated_at = now()
	 where l.queue = queue;
	perform pgjob.limits_tidy(queue);
end
$$;

-- Applies a limits object ({"global_concurrency": 5, "rate": "10/s", ...};
-- a key set to null removes that limit) to q's row, as source src.  With
-- replace, keys left out are removed too (a config says everything).
create function pgjob.apply_limits(q text, lim jsonb, src text, replace boolean)
returns void
language plpgsql
as $$
declare
	k text;
	v jsonb;
	r pgjob.limits;
	rate_n int;
	rate_p bigint;
begin
	if lim is null or jsonb_typeof(lim) <> 'object' then
		raise exception 'pgjob: limits must be a JSON object, not %',
			coalesce(jsonb_typeof(lim), 'null') using errcode = '22023';
	end if;
	select * into r from pgjob.limits where queue = q for update;
	if not found then
		r.queue := q;
		r.paused := false;
		r.paused_kinds := '{}';
		r.fair := false;
	end if;
	if replace then
		r.global_concurrency := null; r.per_key_concurrency := null;
		r.rate := null; r.rate_period_ms := null; r.burst := null;
		r.rate_per_key := null; r.rate_per_key_period_ms := null;
		r.burst_per_key := null; r.fair := false;
	end if;
	for k, v in select * from jsonb_each(lim) loop
		if k not in ('global_concurrency', 'per_key_concurrency', 'rate',
			     'burst', 'rate_per_key', 'burst_per_key', 'fair') then
			raise exception 'pgjob: unknown limit "%"', k
				using errcode = '22023',
				hint = 'Limits are global_concurrency, per_key_concurrency, rate, burst, rate_per_key, burst_per_key and fair.';
		end if;
		if k in ('rate', 'rate_per_key') then
			if jsonb_typeof(v) not in ('string', 'null') then
				raise exception 'pgjob: limit "%" must be a string like "10/s", not %',
					k, v using errcode = '22023';
			end if;
			rate_n := null;
			rate_p := null;
			if jsonb_typeof(v) = 'string' then
				select p.n, p.period_ms into rate_n, rate_p
				  from pgjob.parse_rate(v #>> '{}') p;
			end if;
			if k = 'rate' then
				r.rate := rate_n; r.rate_period_ms := rate_p;
			else
				r.rate_per_key := rate_n; r.rate_per_key_period_ms := rate_p;
			end if;
		elsif k = 'fair' then
			if jsonb_typeof(v) not in ('boolean', 'null') then
				raise exception 'pgjob: limit "fair" must be true or false, not %', v
					using errcode = '22023';
			end if;
			r.fair := coalesce((v #>> '{}')::boolean, false);
		else
			if jsonb_typeof(v) = 'number' and (v #>> '{}') ~ '^[0-9]{1,9}$'
			   and (v #>> '{}')::int >= 1 then
				null;
			elsif jsonb_typeof(v) <> 'null' then
				raise exception 'pgjob: limit "%" must be a whole number from 1, not %',
					k, v using errcode = '22023';
			end if;
			case k
			when 'global_concurrency' then r.global_concurrency := (v #>> '{}')::int;
			when 'per_key_concurrency' then r.per_key_concurrency := (v #>> '{}')::int;
			when 'burst' then r.burst := (v #>> '{}')::int;
			when 'burst_per_key' then r.burst_per_key := (v #>> '{}')::int;
			end case;
		end if;
	end loop;
	if r.burst is not null and r.rate is null then
		raise exception 'pgjob: "burst" needs a "rate"' using errcode = '22023';
	end if;
	if r.burst_per_key is not null and r.rate_per_key is null then
		raise exception 'pgjob: "burst_per_key" needs a "rate_per_key"'
			using errcode = '22023';
	end if;
	r.source := src;
	r.updated_at := now();
	insert into pgjob.limits values (r.*)
	on conflict on constraint limits_pkey do update
	   set global_concurrency = excluded.global_concurrency,
	       per_key_concurrency = excluded.per_key_concurrency,
	       rate = excluded.rate, rate_period_ms = excluded.rate_period_ms,
	       burst = excluded.burst, rate_per_key = excluded.rate_per_key,
	       rate_per_key_period_ms = excluded.rate_per_key_period_ms,
	       burst_per_key = excluded.burst_per_key, fair = excluded.fair,
	       source = excluded.source, updated_at = excluded.updated_at,
	       holders = null, busy_ub = null;
	perform pgjob.limits_tidy(q);
end
$$;

-- Changes q's limits at runtime: {"global_concurrency": 5, "rate": "10/s"};
-- a key set to null removes that limit, keys left out keep their value.
-- The limits are then the database's: the configs no longer change them
-- until pgjob.reset_limits(q).
create function pgjob.set_limits(queue text, limits jsonb)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	perform pgjob.apply_limits(queue, limits, 'sql', false);
end
$$;

-- Drops what pgjob.set_limits() set: the configs' limits apply again (the
-- running workers publish theirs at once, on the notification).
create function pgjob.reset_limits(queue text)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	perform pgjob.apply_limits(queue, '{}', 'config', true);
	perform pg_notify('pgjob_limits', 'reset ' || queue);
end
$$;

-- What a worker's config says, {"queue": {limits}, ...}: every queue named
-- is known from now on, and its limits are the config's, unless
-- pgjob.set_limits() set them.  Returns the queues whose limits this
-- changed from another config's (two instances that disagree).
create function pgjob.publish_limits(config jsonb)
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

-- Key weights for fair claims (weight null: back to 1).
create function pgjob.set_key_weight(queue text, key text, weight int)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	if weight is null or weight = 1 then
		delete from pgjob.limit_weights w where w.queue = queue and w.key = key;
	else
		-- By the constraint's name: under use_variable, a target
		-- (queue, key) would name the parameters, not the columns.
		insert into pgjob.limit_weights as w values (queue, key, weight)
		on conflict on constraint limit_weights_pkey
		do update set weight = excluded.weight;
	end if;
end
$$;

-- The adaptive throttle: no job of q starts for the next ms milliseconds
-- (at most an hour).  The http handler's 429 and 503 with Retry-After call
-- it for queues with adaptive: true.
create function pgjob.throttle(queue text, ms bigint)
returns void
language plpgsql
as $$
#variable_conflict use_variable
declare
	until timestamptz := clock_timestamp()
		+ least(greatest(ms, 0), 3600000) * interval '1 millisecond';
begin
	insert into pgjob.limits as l (queue, throttled_until)
	values (queue, until)
	on conflict on constraint limits_pkey do update
	   set throttled_until = greatest(l.throttled_until, excluded.throttled_until)
	 where l.throttled_until is null or l.throttled_until < excluded.throttled_until;
end
$$;

-- A token bucket of rate n per period_ms holding at most cap tokens, that
-- held tokens at tokens_at (null: full): its tokens at clk.
create function pgjob.bucket(tokens float8, tokens_at timestamptz,
	clk timestamptz, n int, period_ms bigint, cap int) returns float8
language sql
immutable
as $$
	select case when tokens is null or tokens_at is null then cap::float8
		else least(cap::float8, tokens + greatest(0,
			extract(epoch from clk - tokens_at) * 1000)
			* n::float8 / period_ms) end
$$;

-- Milliseconds until a bucket holding tok tokens holds need.
create function pgjob.bucket_wait(tok float8, need float8, n int,
	period_ms bigint) returns bigint
language sql
immutable
as $$
	select case when tok >= need then 0
		else ceil((need - tok) * period_ms / n)::bigint end
$$;

-- Takes cost tokens from q's rate limit (and from key's, with
-- rate_per_key), in the caller's transaction: the same budget as the
-- queue's jobs.  taken false: not enough tokens; retry_after says when
-- there will be.  A rollback gives the tokens back.  It locks q's limit row
-- until the transaction ends: call it late, in a short transaction.
create function pgjob.take_rate(queue text, cost int default 1,
	key text default null, out taken boolean, out retry_after interval)
language plpgsql
as $$
#variable_conflict use_variable
declare
	l pgjob.limits;
	clk timestamptz;
	tok float8;
	ktok float8;
	kb pgjob.limit_keys;
	w bigint := 0;
begin
	if cost is null or cost < 0 then
		raise exception 'pgjob.take_rate: cost must be 0 or more'
			using errcode = '22023';
	end if;
	select * into l from pgjob.limits x where x.queue = queue for update;
	if not found or (l.rate is null and (l.rate_per_key is null or key is null)) then
		perform pgjob.check_queue(queue);
		raise exception 'pgjob.take_rate: queue % has no rate limit',
			quote_literal(queue) using errcode = '55000';
	end if;
	clk := clock_timestamp();
	if l.rate is not null then
		tok := pgjob.bucket(l.tokens, l.tokens_at, clk, l.rate,
			l.rate_period_ms, coalesce(l.burst, l.rate));
		w := pgjob.bucket_wait(tok, least(cost, coalesce(l.burst, l.rate)),
			l.rate, l.rate_period_ms);
	end if;
	if key is not null and l.rate_per_key is not null then
		select * into kb from pgjob.limit_keys k
		 where k.queue = queue and k.key = key;
		ktok := pgjob.bucket(kb.tokens, kb.tokens_at, clk, l.rate_per_key,
			l.rate_per_key_period_ms, coalesce(l.burst_per_key, l.rate_per_key));
		w := greatest(w, pgjob.bucket_wait(ktok,
			least(cost, coalesce(l.burst_per_key, l.rate_per_key)),
			l.rate_per_key, l.rate_per_key_period_ms));
	end if;
	taken := w = 0;
	retry_after := w * interval '1 millisecond';
	if not taken then
		return;
	end if;
	if l.rate is not null then
		update pgjob.limits x set tokens = tok - cost, tokens_at = clk
		 where x.queue = queue;
	end if;
	if ktok is not null then
		insert into pgjob.limit_keys as k values (queue, key, ktok - cost, clk)
		on conflict on constraint limit_keys_pkey do update
		   set tokens = excluded.tokens, tokens_at = excluded.tokens_at;
	end if;
end
$$;

-- Running jobs and held slots of q (of key, when given) at clk, and when
-- the first of them expires.  A job counts while its lease holds: a worker
-- killed with its jobs gives their slots back when their leases expire.
create function pgjob.limit_busy(q text, key text, clk timestamptz,
	out busy int, out first_expiry timestamptz)
language plpgsql
stable
as $$
#variable_conflict use_variable
declare
	n1 bigint;
	f1 timestamptz;
	n2 bigint;
	f2 timestamptz;
begin
	if key is null then
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.state = 'running' and x.locked_until >= clk;
	else
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.state = 'running'
		   and (x.limit_key is not null or x.ordering_key is not null)
		   and coalesce(x.limit_key, x.ordering_key) = key
		   and x.locked_until >= clk;
	end if;
	select count(*), min(z.expires_at) into n2, f2 from pgjob.limit_holds z
	 where z.queue = q and z.expires_at >= clk and (key is null or z.key = key);
	busy := n1 + n2;
	first_expiry := least(f1, f2);
end
$$;

-- Holds one of q's concurrency slots (and one of key's, with
-- per_key_concurrency) until pgjob.release_slot(), or until ttl passes
-- without pgjob.renew_slot(): the application's share of the limit its
-- jobs obey.  Returns the hold's id, or null when the limit is reached.
-- Like take_rate(), it locks q's limit row until the transaction ends.
create function pgjob.acquire_slot(queue text, key text default null,
	ttl interval default '1 minute', holder text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	l pgjob.limits;
	clk timestamptz;
	b int;
	new_id bigint;
begin
	if ttl is null or ttl <= interval '0' or ttl > interval '1 day' then
		raise exception 'pgjob.acquire_slot: ttl must be more than 0 and at most a day, not %',
			ttl using errcode = '22023';
	end if;
	select * into l from pgjob.limits x where x.queue = queue for update;
	if not found or (l.global_concurrency is null
			 and (l.per_key_concurrency is null or key is null)) then
		perform pgjob.check_queue(queue);
		raise exception 'pgjob.acquire_slot: queue % has no concurrency limit%',
			quote_literal(queue), case when key is null then '' else ' for keys' end
			using errcode = '55000';
	end if;
	clk := clock_timestamp();
	if l.global_concurrency is not null then
		select x.busy into b from pgjob.limit_busy(queue, null, clk) x;
		if b >= l.global_concurrency then
			return null;
		end if;
	end if;
	if key is not null and l.per_key_concurrency is not null then
		select x.busy into b from pgjob.limit_busy(queue, key, clk) x;
		if b >= l.per_key_concurrency then
			return null;
		end if;
	end if;
	insert into pgjob.limit_holds (queue, key, holder, expires_at)
	values (queue, key, left(holder, 200), clk + ttl)
	returning id into new_id;
	return new_id;
end
$$;

create function pgjob.release_slot(hold bigint) returns boolean
language sql
security definer
set search_path = pg_catalog, pg_temp
as $$
	with d as (delete from pgjob.limit_holds where id = hold returning 1)
	select exists (select 1 from d)
$$;

-- Extends a hold that has not expired (one that has may have been given to
-- someone else, as an expired lease is).
create function pgjob.renew_slot(hold bigint, ttl interval default '1 minute')
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	if ttl is null or ttl <= interval '0' or ttl > interval '1 day' then
		raise exception 'pgjob.renew_slot: ttl must be more than 0 and at most a day, not %',
			ttl using errcode = '22023';
	end if;
	update pgjob.limit_holds set expires_at = clock_timestamp() + ttl
	 where id = hold and expires_at >= clock_timestamp();
	return found;
end
$$;

revoke execute on function pgjob.take_rate(text, int, text) from public;
revoke execute on function pgjob.acquire_slot(text, text, interval, text)
	from public;
revoke execute on function pgjob.release_slot(bigint) from public;
revoke execute on function pgjob.renew_slot(bigint, interval) from public;
alter function pgjob.take_rate(text, int, text) security definer
	set search_path = pg_catalog, pg_temp;

-- How much more key k of the queue whose row is l may start at clk: room
-- (jobs), ktok (the key's tokens, null without rate_per_key), and when
-- room is 0, why and when to look again.
create function pgjob.key_room(l pgjob.limits, k text, clk timestamptz,
	out room int, out ktok float8, out why text, out wait_ms bigint)
language plpgsql
as $$
declare
	b int;
	fx timestamptz;
	kb pgjob.limit_keys;
begin
	room := 1000000000;
	if k is null then
		return;
	end if;
	if l.per_key_concurrency is not null then
		select x.busy, x.first_expiry into b, fx
		  from pgjob.limit_busy(l.queue, k, clk) x;
		room := l.per_key_concurrency - b;
		if room <= 0 then
			why := 'key_concurrency';
			wait_ms := ceil(extract(epoch from fx - clk) * 1000)::bigint + 1;
			return;
		end if;
	end if;
	if l.rate_per_key is not null then
		select * into kb from pgjob.limit_keys x
		 where x.queue = l.queue and x.key = k;
		ktok := pgjob.bucket(kb.tokens, kb.tokens_at, clk, l.rate_per_key,
			l.rate_per_key_period_ms,
			coalesce(l.burst_per_key, l.rate_per_key));
		if ktok < 1 then
			room := 0;
			why := 'key_rate';
			wait_ms := pgjob.bucket_wait(ktok, 1, l.rate_per_key,
				l.rate_per_key_period_ms);
		end if;
	end if;
end
$$;

-- The longest prefix of the candidates got (in claim order) whose costs
-- fit in tok tokens (null: no rate) and in ktok (null: no key rate).  A
-- first job costlier than a bucket can hold goes when the bucket is full,
-- and leaves it in debt.
create function pgjob.take_prefix(got bigint[], tok float8, cap int,
	ktok float8, kcap int, out took bigint[], out spent bigint,
	out next_cost int)
language plpgsql
as $$
begin
	if tok is null and ktok is null then
		took := got;
		spent := 0;
		return;
	end if;
	select coalesce(array_agg(s.id order by s.n) filter (where s.fits), '{}'),
	       coalesce(sum(s.cost) filter (where s.fits), 0),
	       min(s.cost) filter (where not s.fits)
	  into took, spent, next_cost
	  from (select t.id, t.n, t.cost,
		  (tok is null or t.cum <= tok
		   or (t.n = 1 and tok >= least(t.cost, cap)))
		  and (ktok is null or t.cum <= ktok
		   or (t.n = 1 and ktok >= least(t.cost, kcap))) as fits
		  from (select u.id, u.n, j.cost,
			  sum(j.cost) over (order by u.n) as cum
			  from unnest(got) with ordinality u(id, n)
			  join pgjob.jobs j on j.id = u.id) t) s;
end
$$;

-- Claims the jobs ids (locked by the caller) for holder at clk.
create function pgjob.claim_ids(ids bigint[], holder text, lease_ms bigint,
	clk timestamptz) returns void
language sql
as $$
	update pgjob.jobs j set state = 'running', locked_by = holder,
		locked_until = clk + lease_ms * interval '1 millisecond',
		lease_token = j.lease_token + 1, attempts = j.attempts + 1,
		lost_attempts = j.lost_attempts
			+ case when j.state = 'running' then 1 else 0 end,
		attempted_at = clk
	 where j.id = any(ids)
$$;

-- How many of q's jobs hold a lease at clk, for a claim of want more
-- under l.global_concurrency, and when the first of them ends; the row's
-- bookkeeping updated in l.  Counting the running jobs through an index
-- would read the entries of every job that ended within a lease (they stay
-- until vacuum), so it is avoided:
--   - a limit up to 1000 keeps the ids of the jobs it let start
--     (l.holders) and looks them up by primary key: exact, and at most
--     the limit plus a claim's worth of lookups;
--   - a larger limit keeps an upper bound (l.busy_ub: the last count plus
--     every start since; ends only lower the truth) and counts through
--     the index only when the bound and the claim could pass the limit.
-- A row whose limits changed starts over (both null) with one count.
create function pgjob.limit_busy_tracked(l inout pgjob.limits, q text,
	want int, clk timestamptz, out busy int, out first_expiry timestamptz)
language plpgsql
as $$
begin
	if l.global_concurrency <= 1000 then
		if l.holders is null then
			l.holders := array(select x.id from pgjob.jobs x
				where x.queue = q and x.state = 'running'
				  and x.locked_until >= clk);
		elsif cardinality(l.holders) + want <= l.global_concurrency then
			busy := cardinality(l.holders);
			return;
		end if;
		select coalesce(array_agg(j.id), '{}'), min(j.locked_until)
		  into l.holders, first_expiry
		  from pgjob.jobs j
		 where j.id = any(l.holders) and j.state = 'running'
		   and j.locked_until >= clk and j.queue = q;
		busy := cardinality(l.holders);
		return;
	end if;
	if l.busy_ub is not null and l.busy_ub + want <= l.global_concurrency then
		busy := l.busy_ub;
		return;
	end if;
	select count(*), min(x.locked_until) into busy, first_expiry
	  from pgjob.jobs x
	 where x.queue = q and x.state = 'running' and x.locked_until >= clk;
	l.busy_ub := busy;
end
$$;

-- The claim of a limited queue: up to want jobs of q, of the kinds given, in
-- mode queue_mode, under every limit of q's row.  Rows as the daemon's
-- claim returns them ('c', the job's columns), then at most one more:
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
create function pgjob.claim_limited(q text, want int, kinds text[],
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
				j.ordering_key, j.lost_attempts)
			select 'c'::text, u.id, u.kind, u.queue,
				case when octet_length(u.p) <= max_payload then u.p end,
				u.attempts, coalesce(u.max_attempts, 0), u.lease_token,
				u.ordering_key, null::smallint, null::bigint,
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
		j.ordering_key, null::smallint, null::bigint, j.lost_attempts,
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

-- A throttle that has passed: cleared, and the row deleted if that was all
-- it held.
create function pgjob.limits_tidy_throttle(q text, clk timestamptz)
returns void
language plpgsql
as $$
begin
	update pgjob.limits x set throttled_until = null
	 where x.queue = q and x.throttled_until <= clk;
	if found then
		perform pgjob.limits_tidy(q);
	end if;
end
$$;

-- Forgets what flow control no longer needs: holds expired a minute ago,
-- per-key buckets that are full again, rows that limit nothing.  The
-- pruning duty calls it.
create function pgjob.prune_limits() returns bigint
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
	 where not exists (select 1 from pgjob.limits l where l.queue = k.queue
		and l.rate_per_key is not null
		and pgjob.bucket(k.tokens, k.tokens_at, clock_timestamp(),
			l.rate_per_key, l.rate_per_key_period_ms,
			coalesce(l.burst_per_key, l.rate_per_key))
		    < coalesce(l.burst_per_key, l.rate_per_key));
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

-- What holds q's due jobs back now, for /metrics: due jobs counted under the
-- first limit that binds (paused, throttled, concurrency, rate; per key,
-- the due jobs whose key is at its per_key_concurrency), and the tokens
-- left (null: no rate).  All zero for a queue without a row.
create function pgjob.limit_waiting(q text, out paused bigint,
	out throttled bigint, out concurrency bigint, out rate bigint,
	out key_concurrency bigint, out tokens float8)
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
	 where j.queue = q and j.state = 'available' and j.run_at <= clk;
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
		 where j.queue = q and j.state = 'available' and j.run_at <= clk
		   and j.kind <> all(l.paused_kinds)
		   and (j.limit_key is not null or j.ordering_key is not null)
		   and coalesce(j.limit_key, j.ordering_key) in (
			select coalesce(r.limit_key, r.ordering_key)
			  from pgjob.jobs r
			 where r.queue = q and r.state = 'running'
			   and r.locked_until >= clk
			   and (r.limit_key is not null or r.ordering_key is not null)
			 group by 1 having count(*) >= l.per_key_concurrency);
	end if;
end
$$;

-- What pgjob limits and pgjob status show: each limited queue, its
-- limits, and where it stands now.
create view pgjob.queue_limits as
select l.queue, l.paused, l.paused_kinds, l.global_concurrency,
	l.per_key_concurrency, pgjob.rate_text(l.rate, l.rate_period_ms) as rate,
	case when l.rate is not null then coalesce(l.burst, l.rate) end as burst,
	pgjob.rate_text(l.rate_per_key, l.rate_per_key_period_ms) as rate_per_key,
	case when l.rate_per_key is not null
		then coalesce(l.burst_per_key, l.rate_per_key) end as burst_per_key,
	l.fair, l.source,
	case when l.throttled_until > clock_timestamp()
		then l.throttled_until end as throttled_until,
	case when l.rate is not null then pgjob.bucket(l.tokens, l.tokens_at,
		clock_timestamp(), l.rate, l.rate_period_ms,
		coalesce(l.burst, l.rate)) end as tokens,
	b.busy as running
  from pgjob.limits l
  cross join lateral pgjob.limit_busy(l.queue, null, clock_timestamp()) b;

-- pgjob.enqueue() gains limit_key and cost.  The old signature goes (two
-- would make every call that names fewer arguments ambiguous); the roles
-- that could execute it can execute the new one.
create temporary table enqueue_grants on commit drop as
select pg_get_userbyid(a.grantee) as grantee
  from pg_proc p, aclexplode(p.proacl) a
 where p.oid = 'pgjob.enqueue(text, jsonb, text, timestamptz, int, int, text, text)'::regprocedure
   and a.privilege_type = 'EXECUTE' and a.grantee <> 0
   and a.grantee <> p.proowner;
drop function pgjob.enqueue(text, jsonb, text, timestamptz, int, int, text, text);

create function pgjob.enqueue(
	kind text,
	payload jsonb default '{}',
	queue text default 'default',
	run_at timestamptz default now(),
	priority int default 0,
	max_attempts int default null,
	unique_key text default null,
	ordering_key text default null,
	limit_key text default null,
	cost int default 1)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
	size bigint;
	max_size bigint;
begin
	if kind is null or kind = '' then
		raise exception 'pgjob.enqueue: kind must not be empty'
			using errcode = '22023';
	end if;
	payload := coalesce(payload, '{}');
	if jsonb_typeof(payload) <> 'object' then
		raise exception 'pgjob.enqueue: payload must be a JSON object, not %',
			jsonb_typeof(payload) using errcode = '22023';
	end if;
	select s.max_payload_bytes into max_size from pgjob.settings s;
	size := octet_length(payload::text);
	if size > coalesce(max_size, 1048576) then
		raise exception 'pgjob.enqueue: payload of % bytes is over the limit of % bytes',
			size, coalesce(max_size, 1048576) using errcode = '54000',
			hint = 'The limit is max_payload_bytes in table '
				'pgjob.settings (default 1048576); store large '
				'data elsewhere and put a reference to it in the '
				'payload.';
	end if;
	if priority not between -32768 and 32767 then
		raise exception 'pgjob.enqueue: priority % is out of range', priority
			using errcode = '22003';
	end if;
	run_at := coalesce(run_at, now());
	if not isfinite(run_at) then
		raise exception 'pgjob.enqueue: run_at must be a finite time, not %',
			run_at using errcode = '22008';
	end if;
	if max_attempts is not null and max_attempts < 1 then
		raise exception 'pgjob.enqueue: max_attempts must be at least 1, not %',
			max_attempts using errcode = '22023';
	end if;
	cost := coalesce(cost, 1);
	if cost not between 0 and 1000000 then
		raise exception 'pgjob.enqueue: cost must be between 0 and 1000000, not %',
			cost using errcode = '22023';
	end if;
	loop
		-- The only unique index a new row can hit is jobs_unique_key_idx.
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key, limit_key, cost)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, unique_key, ordering_key, limit_key,
			cost)
		on conflict do nothing
		returning id into new_id;
		if new_id is not null or unique_key is null then
			return new_id;
		end if;
		select j.id into new_id from pgjob.jobs j
		 where j.unique_key = unique_key
		   and j.state in ('available', 'running');
		if new_id is not null then
			return new_id;
		end if;
		-- The holder of the key finished between the two statements:
		-- try the insert again.
	end loop;
end
$$;

revoke execute on function pgjob.enqueue(text, jsonb, text, timestamptz, int,
	int, text, text, text, int) from public;
do $$
declare
	g text;
begin
	for g in select grantee from enqueue_grants loop
		execute format('grant execute on function pgjob.enqueue(text, jsonb, '
			'text, timestamptz, int, int, text, text, text, int) to %I', g);
	end loop;
end
$$;
