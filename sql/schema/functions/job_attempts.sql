-- The attempt history (sql/upgrade/013_attempts.sql) of a job in either table.
create or replace function pgjob.job_attempts(j bigint)
returns table (attempt int, started_at timestamptz, finished_at timestamptz,
	worker text, outcome text, status int, error text, wall_ms int,
	cpu_ms int, max_rss_kb int, token bigint)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
	select a.attempt, a.started_at, a.finished_at, a.worker, a.outcome,
		a.status, a.error, a.wall_ms, a.cpu_ms, a.max_rss_kb, a.token
	  from pgjob.attempts a where a.job_id = j
	union all
	-- While it runs, the figures on the row are an earlier attempt's.
	select x.attempts, x.attempted_at,
		case when x.state = 'done' then x.finished_at end, x.locked_by,
		x.state,
		null, null,
		case when x.state = 'done' then x.last_wall_ms end,
		case when x.state = 'done' then x.last_cpu_ms end,
		case when x.state = 'done' then x.last_max_rss_kb end,
		x.lease_token
	  from pgjob.all_jobs x
	 where x.id = j and x.state in ('running', 'done') and x.attempts > 0
	order by 11, 2
$$;
