-- Per minute of the window that ends with the current minute (one row per
-- minute, oldest first, zeros where nothing ended): the attempts that ended
-- done, failed (retried or dead) and retried, summed over every worker.  A
-- minute gets what the workers wrote in it: an attempt is counted in the
-- minute of the first heartbeat after its end (10 s at most, while the
-- worker is connected), and a worker that could not write for a while has
-- what it ended then counted in the minute it writes again.  At most 2
-- hours back: older rows are pruned.
create or replace function pgjob.throughput(since interval)
returns table (at timestamptz, done bigint, failed bigint, retried bigint)
language plpgsql
stable
as $$
#variable_conflict use_column
declare
	oldest timestamptz := date_trunc('minute', now() - since)
		+ interval '1 minute';
begin
	if since is null or since <= interval '0' or since > interval '2 hours' then
		raise exception 'pgjob.throughput: the window must be more than 0 and at most 2 hours, not %',
			coalesce(since::text, 'null')
			using errcode = '22023';
	end if;
	-- The rows of the window by the index on at, summed, then every
	-- minute.
	return query
	select g.at, coalesce(x.done, 0)::bigint, coalesce(x.failed, 0)::bigint,
		coalesce(x.retried, 0)::bigint
	  from generate_series(oldest, date_trunc('minute', now()),
			interval '1 minute') g(at)
	  left join (select m.at, sum(m.done) as done,
			sum(m.failed) as failed, sum(m.retried) as retried
		       from pgjob.worker_minutes m
		      where m.at >= oldest
		      group by m.at) x on x.at = g.at
	 order by g.at;
end
$$;
