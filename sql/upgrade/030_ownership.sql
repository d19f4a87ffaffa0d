-- pgjobd schema, version 30: who may call what, who may act on a job by
-- its id, bounded rate buckets, and workflows enqueued in one pass.
--
-- EXECUTE.  PostgreSQL grants EXECUTE on every new function to PUBLIC, and
-- until now only enqueue(), enqueue_many(), enqueue_workflow(), the batch
-- and the slot functions and take_rate() had it taken back.  So any role
-- with USAGE on the schema could run pgjob.prune_done() and
-- pgjob.forget_attempts(), which run with their owner's rights: delete
-- every done job with its result, and, its transaction held open, keep the
-- current ring's ACCESS EXCLUSIVE lock that the workers' ends wait for.
-- At the end of this file EXECUTE is taken from PUBLIC on every function
-- of the schema but those applications call with their own rights
-- (docs/security.md, "Functions any role may call", which
-- tests/integration/test_privileges.c compares with a fresh schema).  A
-- later migration that adds a function revokes it from PUBLIC the same
-- way.
--
-- Ownership.  The enqueue role reached other roles' rows by id: a parent
-- of another application in depends_on copied its result (or its error)
-- into the new job's payload, which the caller's handler reads; a batch
-- of another could be sealed, or kept open for good; a slot of another
-- released or renewed; a foreign parent marked children = true; and "no
-- job N" told which ids exist.  Now a job, a batch and a slot record the
-- role that made them (an oid: 4 bytes in the hot table, against 64 for a
-- name), and a function acts on one by id only for a session whose role
-- is that role or a member of it, or may read pgjob.jobs (the worker
-- role, the owner); for any other it is an id that does not exist.  The
-- role is session_user: in a SECURITY DEFINER function current_user is the
-- owner, and the login role is the one identity of the caller the function
-- can trust.  Rows made before this version have no owner (null): only the
-- readers of pgjob.jobs act on them.
--
-- Rate buckets.  take_rate() took any cost: take_rate('q', 2147483647)
-- stalled the queue for years, and with a slow rate (1/90d) every claim
-- of the queue then failed at each poll with 22003 (bigint out of range,
-- in bucket_wait()).  Its cost is now bounded as enqueue's (0 to
-- 1,000,000), and the bucket saturates: its tokens never go below
-- -10^12, and a wait never passes 10^15 ms, whatever the row holds.
--
-- Workflows.  enqueue_workflow() enqueued its steps one by one through
-- attach(), whose look-up of the parents in pgjob.jobs_done cost a chain of
-- 10,000 steps 22 s on the test machine (99 s where issue 46 measured).  The parents of a
-- new workflow's steps are its own steps, none of them ended: the steps
-- and their edges now go in with one INSERT each.

alter table pgjob.jobs add column enqueued_by oid;
-- A plain job done moves here (sql/019_jobs_done.sql), and a child's
-- enqueue reads its result from here: the owner goes with it.
alter table pgjob.jobs_done add column enqueued_by oid;
alter table pgjob.batches add column opened_by oid;
alter table pgjob.limit_holds add column held_by oid;

-- Whether the session may act on what the role owner made, for a session
-- that reads pgjob.jobs (reads) or not.  A role that was dropped, or null
-- (made before version 30), is no one's.  (No SET clause, so that a query
-- inlines it: it names every object with its schema.)
create function pgjob.session_may(owner oid, reads boolean) returns boolean
language sql
stable
as $$
	select reads or coalesce(pg_catalog.pg_has_role(session_user, owner,
		'USAGE'), false)
$$;

-- Whether the session's role reads every job: it may act on any.
create function pgjob.session_reads() returns boolean
language sql
stable
as $$
	select pg_catalog.has_table_privilege(session_user, 'pgjob.jobs',
		'SELECT')
$$;

-- A plain job done back into pgjob.jobs, with its owner.
create or replace function pgjob.restore_done(ids bigint[])
returns bigint
language sql
as $$
	with m as (delete from pgjob.jobs_done x where x.id = any(ids)
		returning x.id, x.queue, x.kind, x.payload, x.priority, x.run_at,
			x.state, x.attempts, x.max_attempts, x.locked_by,
			x.locked_until, x.lease_token, x.unique_key, x.ordering_key,
			x.last_error, x.result, x.created_at, x.finished_at,
			x.lost_attempts, x.limit_key, x.cost, x.attempted_at,
			x.children, x.parents_left, x.on_parent_failure,
			x.workflow_id, x.step, x.batch_id, x.last_wall_ms,
			x.last_cpu_ms, x.last_max_rss_kb, x.last_status,
			x.enqueued_by),
	i as (insert into pgjob.jobs (id, queue, kind, payload, priority,
		run_at, state, attempts, max_attempts, locked_by, locked_until,
		lease_token, unique_key, ordering_key, last_error, result,
		created_at, finished_at, lost_attempts, limit_key, cost,
		attempted_at, children, parents_left, on_parent_failure,
		workflow_id, step, batch_id, last_wall_ms, last_cpu_ms,
		last_max_rss_kb, last_status, enqueued_by)
	overriding system value select * from m returning 1)
	select count(*) from i
$$;

-- Attaches child to its parents deps.  A parent the session may not act on
-- is no job to it: the same error as a parent that does not exist, before
-- anything is read, moved or locked.
create or replace function pgjob.attach(child bigint, deps bigint[], pol text,
	out state text, out parents_left int, out why text, out add jsonb)
language plpgsql
as $$
declare
	p record;
	n int := 0;
	missing bigint;
	failed boolean;
	reads boolean := pgjob.session_reads();
	dn text[] := '{}';      -- parents that ended done: names, results
	dr jsonb[] := '{}';
	fn_ text[] := '{}';     -- that failed, for a 'run' child
	fo jsonb[] := '{}';
begin
	state := 'available';
	parents_left := 0;
	deps := array(select distinct d from unnest(deps) d where d is not null order by d);
	select d into missing from unnest(deps) d
	 where not exists (select 1 from pgjob.jobs j where j.id = d
			     and pgjob.session_may(j.enqueued_by, reads))
	   and not exists (select 1 from pgjob.jobs_done x where x.id = d
			     and pgjob.session_may(x.enqueued_by, reads))
	 limit 1;
	if missing is null then
		perform pgjob.restore_done(deps);
		select d into missing from unnest(deps) d
		 where not exists (select 1 from pgjob.jobs j where j.id = d) limit 1;
	end if;
	if missing is not null then
		raise exception 'pgjob.enqueue: depends_on: no job %', missing
			using errcode = '23503',
			hint = 'A parent must exist when its child is enqueued: a pruned job is gone, and under retention 0 so is a job that ended done.';
	end if;
	for p in select j.id, j.state, j.result, j.last_error,
			coalesce(j.step, j.id::text) as name
		   from pgjob.jobs j where j.id = any(deps)
		  order by j.id for update loop
		n := n + 1;
		failed := p.state in ('dead', 'cancelled');
		if p.state in ('waiting', 'available', 'running')
		   or (failed and pol = 'wait') then
			parents_left := parents_left + 1;
			insert into pgjob.job_deps values (p.id, child, null);
		elsif failed and pol = 'cancel' then
			state := 'cancelled';
			why := coalesce(why, format('parent %s ended %s', p.name, p.state));
			insert into pgjob.job_deps values (p.id, child, p.state);
		else
			insert into pgjob.job_deps values (p.id, child, p.state);
			if failed then
				fn_ := fn_ || p.name;
				fo := fo || jsonb_build_object('state', p.state,
					'error', p.last_error);
			else
				dn := dn || p.name;
				dr := dr || p.result;
			end if;
		end if;
	end loop;
	add := case when cardinality(dn) > 0
		then jsonb_build_object('parents', (select jsonb_object_agg(x.n, x.r)
			from unnest(dn, dr) x(n, r)))
		else '{}' end
	    || case when cardinality(fn_) > 0
		then jsonb_build_object('failed', (select jsonb_object_agg(x.n, x.o)
			from unnest(fn_, fo) x(n, o)))
		else '{}' end;
	if n < cardinality(deps) then
		-- Deleted while this waited for its lock (retention 0, a
		-- prune, by hand).
		raise exception 'pgjob.enqueue: depends_on: a parent was deleted'
			using errcode = '23503',
			hint = 'Under retention 0 a job that ended done is deleted: enqueue its children in the same transaction as the parent, or as a workflow.';
	end if;
	update pgjob.jobs j set children = true
	 where j.id = any(deps) and j.children is not true;
	if state <> 'cancelled' and parents_left > 0 then
		state := 'waiting';
	end if;
end
$$;

create or replace function pgjob.enqueue_child(kind text, payload jsonb,
	queue text, run_at timestamptz, priority int, max_attempts int,
	ordering_key text, limit_key text, cost int, deps bigint[], pol text,
	unique_key text, wf bigint, step text, batch bigint)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
	a record;
begin
	if unique_key is not null then
		raise exception 'pgjob.enqueue: a job with depends_on cannot have a unique_key'
			using errcode = '22023';
	end if;
	pol := coalesce(pol, 'cancel');
	if pol not in ('cancel', 'run', 'wait') then
		raise exception 'pgjob.enqueue: on_parent_failure must be cancel, run or wait, not "%"',
			pol using errcode = '22023';
	end if;
	if payload ? 'pgjob' then
		raise exception 'pgjob.enqueue: a job with parents cannot have a "pgjob" key in its payload'
			using errcode = '22023',
			hint = 'Its parents'' results go there ("pgjob": {"parents": ...}).';
	end if;
	new_id := nextval(pg_get_serial_sequence('pgjob.jobs', 'id'));
	select * into a from pgjob.attach(new_id, deps, pol);
	insert into pgjob.jobs (id, kind, payload, queue, run_at, priority,
		max_attempts, ordering_key, limit_key, cost, state, parents_left,
		on_parent_failure, workflow_id, step, batch_id, last_error,
		finished_at, enqueued_by)
	values (new_id, kind,
		case when a.state = 'available'
			then pgjob.with_parent(payload, a.add)
			else payload end,
		coalesce(queue, 'default'), run_at, priority, max_attempts,
		ordering_key, limit_key, cost, a.state, a.parents_left,
		nullif(pol, 'cancel'), wf, step, batch, a.why,
		case when a.state = 'cancelled' then now() end,
		quote_ident(session_user)::regrole);
	if a.state = 'cancelled' then
		-- Ended as it came in: counted as the trigger would have.
		perform pgjob.count_end(wf, batch, 'cancelled', 1);
	end if;
	return new_id;
end
$$;

-- A batch the session may not act on is no batch to it; its row is not
-- locked (the check is the query's, before its lock).
create or replace function pgjob.enqueue_batched(kind text, payload jsonb,
	queue text, run_at timestamptz, priority int, max_attempts int,
	unique_key text, ordering_key text, limit_key text, cost int,
	deps bigint[], pol text, b bigint)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	x pgjob.batches;
	new_id bigint;
begin
	if unique_key is not null then
		raise exception 'pgjob.enqueue: a job of a batch cannot have a unique_key'
			using errcode = '22023';
	end if;
	select * into x from pgjob.batches y
	 where y.id = b and pgjob.session_may(y.opened_by, pgjob.session_reads())
	   for update;
	if not found then
		raise exception 'pgjob.enqueue: no batch %', b using errcode = '23503';
	end if;
	if x.sealed then
		raise exception 'pgjob.enqueue: batch % is sealed', b
			using errcode = '55000',
			hint = 'Jobs join a batch until pgjob.batch_seal(); open another batch for more.';
	end if;
	update pgjob.batches set total = total + 1 where id = b;
	if deps is not null and cardinality(deps) > 0 then
		return pgjob.enqueue_child(kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost, deps, pol, null,
			null, null, b);
	end if;
	insert into pgjob.jobs (kind, payload, queue, run_at, priority,
		max_attempts, ordering_key, limit_key, cost, batch_id, enqueued_by)
	values (kind, payload, coalesce(queue, 'default'), run_at, priority,
		max_attempts, ordering_key, limit_key, cost, b,
		quote_ident(session_user)::regrole)
	returning id into new_id;
	return new_id;
end
$$;

create or replace function pgjob.enqueue(kind text,
	payload jsonb default '{}', queue text default 'default',
	run_at timestamptz default now(), priority int default 0,
	max_attempts int default null, unique_key text default null,
	ordering_key text default null, limit_key text default null,
	cost int default 1, depends_on bigint[] default null,
	on_parent_failure text default null, batch_id bigint default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
	me oid;
begin
	run_at := coalesce(run_at, now());
	cost := coalesce(cost, 1);
	payload := (pgjob.check_job('pgjob.enqueue', kind, payload, run_at,
		priority, max_attempts, cost)).checked;
	if on_parent_failure is not null
	   and coalesce(cardinality(depends_on), 0) = 0 then
		raise exception 'pgjob.enqueue: on_parent_failure needs depends_on'
			using errcode = '22023';
	end if;
	if batch_id is not null then
		return pgjob.enqueue_batched(kind, payload, queue, run_at,
			priority, max_attempts, unique_key, ordering_key, limit_key,
			cost, depends_on, on_parent_failure, batch_id);
	end if;
	if depends_on is not null and cardinality(depends_on) > 0 then
		return pgjob.enqueue_child(kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost, depends_on,
			on_parent_failure, unique_key, null, null, null);
	end if;
	-- Who enqueues (docs/security.md, "Who may act on a job by its id").
	me := quote_ident(session_user)::regrole;
	if unique_key is null then
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost, enqueued_by)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, ordering_key, limit_key, cost, me)
		returning id into new_id;
		return new_id;
	end if;
	loop
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key, limit_key, cost,
			enqueued_by)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, unique_key, ordering_key, limit_key,
			cost, me)
		on conflict do nothing
		returning id into new_id;
		if new_id is not null then
			return new_id;
		end if;
		select j.id into new_id from pgjob.jobs j
		 where j.unique_key = unique_key
		   and j.finished_at is null and coalesce(j.parents_left, 0) = 0;
		if new_id is not null then
			return new_id;
		end if;
		-- The holder of the key finished between the two statements:
		-- try the insert again.
	end loop;
end
$$;

create or replace function pgjob.batch_open(callback_kind text default null,
	callback_payload jsonb default '{}', callback_on text default 'always',
	callback_queue text default null, name text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	b bigint;
	c record;
begin
	if callback_on is null or callback_on not in ('always', 'success') then
		raise exception 'pgjob.batch_open: callback_on must be always or success, not "%"',
			callback_on using errcode = '22023';
	end if;
	if callback_kind is not null then
		select * into c from pgjob.check_job('pgjob.batch_open', callback_kind,
			callback_payload, null, 0, null, 1);
		if c.checked ? 'pgjob' then
			raise exception 'pgjob.batch_open: the callback''s payload cannot have a "pgjob" key'
				using errcode = '22023',
				hint = 'The batch''s counts go there ("pgjob": {"batch": ...}).';
		end if;
	end if;
	insert into pgjob.batches (name, callback_kind, callback_payload,
		callback_on, callback_queue, opened_by)
	values (name, callback_kind, coalesce(callback_payload, '{}'),
		callback_on, callback_queue, quote_ident(session_user)::regrole)
	returning id into b;
	return b;
end
$$;

create or replace function pgjob.batch_seal(b bigint) returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	update pgjob.batches x set sealed = true
	 where x.id = b and pgjob.session_may(x.opened_by, pgjob.session_reads());
	if not found then
		raise exception 'pgjob.batch_seal: no batch %', b using errcode = '23503';
	end if;
	perform pgjob.batch_check(b);
end
$$;

create or replace function pgjob.acquire_slot(queue text, key text default null,
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
		select x.busy into b from pgjob.key_busy(l, key, clk) x;
		if b >= l.per_key_concurrency then
			return null;
		end if;
	end if;
	update pgjob.limits x set running_ub = x.running_ub + 1
	 where x.queue = l.queue and x.running_ub is not null;
	insert into pgjob.limit_holds (queue, key, holder, expires_at, held_by)
	values (queue, key, left(holder, 200), clk + ttl,
		quote_ident(session_user)::regrole)
	returning id into new_id;
	return new_id;
end
$$;

-- A slot the session may not act on is no slot to it: false, as for one
-- that does not exist.
create or replace function pgjob.release_slot(hold bigint) returns boolean
language sql
security definer
set search_path = pg_catalog, pg_temp
as $$
	with d as (delete from pgjob.limit_holds x where x.id = hold
		and pgjob.session_may(x.held_by, pgjob.session_reads()) returning 1)
	select exists (select 1 from d)
$$;

-- Extends a hold that has not expired (one that has may have been given to
-- someone else, as an expired lease is).
create or replace function pgjob.renew_slot(hold bigint,
	ttl interval default '1 minute')
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
	update pgjob.limit_holds x set expires_at = clock_timestamp() + ttl
	 where x.id = hold and x.expires_at >= clock_timestamp()
	   and pgjob.session_may(x.held_by, pgjob.session_reads());
	return found;
end
$$;

-- A token bucket of rate n per period_ms holding at most cap tokens, that
-- held tokens at tokens_at (null: full): its tokens at clk, never below
-- -10^12 (no cost reaches that: they are at most 10^6).  The time between
-- the two is taken in seconds as numbers, not as an interval, which
-- cannot hold every difference of two timestamps.
create or replace function pgjob.bucket(tokens float8, tokens_at timestamptz,
	clk timestamptz, n int, period_ms bigint, cap int) returns float8
language sql
immutable
as $$
	select case when tokens is null or tokens_at is null then cap::float8
		else greatest(-1e12::float8, least(cap::float8, tokens
			+ greatest(0, (extract(epoch from clk)
				- extract(epoch from tokens_at)) * 1000)::float8
			* n::float8 / period_ms)) end
$$;

-- Milliseconds until a bucket holding tok tokens holds need: at most
-- 10^15 (31,700 years, the longest period), so that it always fits a
-- bigint and an interval.
create or replace function pgjob.bucket_wait(tok float8, need float8, n int,
	period_ms bigint) returns bigint
language sql
immutable
as $$
	select case when tok >= need then 0
		else least(ceil(least(need - tok, 1e13::float8) * period_ms / n),
			1e15::float8)::bigint end
$$;

-- Takes cost tokens from q's rate limit (and from key's, with
-- rate_per_key), in the caller's transaction: the same budget as the
-- queue's jobs.  taken false: not enough tokens; retry_after says when
-- there will be.  A rollback gives the tokens back.  It locks q's limit row
-- until the transaction ends: call it late, in a short transaction.  The
-- cost is bounded as a job's is.
create or replace function pgjob.take_rate(queue text, cost int default 1,
	key text default null, out taken boolean, out retry_after interval)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
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
	if cost is null or cost not between 0 and 1000000 then
		raise exception 'pgjob.take_rate: cost must be between 0 and 1000000, not %',
			coalesce(cost::text, 'null') using errcode = '22023';
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


-- enqueue_many() with its jobs' owner.
create or replace function pgjob.enqueue_many(jobs jsonb)
returns setof bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	fn constant text := 'pgjob.enqueue_many';
	max_size bigint;
	seq regclass := pg_get_serial_sequence('pgjob.jobs', 'id');
	bad bigint;
	keyed bigint;
	ids bigint[];
	keys text[];
	fresh boolean[];
	i int;
	got bigint;
	-- Who enqueues (docs/security.md): once a call, not once a job.
	me oid := quote_ident(session_user)::regrole;
begin
	if jsonb_typeof(jobs) is distinct from 'array' then
		raise exception '%: jobs must be a JSON array of job objects, not %',
			fn, coalesce(jsonb_typeof(jobs), 'null')
			using errcode = '22023';
	end if;
	if jsonb_array_length(jobs) = 0 then
		return;
	end if;
	select coalesce(s.max_payload_bytes, 1048576) into max_size
	  from pgjob.settings s;
	begin
		-- The fast path: one pass that tells whether any element breaks
		-- a rule of pgjob.check_job_object() (the same rules, as one
		-- expression; a cast that fails raises) and how many have a
		-- unique_key, then one INSERT.  Any error brings the slow path
		-- below, which finds the element and says what is wrong with it.
		select count(*) filter (where case
			when jsonb_typeof(j) <> 'object' then true
			when j - pgjob.job_keys() <> '{}' then true
			when jsonb_typeof(j->'kind') is distinct from 'string'
			     or j->>'kind' = '' then true
			when coalesce(jsonb_typeof(j->'payload'), 'null')
			     not in ('object', 'null') then true
			when octet_length(coalesce(nullif(j->'payload', 'null'),
			     '{}')::text) > max_size then true
			when coalesce(jsonb_typeof(j->'queue'), 'null')
			     not in ('string', 'null')
			     or coalesce(jsonb_typeof(j->'unique_key'), 'null')
			     not in ('string', 'null')
			     or coalesce(jsonb_typeof(j->'ordering_key'), 'null')
			     not in ('string', 'null')
			     or coalesce(jsonb_typeof(j->'limit_key'), 'null')
			     not in ('string', 'null') then true
			else (j->>'priority')::int not between -32768 and 32767
			     or (j->>'max_attempts')::int < 1
			     or (j->>'cost')::int not between 0 and 1000000
			     or not isfinite((j->>'run_at')::timestamptz)
		       end),
			count(*) filter (where j->>'unique_key' is not null)
		  into bad, keyed
		  from jsonb_array_elements(jobs) e(j);
		if bad > 0 then
			raise exception '%: refused', fn using errcode = '22023';
		end if;
		if keyed = 0 then
			-- Nothing to arbitrate (the only unique index a new row
			-- can hit is jobs_unique_key_idx): a plain INSERT, whose
			-- ids, drawn in the order of the elements, rise with it.
			return query
			with ins as (
				insert into pgjob.jobs (kind, payload, queue,
					run_at, priority, max_attempts,
					ordering_key, limit_key, cost, enqueued_by)
				select r.kind, r.payload, r.queue, r.run_at,
					r.priority, r.max_attempts,
					r.ordering_key, r.limit_key, r.cost, me
				  from pgjob.job_rows(jobs) r order by r.n
				returning pgjob.jobs.id
			)
			select ins.id from ins order by ins.id;
			return;
		end if;
		-- Keys that nobody holds, the common case: a plain INSERT, as
		-- without keys.  Its unique index refuses a key held in the
		-- table or earlier in the array (after waiting for the holder's
		-- transaction, as ON CONFLICT would), and then the statement
		-- below arbitrates element by element.
		begin
			with ins as (
				insert into pgjob.jobs (kind, payload, queue,
					run_at, priority, max_attempts, unique_key,
					ordering_key, limit_key, cost, enqueued_by)
				select r.kind, r.payload, r.queue, r.run_at,
					r.priority, r.max_attempts, r.unique_key,
					r.ordering_key, r.limit_key, r.cost, me
				  from pgjob.job_rows(jobs) r order by r.n
				returning pgjob.jobs.id
			)
			select array_agg(ins.id order by ins.id) into ids from ins;
			return query select u.id from unnest(ids) u(id);
			return;
		exception when unique_violation then
			null;
		end;
		-- Ids are drawn in the order of the elements, so that an
		-- element whose unique_key an earlier one holds loses to it.
		with e as materialized (
			select nextval(seq) as id, r.*
			  from pgjob.job_rows(jobs) r order by r.n
		), ins as (
			insert into pgjob.jobs (id, kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost, enqueued_by)
			select e.id, e.kind, e.payload, e.queue, e.run_at,
				e.priority, e.max_attempts, e.unique_key,
				e.ordering_key, e.limit_key, e.cost, me
			  from e order by e.n
			on conflict do nothing
			returning pgjob.jobs.id
		)
		select array_agg(e.id order by e.n),
			array_agg(e.unique_key order by e.n),
			array_agg(ins.id is not null order by e.n)
		  into ids, keys, fresh
		  from e left join ins on ins.id = e.id;
	exception when others then
		for i in 0 .. jsonb_array_length(jobs) - 1 loop
			perform pgjob.check_job_object(
				format('%s: jobs[%s]', fn, i), jobs->i);
		end loop;
		raise;
	end;
	-- An element that did not go in: its unique_key is held by an
	-- unfinished job, which answers for it.  When that job ended between
	-- the two statements, the element goes in after all (enqueue()'s
	-- loop).
	for i in 1 .. cardinality(ids) loop
		continue when fresh[i];
		loop
			select j.id into got from pgjob.jobs j
			 where j.unique_key = keys[i]
			   and j.finished_at is null and coalesce(j.parents_left, 0) = 0;
			exit when found;
			insert into pgjob.jobs (kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost, enqueued_by)
			select r.kind, r.payload, r.queue, r.run_at, r.priority,
				r.max_attempts, r.unique_key, r.ordering_key,
				r.limit_key, r.cost, me
			  from pgjob.job_rows(jsonb_build_array(jobs->(i - 1))) r
			on conflict do nothing
			returning id into got;
			exit when got is not null;
		end loop;
		ids[i] := got;
	end loop;
	return query select u.id from unnest(ids) with ordinality u(id, n)
		order by u.n;
end
$$

;
-- What pgjob.workflow_step() checked of a step before it enqueued it, with
-- the same messages: the slow path of enqueue_workflow(), which finds the
-- step its one-pass check refused.  parents: whether the step has any.
create function pgjob.workflow_check(fn text, st jsonb, parents boolean)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
	w text := format('%s: step "%s"', fn, st ->> 'name');
	c record;
	pr int;
	ma int;
	co int;
	ra timestamptz;
	pol text;
begin
	begin
		pr := coalesce((st ->> 'priority')::int, 0);
		ma := (st ->> 'max_attempts')::int;
		co := coalesce((st ->> 'cost')::int, 1);
		ra := (st ->> 'run_at')::timestamptz;
	exception when others then
		raise exception '%: %', w, sqlerrm using errcode = '22023';
	end;
	select * into c from pgjob.check_job(w, st ->> 'kind',
		coalesce(st -> 'payload', '{}'), ra, pr, ma, co);
	if parents then
		pol := coalesce(st ->> 'on_parent_failure', 'cancel');
		if pol not in ('cancel', 'run', 'wait') then
			raise exception 'pgjob.enqueue: on_parent_failure must be cancel, run or wait, not "%"',
				pol using errcode = '22023';
		end if;
		if c.checked ? 'pgjob' then
			raise exception 'pgjob.enqueue: a job with parents cannot have a "pgjob" key in its payload'
				using errcode = '22023',
				hint = 'Its parents'' results go there ("pgjob": {"parents": ...}).';
		end if;
	elsif st ? 'on_parent_failure' then
		raise exception '%: on_parent_failure needs after', w
			using errcode = '22023';
	end if;
end
$$;

-- A workflow in one call.  The checks and the order of the steps (Kahn's)
-- are those of version 11; then the steps go in with one INSERT, in that
-- order (a parent's id is below its children's), and their edges with
-- another.  Every parent is a step of this workflow, enqueued in this
-- statement and not ended, so no parent's row is looked up: a step with
-- parents waits for as many as it has, one without is available.
create or replace function pgjob.enqueue_workflow(spec jsonb)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	fn constant text := 'pgjob.enqueue_workflow';
	steps jsonb;
	sa jsonb[];
	n int;
	names text[];
	idx jsonb;         -- per name, its step number
	st jsonb;
	par int[];         -- edges, parent and child step numbers (1-based)
	chi int[];
	indeg int[];
	nparents int[];    -- per step, its parents (indeg before Kahn)
	haskids boolean[]; -- per step, whether it is a parent
	first int[];       -- per step, its first edge in the edges sorted by parent
	queue_ int[];
	head int := 1;
	i int;
	e int;
	c int;
	ids bigint[];      -- per step, its job's id
	wf bigint;
	bad text;
	nbad bigint;
	who text;
	max_size bigint;
	me oid := quote_ident(session_user)::regrole;
	seq regclass := pg_get_serial_sequence('pgjob.jobs', 'id');
	known text[] := array['name', 'kind', 'payload', 'after',
		'on_parent_failure', 'queue', 'priority', 'run_at', 'max_attempts',
		'ordering_key', 'limit_key', 'cost'];
begin
	if jsonb_typeof(spec) is distinct from 'object' then
		raise exception '%: the workflow must be a JSON object', fn
			using errcode = '22023';
	end if;
	select k into bad from jsonb_object_keys(spec) k
	 where k not in ('name', 'steps') limit 1;
	if bad is not null then
		raise exception '%: unknown key "%" (a workflow has name and steps)',
			fn, bad using errcode = '22023';
	end if;
	if spec ? 'name' and jsonb_typeof(spec -> 'name') not in ('string', 'null') then
		raise exception '%: name must be a string', fn using errcode = '22023';
	end if;
	steps := spec -> 'steps';
	if jsonb_typeof(steps) is distinct from 'array' or jsonb_array_length(steps) = 0 then
		raise exception '%: steps must be a non-empty array', fn
			using errcode = '22023';
	end if;
	n := jsonb_array_length(steps);
	if n > pgjob.workflow_max_steps() then
		raise exception '%: % steps, over the limit of %', fn, n,
			pgjob.workflow_max_steps() using errcode = '54000';
	end if;
	-- One element after another of a large jsonb would read all of it
	-- each time: an array of its elements reads each once.
	sa := array(select x.value from jsonb_array_elements(steps)
		    with ordinality x order by x.ordinality);
	-- Each step: an object with a name and a kind, and known keys only.
	for i in 1 .. n loop
		st := sa[i];
		if jsonb_typeof(st) is distinct from 'object' then
			raise exception '%: steps[%] must be an object', fn, i - 1
				using errcode = '22023';
		end if;
		select k into bad from jsonb_object_keys(st) k
		 where k <> all(known) limit 1;
		if bad is not null then
			raise exception '%: steps[%]: unknown key "%"', fn, i - 1, bad
				using errcode = '22023';
		end if;
		if jsonb_typeof(st -> 'name') is distinct from 'string'
		   or st ->> 'name' = '' then
			raise exception '%: steps[%] needs a name (a non-empty string)',
				fn, i - 1 using errcode = '22023';
		end if;
		if st ? 'after' and jsonb_typeof(st -> 'after') <> 'array' then
			raise exception '%: step "%": after must be an array of step names',
				fn, st ->> 'name' using errcode = '22023';
		end if;
	end loop;
	names := array(select s ->> 'name' from jsonb_array_elements(steps) s);
	select x into bad from unnest(names) x group by x having count(*) > 1 limit 1;
	if bad is not null then
		raise exception '%: two steps are named "%"', fn, bad
			using errcode = '22023';
	end if;
	-- Each name's step number (1-based), looked up in a jsonb object (a
	-- binary search), not joined: no plan here rests on the estimate of
	-- an array's length, which a generic plan takes to be 100.  The edges,
	-- sorted by parent (for Kahn), one sort for DISTINCT and the order
	-- both; an element that is not the name of a step gives a null parent,
	-- sorted last, and the error.
	idx := (select jsonb_object_agg(y.v, y.i) from unnest(names)
		  with ordinality y(v, i));
	select coalesce(array_agg(e.p), '{}'), coalesce(array_agg(e.c), '{}')
	  into par, chi
	  from (select distinct case when jsonb_typeof(a.value) = 'string'
			then (idx ->> (a.value #>> '{}'))::int end as p, s.i::int as c
		  from unnest(sa) with ordinality s(st, i)
		  cross join lateral jsonb_array_elements(s.st -> 'after') a
		 order by 1, 2) e;
	if cardinality(par) > 0 and par[cardinality(par)] is null then
		select a.value #>> '{}', s.st ->> 'name' into bad, who
		  from unnest(sa) s(st)
		  cross join lateral jsonb_array_elements(coalesce(s.st -> 'after', '[]')) a
		 where jsonb_typeof(a.value) <> 'string'
		    or not idx ? (a.value #>> '{}')
		 limit 1;
		raise exception '%: step "%" is after "%", which is not a step of this workflow',
			fn, who, bad using errcode = '23503';
	end if;
	if cardinality(par) > pgjob.workflow_max_edges() then
		raise exception '%: % edges, over the limit of %', fn,
			cardinality(par), pgjob.workflow_max_edges() using errcode = '54000';
	end if;
	-- Kahn: in-degrees, each step's first edge (edges sorted by parent),
	-- then steps whose parents are all placed, in turn.
	indeg := array_fill(0, array[n]);
	first := array_fill(0, array[n + 1]);
	for e in 1 .. cardinality(par) loop
		indeg[chi[e]] := indeg[chi[e]] + 1;
	end loop;
	nparents := indeg;
	haskids := array_fill(false, array[n]);
	for e in 1 .. cardinality(par) loop
		haskids[par[e]] := true;
	end loop;
	e := 1;
	for i in 1 .. n + 1 loop
		while e <= cardinality(par) and par[e] < i loop
			e := e + 1;
		end loop;
		first[i] := e;
	end loop;
	-- (Loops, not queries, for what they write into an array.)
	queue_ := '{}';
	for i in 1 .. n loop
		if indeg[i] = 0 then
			queue_ := queue_ || i;
		end if;
	end loop;
	while head <= cardinality(queue_) loop
		i := queue_[head];
		head := head + 1;
		for e in first[i] .. first[i + 1] - 1 loop
			c := chi[e];
			indeg[c] := indeg[c] - 1;
			if indeg[c] = 0 then
				queue_ := queue_ || c;
			end if;
		end loop;
	end loop;
	if cardinality(queue_) < n then
		bad := '';
		e := 0;
		for i in 1 .. n loop
			if indeg[i] > 0 and e < 5 then
				bad := bad || case when e > 0 then ', ' else '' end
					|| format('"%s"', names[i]);
				e := e + 1;
			end if;
		end loop;
		raise exception '%: a cycle: steps % depend on each other, in a circle or on one',
			fn, bad using errcode = '22023';
	end if;
	-- Each step's fields, checked in one pass as workflow_check() checks
	-- them one step at a time (a cast that fails raises); any error, and
	-- the steps are checked again one by one, in the order they would be
	-- enqueued, so that the first bad one is named as before.
	select coalesce(x.max_payload_bytes, 1048576) into max_size
	  from pgjob.settings x;
	begin
		select count(*) filter (where coalesce(s.st ->> 'kind', '') = ''
			or coalesce(jsonb_typeof(s.st -> 'payload'), 'object') <> 'object'
			or octet_length(coalesce(s.st -> 'payload', '{}')::text) > max_size
			or (s.st ->> 'priority')::int not between -32768 and 32767
			or (s.st ->> 'max_attempts')::int < 1
			or (s.st ->> 'cost')::int not between 0 and 1000000
			or not isfinite((s.st ->> 'run_at')::timestamptz)
			or case when s.np > 0
				then coalesce(s.st ->> 'on_parent_failure', 'cancel')
					not in ('cancel', 'run', 'wait')
				     or coalesce(s.st -> 'payload', '{}') ? 'pgjob'
				else s.st ? 'on_parent_failure' end)
		  into nbad
		  from unnest(sa, nparents) s(st, np);
	exception when others then
		nbad := 1;
	end;
	if nbad > 0 then
		for head in 1 .. n loop
			i := queue_[head];
			perform pgjob.workflow_check(fn, sa[i], nparents[i] > 0);
		end loop;
	end if;
	insert into pgjob.workflows (name, steps) values (spec ->> 'name', n)
	returning id into wf;
	-- Ids in the order of queue_, drawn in one pass of it; then per step.
	select array_agg(o.id order by o.i) into ids
	  from (select q.i, nextval(seq) as id
		  from unnest(queue_) with ordinality q(i, k)) o;
	insert into pgjob.jobs (id, kind, payload, queue, run_at, priority,
		max_attempts, ordering_key, limit_key, cost, state, parents_left,
		on_parent_failure, children, workflow_id, step, enqueued_by)
	select s.id, s.st ->> 'kind', coalesce(s.st -> 'payload', '{}'),
		coalesce(s.st ->> 'queue', 'default'),
		coalesce((s.st ->> 'run_at')::timestamptz, now()),
		coalesce((s.st ->> 'priority')::int, 0),
		(s.st ->> 'max_attempts')::int, s.st ->> 'ordering_key',
		s.st ->> 'limit_key', coalesce((s.st ->> 'cost')::int, 1),
		case when s.np > 0 then 'waiting' else 'available' end,
		nullif(s.np, 0),
		case when s.np > 0 then nullif(coalesce(
			s.st ->> 'on_parent_failure', 'cancel'), 'cancel') end,
		case when s.kids then true end,
		wf, s.st ->> 'name', me
	  from unnest(sa, nparents, ids, haskids) s(st, np, id, kids)
	 order by s.id;
	-- The edges by subscript, a constant time each: no join whose plan
	-- would rest on the estimate of an array's length.
	insert into pgjob.job_deps (parent, child, resolved)
	select ids[e.p], ids[e.c], null from unnest(par, chi) e(p, c)
	 order by 1, 2;
	return wf;
end
$$;

drop function pgjob.workflow_step(text, jsonb, bigint, bigint[]);

-- Roles that read the jobs kept whatever PUBLIC gave them: a worker role
-- granted before functions it calls were added (pgjob.key_candidates() in
-- version 25, and the like) called those through PUBLIC.  Each such role
-- gets EXECUTE on every function it may run now: one that updates or
-- deletes jobs (a worker role) on all of them; one that only reads jobs (a
-- console's or an operator's read-only role) on those that run with the
-- caller's rights, which can do nothing its grants do not allow.  Roles
-- that only enqueue read no job and get nothing here: their functions are
-- granted by name (docs/security.md).
do $$
declare
	r record;
	f record;
begin
	for r in select a.oid, a.rolname from pg_catalog.pg_roles a
		  where not a.rolsuper and a.rolname !~ '^pg_'
		    and a.oid <> (select n.nspowner from pg_catalog.pg_namespace n
				  where n.nspname = 'pgjob')
		    and (has_table_privilege(a.oid, 'pgjob.jobs', 'SELECT')
			 or has_table_privilege(a.oid, 'pgjob.all_jobs', 'SELECT'))
	loop
		for f in select p.oid::regprocedure as sig, p.prosecdef
			   from pg_catalog.pg_proc p
			  where p.pronamespace = 'pgjob'::regnamespace
		loop
			if not f.prosecdef
			   or has_table_privilege(r.oid, 'pgjob.jobs', 'UPDATE')
			   or has_table_privilege(r.oid, 'pgjob.jobs', 'DELETE') then
				execute format('grant execute on function %s to %I',
					f.sig, r.rolname);
			end if;
		end loop;
	end loop;
end
$$;

-- EXECUTE: PUBLIC keeps it only on the functions applications call with
-- their own rights (docs/security.md, "Functions any role may call"); the
-- worker role has every function (its grant on all functions in the
-- schema), and the enqueue role those granted to it by name.
revoke execute on all functions in schema pgjob from public;
grant execute on function pgjob.fence(text, bigint),
	pgjob.request_begin(text, text, text, interval, boolean),
	pgjob.request_take(text, text, text, interval),
	pgjob.request_take_nowait(text, text, text, interval),
	pgjob.request_finish(text, jsonb, int, text)
	to public;
