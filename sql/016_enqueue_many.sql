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
-- 2. pgjob.check_job() loses its own SET search_path.  It is not SECURITY
--    DEFINER (it runs with its caller's rights, and its callers that are
--    pin theirs), and a SET clause on a function costs a GUC save and
--    restore on every call: that was a third of what pgjob.enqueue() cost
--    over a plain INSERT of the same row (docs/performance.md, "Enqueue").
--    Every name in its body is schema-qualified or in pg_catalog.

alter function pgjob.check_job(text, text, jsonb, timestamptz, int, int, int)
	reset all;

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
	bad int;
	ids bigint[];
	keys text[];
	fresh boolean[];
	i int;
	k int;
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
		-- expression; a cast that fails raises), then one INSERT.
		-- Any error brings the slow path below, which finds the
		-- element and says what is wrong with it.
		select count(*) into bad
		  from jsonb_array_elements(jobs) e(j)
		 where case
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
		       end;
		if bad > 0 then
			raise exception '%: refused', fn using errcode = '22023';
		end if;
		-- Ids are drawn in the order of the elements, so that an
		-- element whose unique_key an earlier one holds loses to it.
		-- The only unique index a new row can hit is
		-- jobs_unique_key_idx.
		with e as materialized (
			select t.n, nextval(seq) as id, t.j
			  from jsonb_array_elements(jobs) with ordinality t(j, n)
		), ins as (
			insert into pgjob.jobs (id, kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost)
			select e.id, e.j->>'kind',
				coalesce(nullif(e.j->'payload', 'null'), '{}'),
				coalesce(e.j->>'queue', 'default'),
				coalesce((e.j->>'run_at')::timestamptz, now()),
				coalesce((e.j->>'priority')::int, 0),
				(e.j->>'max_attempts')::int,
				e.j->>'unique_key', e.j->>'ordering_key',
				e.j->>'limit_key', coalesce((e.j->>'cost')::int, 1)
			  from e order by e.n
			on conflict do nothing
			returning pgjob.jobs.id
		)
		select array_agg(e.id order by e.n),
			array_agg(e.j->>'unique_key' order by e.n),
			array_agg(ins.id is not null order by e.n)
		  into ids, keys, fresh
		  from e left join ins on ins.id = e.id;
	exception when others then
		for k in 0 .. jsonb_array_length(jobs) - 1 loop
			perform pgjob.check_job_object(
				format('%s: jobs[%s]', fn, k), jobs->k);
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
			k := i - 1;
			insert into pgjob.jobs (kind, payload, queue, run_at,
				priority, max_attempts, unique_key, ordering_key,
				limit_key, cost)
			select e.j->>'kind',
				coalesce(nullif(e.j->'payload', 'null'), '{}'),
				coalesce(e.j->>'queue', 'default'),
				coalesce((e.j->>'run_at')::timestamptz, now()),
				coalesce((e.j->>'priority')::int, 0),
				(e.j->>'max_attempts')::int,
				e.j->>'unique_key', e.j->>'ordering_key',
				e.j->>'limit_key', coalesce((e.j->>'cost')::int, 1)
			  from (select jobs->k as j) e
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
