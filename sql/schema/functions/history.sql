-- The history of a queue and kind (null: all of them, summed) over the
-- window since, one row per step from the oldest (the step that holds
-- now() - since is left out, as pgjob.throughput() leaves out its
-- minute: so 1 hour in minutes is 60 rows; zeros where nothing
-- ended): attempts done, failed (retried or dead) and retried, and the
-- wait (the claim minus the job's run_at: the enqueue, unless it was
-- scheduled or retried later) and run time percentiles in ms, each the
-- upper bound of its histogram bucket (tables/history.sql), null where no
-- attempt.  An hour older than 24 hours is one row of pgjob.history_hours
-- and falls whole into the step of its start.  At most 30 days back (the
-- pruning keeps no more) and 2000 steps.
create or replace function pgjob.history(queue text, kind text,
	since interval, step interval default interval '1 minute')
returns table (at timestamptz, done bigint, failed bigint, retried bigint,
	wait_p50 double precision, wait_p95 double precision,
	wait_p99 double precision, run_p50 double precision,
	run_p95 double precision, run_p99 double precision)
language plpgsql
stable
as $$
#variable_conflict use_column
declare
	s double precision := extract(epoch from step);
	oldest timestamptz;
begin
	if since is null or since <= interval '0' or since > interval '31 days' then
		raise exception 'pgjob.history: the window must be more than 0 and at most 31 days, not %',
			coalesce(since::text, 'null')
			using errcode = '22023';
	end if;
	if step is null or step < interval '1 minute'
	   or extract(epoch from since) / s > 2000 then
		raise exception 'pgjob.history: the step must be 1 minute or more, and at most 2000 steps in the window, not %',
			coalesce(step::text, 'null')
			using errcode = '22023';
	end if;
	oldest := to_timestamp(floor(extract(epoch from now() - since) / s) * s)
		+ step;
	return query
	with r as (
		select to_timestamp(floor(extract(epoch from x.at) / s) * s) as b,
		       x.done, x.failed, x.retried, x.wait_ms, x.run_ms
		  from pgjob.history_rows(oldest, history.queue, history.kind) x),
	g as (
		select r.b, sum(r.done) as done, sum(r.failed) as failed,
		       sum(r.retried) as retried,
		       pgjob.history_merge(r.wait_ms) as w,
		       pgjob.history_merge(r.run_ms) as u
		  from r group by r.b)
	select t.at, coalesce(g.done, 0)::bigint, coalesce(g.failed, 0)::bigint,
	       coalesce(g.retried, 0)::bigint,
	       pgjob.history_quantile(g.w, 0.5), pgjob.history_quantile(g.w, 0.95),
	       pgjob.history_quantile(g.w, 0.99), pgjob.history_quantile(g.u, 0.5),
	       pgjob.history_quantile(g.u, 0.95), pgjob.history_quantile(g.u, 0.99)
	  from generate_series(oldest, now(), step) t(at)
	  left join g on g.b = t.at
	 order by t.at;
end
$$;
