-- Every job: pgjob.jobs and the plain jobs done of pgjob.jobs_done (dead is
-- false for those).  `pgjob show`, `pgjob jobs`, the console and the
-- attempt history read it; an application that reads a finished job's row
-- (its result) reads it here.  A column of pgjob.jobs that a done job keeps
-- is added to both selects.
create or replace view pgjob.all_jobs as
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status, dead, traceparent
  from pgjob.jobs
union all
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status, false, traceparent
  from pgjob.jobs_done;
