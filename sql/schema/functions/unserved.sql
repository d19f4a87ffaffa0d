-- The available jobs that no live worker serves (a worker is live while
-- its heartbeat is younger than `live`), per kind and queue: how many, how
-- many are due, since when the oldest due one waits, and whether a live
-- worker handles the kind at all (false: no handler anywhere; true: only
-- not in this queue).  pgjob status, pgjob doctor, the console and the
-- metrics read it.  Along jobs_claim_idx, as the queue depths; the pairs
-- are few, so the workers are looked at per pair, not per job.  The live
-- workers' kinds are a set (w, a row per kind and worker), looked up by
-- hash: until version 46 each pair walked every worker's array of kinds
-- ("p.kind = any(w.kinds)"), and with two workers of 10,000 kinds the
-- function took seconds of that alone.  It runs with the caller's rights:
-- the worker role reads both tables.
create or replace function pgjob.unserved(live interval default '30 seconds')
returns table (kind text, queue text, jobs bigint, due bigint,
	       oldest_due_at timestamptz, kind_handled boolean)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
	with w as (
		select k.kind, x.queues from pgjob.workers x
		 cross join lateral unnest(x.kinds) k(kind)
		 where x.heartbeat_at >= now() - live),
	p as (
		select j.kind, j.queue, count(*) as jobs,
		       count(*) filter (where j.run_at <= now()) as due,
		       min(j.run_at) filter (where j.run_at <= now())
			as oldest_due_at
		  from pgjob.jobs j
		 where j.finished_at is null
		   and coalesce(j.parents_left, 0) = 0
		   and j.state = 'available'
		 group by j.kind, j.queue)
	select p.kind, p.queue, p.jobs, p.due, p.oldest_due_at,
	       coalesce(p.kind in (select w.kind from w), false)
	  from p
	 where not exists (
		select 1 from w
		 where w.kind = p.kind
		   and (w.queues is null or p.queue = any(w.queues)))
	 order by p.queue, p.kind
$$;
