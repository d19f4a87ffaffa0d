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
	-- The session's trace context (pgjob.traceparent), for every step.
	tp text := pgjob.trace_context(null);
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
		on_parent_failure, children, workflow_id, step, enqueued_by,
		traceparent)
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
		wf, s.st ->> 'name', me, tp
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
