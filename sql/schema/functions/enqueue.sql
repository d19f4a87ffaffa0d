-- Enqueues a job; returns its id (docs/queues.md; the application calls it
-- in its own transaction).  For a unique_key that an unfinished job already
-- has, returns that job's id and writes nothing.
--
-- Every check is one expression, pgjob.check_job() (the payload under
-- pgjob.settings' max_payload_bytes, run_at finite, priority, max_attempts
-- and cost in range), which PL/pgSQL runs without a query of its own.  A job
-- without a unique_key goes in with a plain INSERT: ON CONFLICT would have
-- nothing to arbitrate, and its speculative insertion cost about 7 us a
-- call.  A child (depends_on) goes through pgjob.enqueue_child(), a job of a
-- batch through pgjob.enqueue_batched().  The job records the role that
-- enqueued it (session_user: in a SECURITY DEFINER function current_user
-- is the owner), which alone may act on it by id (docs/security.md, "Who
-- may act on a job by its id").  SECURITY DEFINER with a pinned
-- search_path: the enqueue role needs no right on the tables.
--
-- The statement trigger jobs_notify (triggers/jobs.sql) wakes the workers
-- when the transaction commits.  Many jobs in one call: enqueue_many().
--
-- traceparent (version 36): the W3C trace context the job runs in, else
-- the session's pgjob.traceparent; an invalid one is dropped with a
-- warning (pgjob.trace_context(), docs/tracing.md).
create or replace function pgjob.enqueue(kind text,
	payload jsonb default '{}', queue text default 'default',
	run_at timestamptz default now(), priority int default 0,
	max_attempts int default null, unique_key text default null,
	ordering_key text default null, limit_key text default null,
	cost int default 1, depends_on bigint[] default null,
	on_parent_failure text default null, batch_id bigint default null,
	traceparent text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
	me oid;
	tp text;
begin
	-- The setting is read in an expression, which PL/pgSQL evaluates
	-- without a query; pgjob.trace_context(), a call, only checks a
	-- value there is.
	tp := coalesce(traceparent,
		nullif(current_setting('pgjob.traceparent', true), ''));
	if tp is not null then
		tp := pgjob.trace_context(tp);
	end if;
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
			cost, depends_on, on_parent_failure, batch_id, tp);
	end if;
	if depends_on is not null and cardinality(depends_on) > 0 then
		return pgjob.enqueue_child(kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost, depends_on,
			on_parent_failure, unique_key, null, null, null, tp);
	end if;
	-- Who enqueues (docs/security.md, "Who may act on a job by its id").
	me := quote_ident(session_user)::regrole;
	if unique_key is null then
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, ordering_key, limit_key, cost, enqueued_by,
			traceparent)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, ordering_key, limit_key, cost, me,
			tp)
		returning id into new_id;
		return new_id;
	end if;
	loop
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key, limit_key, cost,
			enqueued_by, traceparent)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, unique_key, ordering_key, limit_key,
			cost, me, tp)
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
