-- How many jobs of each queue and kind jobs_done got since t: the console's
-- overview, `pgjob status` and `pgjob top` (which add the ends that stayed
-- in pgjob.jobs, from jobs_finished_idx).  From the BRIN summary: the
-- ranges written before t are not read, whatever the statistics of a
-- ring say (a scan of every ring would read the whole retention).
create or replace function pgjob.done_since(t timestamptz)
returns table (queue text, kind text, n bigint)
language sql
stable
set enable_seqscan = off
as $$
	select d.queue, d.kind, count(*) from pgjob.jobs_done d
	 where d.finished_at > t group by d.queue, d.kind
$$;
