-- A job's timeline (docs/console.md, `pgjob show`): when it was enqueued,
-- each attempt's start and end with its worker (pgjob.job_attempts()), the
-- children its end released (pgjob.job_deps), and when it is due next
-- while it waits; oldest first.  wait_ms: on a start, the time since the
-- event before it (the enqueue, or the previous attempt's end): how long
-- the job waited for that attempt.
create or replace function pgjob.job_timeline(j bigint)
returns table (at timestamptz, event text, attempt int, worker text,
	wait_ms bigint, detail text)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
	with ev as (
		select x.created_at as at, 0 as o, 'enqueued'::text as event,
		       null::int as attempt, null::text as worker,
		       concat_ws(' ', 'queue ' || x.queue, 'kind ' || x.kind) as detail
		  from pgjob.all_jobs x where x.id = j
		union all
		select a.started_at, 1, 'started', a.attempt, a.worker, null
		  from pgjob.job_attempts(j) a where a.started_at is not null
		union all
		select a.finished_at, 2, 'ended', a.attempt, a.worker,
		       concat_ws(': ', a.outcome, a.error)
		  from pgjob.job_attempts(j) a where a.finished_at is not null
		union all
		select x.finished_at, 3, 'released', null, null,
		       'job ' || d.child || ' (' || d.resolved || ')'
		  from pgjob.job_deps d join pgjob.all_jobs x on x.id = d.parent
		 where d.parent = j and d.resolved is not null
		   and x.finished_at is not null
		union all
		select x.run_at, 4, 'due', x.attempts + 1, null, null
		  from pgjob.all_jobs x
		 where x.id = j and x.state = 'available')
	select ev.at, ev.event, ev.attempt, ev.worker,
	       case when ev.event = 'started' then
			(extract(epoch from ev.at - lag(ev.at) over w) * 1000)::bigint
	       end,
	       ev.detail
	  from ev
	 where ev.at is not null
	window w as (order by ev.at, ev.o)
	 order by ev.at, ev.o
$$;
