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
			x.enqueued_by, x.traceparent),
	i as (insert into pgjob.jobs (id, queue, kind, payload, priority,
		run_at, state, attempts, max_attempts, locked_by, locked_until,
		lease_token, unique_key, ordering_key, last_error, result,
		created_at, finished_at, lost_attempts, limit_key, cost,
		attempted_at, children, parents_left, on_parent_failure,
		workflow_id, step, batch_id, last_wall_ms, last_cpu_ms,
		last_max_rss_kb, last_status, enqueued_by, traceparent)
	overriding system value select * from m returning 1)
	select count(*) from i
$$;
