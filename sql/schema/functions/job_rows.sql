-- The rows that the elements of pgjob.enqueue_many()'s array (checked)
-- make, with each element's position n from 1; JSON null or a missing key
-- is enqueue()'s default.  A SQL function of one SELECT: the planner
-- inlines it into the statement that reads it.
create or replace function pgjob.job_rows(jobs jsonb)
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
