-- A job with parents (pgjob.enqueue() with depends_on, or a step of a
-- workflow), its arguments checked by the caller.  Without a traceparent
-- of its own (tp, checked by the caller) it inherits its first parent's
-- that has one (docs/tracing.md).
create or replace function pgjob.enqueue_child(kind text, payload jsonb,
	queue text, run_at timestamptz, priority int, max_attempts int,
	ordering_key text, limit_key text, cost int, deps bigint[], pol text,
	unique_key text, wf bigint, step text, batch bigint,
	tp text default null)
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
	if tp is null then
		-- attach() brought every parent into pgjob.jobs.
		tp := (select p.traceparent from pgjob.jobs p
			where p.id = any(deps) and p.traceparent is not null
			order by p.id limit 1);
	end if;
	insert into pgjob.jobs (id, kind, payload, queue, run_at, priority,
		max_attempts, ordering_key, limit_key, cost, state, parents_left,
		on_parent_failure, workflow_id, step, batch_id, last_error,
		finished_at, enqueued_by, traceparent)
	values (new_id, kind,
		case when a.state = 'available'
			then pgjob.with_parent(payload, a.add)
			else payload end,
		coalesce(queue, 'default'), run_at, priority, max_attempts,
		ordering_key, limit_key, cost, a.state, a.parents_left,
		nullif(pol, 'cancel'), wf, step, batch, a.why,
		case when a.state = 'cancelled' then now() end,
		quote_ident(session_user)::regrole, tp);
	if a.state = 'cancelled' then
		-- Ended as it came in: counted as the trigger would have.
		perform pgjob.count_end(wf, batch, 'cancelled', 1);
	end if;
	return new_id;
end
$$;
