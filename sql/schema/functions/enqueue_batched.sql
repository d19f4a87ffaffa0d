-- A batch the session may not act on is no batch to it; its row is not
-- locked (the check is the query's, before its lock).
create or replace function pgjob.enqueue_batched(kind text, payload jsonb,
	queue text, run_at timestamptz, priority int, max_attempts int,
	unique_key text, ordering_key text, limit_key text, cost int,
	deps bigint[], pol text, b bigint, tp text default null)
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
			null, null, b, tp);
	end if;
	insert into pgjob.jobs (kind, payload, queue, run_at, priority,
		max_attempts, ordering_key, limit_key, cost, batch_id, enqueued_by,
		traceparent)
	values (kind, payload, coalesce(queue, 'default'), run_at, priority,
		max_attempts, ordering_key, limit_key, cost, b,
		quote_ident(session_user)::regrole, tp)
	returning id into new_id;
	return new_id;
end
$$;
