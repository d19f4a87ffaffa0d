-- The traceparent of each job a limited claim just took, and for a job in
-- a trace the microseconds since it was enqueued and since it was due (its
-- spans before the attempt, docs/tracing.md): the columns 14 to 16 of
-- src/db/claim_limited.c's statement.  VOLATILE, so that it reads with a
-- snapshot of its own, taken after pgjob.claim_limited() returned:
-- pgjob.claim_limited() claims under snapshots newer than its calling
-- statement's, and a job whose enqueue committed between the two is
-- invisible to that statement.  Before version 37 a join in the statement
-- read these columns, and such a job ran outside its trace.
create or replace function pgjob.claimed_traces(ids bigint[])
returns table(id bigint, traceparent text, since_created_us bigint,
	since_due_us bigint)
language plpgsql volatile
as $$
begin
	-- plpgsql, not SQL: a SQL function's statement is planned at every
	-- call (36 µs of every limited claim; version 45), a plpgsql one's
	-- once for the session.
	return query
	select j.id, j.traceparent,
	       (date_part('epoch', now() - j.created_at) * 1000000)::bigint,
	       (date_part('epoch', now() - greatest(j.created_at, j.run_at))
		* 1000000)::bigint
	  from pgjob.jobs j
	 where j.id = any(ids) and j.traceparent is not null;
end
$$;
