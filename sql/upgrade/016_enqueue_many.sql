-- pgjobd schema, version 16: many jobs in one call, and a cheaper single
-- enqueue (docs/getting-started.md, "Many jobs at once").
--
-- 1. pgjob.enqueue_many(jobs jsonb): a JSON array of job objects, each with
--    the keys of pgjob.enqueue()'s parameters (kind, payload, queue,
--    run_at, priority, max_attempts, unique_key, ordering_key, limit_key,
--    cost; JSON null or a missing key takes enqueue()'s default).  It
--    returns one id per element, in the order of the elements: the new
--    job's, or, for a unique_key that an unfinished job holds (in the table
--    or earlier in the same array), that job's, as enqueue() does.  The
--    jobs go in with one INSERT ... SELECT, so the statement trigger sends
--    one NOTIFY per call.  Every element is checked as enqueue() checks a
--    job (pgjob.check_job()); an error names the element, 0-based, as in
--    "pgjob.enqueue_many: jobs[3]: payload of ... bytes is over the limit",
--    and leaves nothing of the call.  depends_on, on_parent_failure and
--    batch_id are refused: such jobs go one by one through enqueue().
-- 2. pgjob.enqueue() costs less, every check kept: its checks are one
--    expression (pgjob.check_job() in an assignment, which PL/pgSQL runs
--    without a query of its own), and a job without a unique_key goes in
--    with a plain INSERT (ON CONFLICT has nothing to arbitrate then: the
--    only unique index a new row can hit is jobs_unique_key_idx, and its
--    speculative insertion cost about 7 us a call).  The rest of what it
--    costs over a plain INSERT is the PL/pgSQL call, SECURITY DEFINER with
--    its pinned search_path (migration 8) and the payload limit read from
--    pgjob.settings (docs/performance.md, "Enqueue").

create or replace function pgjob.enqueue(
	kind text,
	payload jsonb default '{}',
	queue text default 'default',
	run_at timestamptz default now(),
	priority int default 0,
	max_attempts int default null,
	unique_key text default null,
	ordering_key text default null,
	limit_key text default null,
	cost int default 1,
	depends_on bigint[] default null,
	on_parent_failure text default null,
	batch_id bigint default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
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
	if unique_key is null then
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, ordering_key, limit_key, cost)
		returning id into new_id;
		return new_id;
	end if;
	loop
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key, limit_key, cost)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, unique_key, ordering_key, limit_key,
			cost)
		on conflict do nothing
		returning id into new_id;
		if new_id is not null then
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

-- The keys a job object of pgjob.enqueue_many() may have.
create function pgjob.job_keys() returns text[]
language sql
immutable
parallel safe
as $$
	select array['kind', 'payload', 'queue', 'run_at', 'priority',
		'max_attempts', 'unique_key', 'ordering_key', 'limit_key',
		'cost']
$$;

-- Element j of pgjob.enqueue_many()'s array, checked on the slow path:
-- raises the error that refuses it, with what ("pgjob.enqueue_many:
-- jobs[3]") in front, or returns when it would go in.  Values from the
-- caller are quoted as JSON (control characters escaped) and cut at 64
-- characters in a message.
create function pgjob.check_job_object(what text, j jsonb)
returns void
language plpgsql
stable
as $$
#variable_conflict use_variable
declare
	extra text;
	f text;
	pri int;
	att int;
	cst int;
	at timestamptz;
begin
	if jsonb_typeof(j) is distinct from 'object' then
		raise exception '%: a job must be a JSON object, not %', what,
			coalesce(jsonb_typeof(j), 'null') using errcode = '22023';
	end if;
	select min(k) into extra
	  from jsonb_object_keys(j - pgjob.job_keys()) k;
	if extra in ('depends_on', 'on_parent_failure', 'batch_id') then
		raise exception '%: % is not taken here', what, extra
			using errcode = '22023',
			hint = 'Enqueue a job with parents or of a batch with pgjob.enqueue().';
	elsif extra is not null then
		raise exception '%: unknown key %', what,
			left(to_json(extra)::text, 64) using errcode = '22023',
			hint = 'A job has the keys kind, payload, queue, run_at, '
				'priority, max_attempts, unique_key, ordering_key, '
				'limit_key and cost.';
	end if;
	if jsonb_typeof(j->'kind') is distinct from 'string' then
		raise exception '%: kind must be a string', what
			using errcode = '22023';
	end if;
	foreach f in array array['queue', 'unique_key', 'ordering_key',
		'limit_key'] loop
		if coalesce(jsonb_typeof(j->f), 'null') not in ('string', 'null') then
			raise exception '%: % must be a string, not %', what, f,
				jsonb_typeof(j->f) using errcode = '22023';
		end if;
	end loop;
	begin
		f := 'priority';
		pri := coalesce((j->>'priority')::int, 0);
		f := 'max_attempts';
		att := (j->>'max_attempts')::int;
		f := 'cost';
		cst := coalesce((j->>'cost')::int, 1);
		f := 'run_at';
		at := (j->>'run_at')::timestamptz;
	exception when data_exception then
		raise exception '%: % must be %, not %', what, f,
			case when f = 'run_at' then 'a time' else 'an integer' end,
			left((j->f)::text, 64) using errcode = '22023';
	end;
	perform pgjob.check_job(what, j->>'kind',
		nullif(j->'payload', 'null'), at, pri, att, cst);
end
$$;

-- The rows that the elements of pgjob.enqueue_many()'s array (checked)
-- make, with each element's position n from 1; JSON null or a missing key
-- is enqueue()'s default.  A SQL function of one SELECT: the planner
-- inlines it into the statement that reads it.
create function pgjob.job_rows(jobs jsonb)
returns table (n bigint, kind text, payload jsonb, queue text,
	run_at timestamptz, priority int, max_attempts int, unique_key text,
	ordering_key text, limit_key text, cost int)
language sql
stable
as $$
	select t.n, t.j->>'kind',
		coalesce(nullif(t.j->'payload', 'null'), '{}'),
		coalesce(t.j->>'queue', 'default'),
		coalesce((t.j->>'run_at')::timestamptz, now()),
		coalesce((t.j->>'priority')::int, 0),
		(t.j->>'max_attempts')::int,
		t.j->>'unique_key', t.j->>'ordering_key', t.j->>'limit_key',
		coalesce((t.j->>'cost')::int, 1)
	  from jsonb_array_elements(jobs) with ordinality t(j, n)
$$;

create function pgjob.enqueue_many(jobs jsonb)
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
					ordering_key, limit_key, cost)
				select r.kind, r.payload, r.queue, r.run_at,
					r.priority, r.max_attempts,
					r.ordering_key, r.limit_key, r.cost
				  from pgjob.job_rows(jobs) r order by r.n
				returning pgjob.jobs.id
			)
			select ins.id from ins order by ins.id;
			return;
		end if;
		-- Ids are drawn in the order of the elements, so that an
		-- element whose unique_key an earlier one holds loses to it.
		with e as materialized (
			select nextval(seq) as id, r.*
			  from pgjob.job_rows(jobs) r order by r.n
		), ins as (
			insert into pgjob.jobs (id, kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost)
			select e.id, e.kind, e.payload, e.queue, e.run_at,
				e.priority, e.max_attempts, e.unique_key,
				e.ordering_key, e.limit_key, e.cost
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
			   and j.state in ('available', 'running');
			exit when found;
			insert into pgjob.jobs (kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost)
			select r.kind, r.payload, r.queue, r.run_at, r.priority,
				r.max_attempts, r.unique_key, r.ordering_key,
				r.limit_key, r.cost
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
$$;

-- Who may enqueue one job may enqueue many.
revoke execute on function pgjob.enqueue_many(jsonb) from public;
do $$
declare
	g text;
begin
	for g in select pg_get_userbyid(a.grantee)
		   from pg_proc p, aclexplode(p.proacl) a
		  where p.oid = 'pgjob.enqueue(text, jsonb, text, timestamptz, int, int, text, text, text, int, bigint[], text, bigint)'::regprocedure
		    and a.privilege_type = 'EXECUTE' and a.grantee <> 0
		    and a.grantee <> p.proowner loop
		execute format('grant execute on function pgjob.enqueue_many(jsonb) to %I', g);
	end loop;
end
$$;
