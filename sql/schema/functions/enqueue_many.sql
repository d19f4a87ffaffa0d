-- Enqueues the jobs of a JSON array in one call, in order; returns their
-- ids in the order of the elements (docs/getting-started.md, "Many jobs at
-- once").  Each element is a job object checked as enqueue() checks a job
-- (pgjob.check_job()); an error names the element, 0-based
-- ("pgjob.enqueue_many: jobs[3]: ..."), and leaves nothing of the call.  depends_on, on_parent_failure and batch_id
-- are refused: such jobs go one by one through enqueue().  The array goes
-- in with one plain INSERT first, keys or not (keys are almost always new);
-- only when a key is held (by an unfinished job, or by an earlier element)
-- is that work undone and the array arbitrated element by element with ON
-- CONFLICT: a held key's holder is the answer for its element (version 20).
-- Each job records the role that enqueued it.
--
-- Its look-ups by unique key after an "on conflict do nothing" name the
-- condition of jobs_unique_key_idx, not the state (version 27).  (This
-- text is the catalog's: version 27 edited version 20's in place before
-- version 30 restated it.)
create or replace function pgjob.enqueue_many(jobs jsonb)
returns setof bigint
language plpgsql
security definer
set search_path to 'pg_catalog', 'pg_temp'
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
	-- The session's trace context (pgjob.traceparent), for every job.
	tp text := pgjob.trace_context(null);
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
					ordering_key, limit_key, cost, enqueued_by, traceparent)
				select r.kind, r.payload, r.queue, r.run_at,
					r.priority, r.max_attempts,
					r.ordering_key, r.limit_key, r.cost, me, tp
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
					ordering_key, limit_key, cost, enqueued_by, traceparent)
				select r.kind, r.payload, r.queue, r.run_at,
					r.priority, r.max_attempts, r.unique_key,
					r.ordering_key, r.limit_key, r.cost, me, tp
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
				limit_key, cost, enqueued_by, traceparent)
			select e.id, e.kind, e.payload, e.queue, e.run_at,
				e.priority, e.max_attempts, e.unique_key,
				e.ordering_key, e.limit_key, e.cost, me, tp
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
				limit_key, cost, enqueued_by, traceparent)
			select r.kind, r.payload, r.queue, r.run_at, r.priority,
				r.max_attempts, r.unique_key, r.ordering_key,
				r.limit_key, r.cost, me, tp
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
