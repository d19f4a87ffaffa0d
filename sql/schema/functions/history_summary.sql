-- The history over the window since, one row per queue and kind that
-- ended an attempt in it (of_queue: null for every queue): as pgjob.history()
-- (the same counts and percentiles), summed over the window.
create or replace function pgjob.history_summary(since interval,
	of_queue text default null)
returns table (queue text, kind text, done bigint, failed bigint,
	retried bigint, wait_p50 double precision, wait_p95 double precision,
	wait_p99 double precision, run_p50 double precision,
	run_p95 double precision, run_p99 double precision)
language plpgsql
stable
as $$
#variable_conflict use_column
begin
	if since is null or since <= interval '0' or since > interval '31 days' then
		raise exception 'pgjob.history_summary: the window must be more than 0 and at most 31 days, not %',
			coalesce(since::text, 'null')
			using errcode = '22023';
	end if;
	return query
	select g.queue, g.kind, g.done, g.failed, g.retried,
	       pgjob.history_quantile(g.w, 0.5), pgjob.history_quantile(g.w, 0.95),
	       pgjob.history_quantile(g.w, 0.99), pgjob.history_quantile(g.u, 0.5),
	       pgjob.history_quantile(g.u, 0.95), pgjob.history_quantile(g.u, 0.99)
	  from (select x.queue, x.kind, sum(x.done)::bigint as done,
		       sum(x.failed)::bigint as failed,
		       sum(x.retried)::bigint as retried,
		       pgjob.history_merge(x.wait_ms) as w,
		       pgjob.history_merge(x.run_ms) as u
		  from pgjob.history_rows(now() - since, of_queue) x
		 group by x.queue, x.kind) g
	 order by g.queue, g.kind;
end
$$;
