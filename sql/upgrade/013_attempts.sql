-- pgjobd schema, version 13: the attempt history (docs/operations.md,
-- "The attempt history").
--
-- pgjob.attempts keeps one row per attempt that did not end done: failed
-- (to be retried), dead, lost (its lease expired: the worker vanished or
-- stopped renewing), cancelled (pgjob cancel while it ran), interrupted
-- (the worker shut down and gave the attempt back).  The attempt that ends
-- done has no row: its figures are on the job row already (attempted_at,
-- finished_at, last_wall_ms, last_cpu_ms, last_max_rss_kb), and from this
-- version locked_by stays on a row whose attempt ended, naming the worker
-- (host:slot) that ran it last.  A lease is locked_until while the state is
-- 'running'; locked_by alone holds nothing.
--
-- The rows are written by an AFTER UPDATE row trigger, so that every path
-- that ends an attempt is caught, whoever wrote it: the worker's batch of
-- ends (failures of every handler type, sql handlers' included, and the
-- dead ends of jobs refused at their start), the claims that take over an
-- expired lease (queue.c's and pgjob.claim_limited()'s), pgjob cancel, a
-- workflow cancelled.
--
-- What it costs an attempt that ends done, the hot path: pgjob.jobs has
-- had AFTER UPDATE row triggers since version 11 (jobs_ended,
-- jobs_reopened), so every UPDATE of a job already fetches the old row
-- version for them and evaluates their WHEN clauses.  This trigger adds
-- one WHEN clause more: old.state = 'running' and new.state <> 'done' is
-- false for a done end (and the claim of an available job fails the first
-- comparison), nothing is queued, the function does not run.  A lease
-- renewal sets neither state nor lease_token, so the column list skips the
-- trigger before its WHEN.  The finish writes last_status, a NULL for a
-- done end: no byte of row (the row has a null bitmap already).  A CTE
-- in the finish's statement instead would have joined the batch a second
-- time on every finish, done or not.
--
-- Pruned with its job: by the prune statement (the pruning duty and pgjob
-- prune, src/db/prune.c), the finish of a worker with retention 0
-- (src/db/queue.c: that worker's statement alone has the step) and the
-- console's delete, each through pgjob.forget_attempts() in the statement
-- that deletes the jobs, for the deleted jobs that can have rows: a job
-- done at its first claim (lease_token 1) has none, so the common finish
-- does not call it and the prune passes it an empty array.  forget_attempts() runs with its
-- owner's rights, so no role needs a right on pgjob.attempts (an upgraded
-- install whose grants were not run again keeps working), and it deletes
-- only the rows of jobs that no longer exist, so whoever may call it can
-- erase no history.  Not an AFTER DELETE row trigger: measured with
-- retention 0 (tests/bench/ab.sh with retention: 0, 200,000 no-op jobs),
-- its mere presence, its WHEN false for every row, cost 14 % of the
-- throughput; a function called once per statement costs nothing
-- measurable.  Not a foreign key with ON DELETE CASCADE: a query per
-- deleted job.  A delete of jobs by hand calls it too (docs/operations.md).

-- last_status: the exit status of an exec handler's command, or the HTTP
-- status of an http handler's answer, of the last attempt that failed;
-- NULL where there is none (a signal, no answer, a plugin or an sql
-- handler, an attempt that ended done).  Nullable, no default: a change of
-- the catalog only.

alter table pgjob.jobs add column last_status integer;

create table pgjob.attempts (
	job_id bigint not null,
	-- jobs.attempts as it was during the attempt.  pgjob retry starts
	-- the count again and a shutdown gives an attempt back, so a number
	-- can repeat; token orders them.
	attempt int not null,
	-- jobs.lease_token of the attempt: grows at every claim, never
	-- resets.
	token bigint not null,
	started_at timestamptz,
	-- For a lost attempt: when its lease expired (the worker vanished
	-- before that).
	finished_at timestamptz not null,
	worker text,
	outcome text not null,
	status int,
	error text,
	wall_ms int,
	cpu_ms int,
	max_rss_kb int,
	constraint attempts_outcome_check check (outcome in
		('failed', 'dead', 'lost', 'cancelled', 'interrupted'))
);
create index attempts_job_idx on pgjob.attempts (job_id, attempt);

-- Runs with its owner's rights: a worker's role needs no right to insert
-- here, and no one can write a history that did not happen.
create function pgjob.attempt_ended() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	-- The worker's end (a failure, dead, interrupted) carries its
	-- figures; the others were written by someone else.
	ended boolean := new.state in ('available', 'dead')
		and new.lease_token = old.lease_token;
begin
	insert into pgjob.attempts (job_id, attempt, token, started_at,
		finished_at, worker, outcome, status, error, wall_ms, cpu_ms,
		max_rss_kb)
	values (old.id, old.attempts, old.lease_token, old.attempted_at,
		case when new.state = 'running'
			then coalesce(old.locked_until, now()) else now() end,
		old.locked_by,
		case when new.state = 'running' then 'lost'
			when new.state = 'cancelled' then 'cancelled'
			when new.state = 'dead' then 'dead'
			when new.attempts < old.attempts then 'interrupted'
			else 'failed' end,
		case when ended then new.last_status end,
		case when ended then new.last_error end,
		case when ended then new.last_wall_ms
			when new.state = 'cancelled' then least(round(extract(
				epoch from now() - old.attempted_at) * 1000),
				2147483647)::int end,
		case when ended then new.last_cpu_ms end,
		case when ended then new.last_max_rss_kb end);
	return null;
end
$$;

-- The rows of jobs deleted (see the head of this file): of those of ids
-- that no longer exist.  Called in the statement that deleted them, it
-- sees them gone (a volatile function's statements see the effects of the
-- statement that calls it, once its argument has been computed).  Returns
-- how many rows it deleted.
create function pgjob.forget_attempts(ids bigint[]) returns bigint
language sql
volatile
security definer
set search_path = pg_catalog, pg_temp
as $$
	with f as (delete from pgjob.attempts a
		where a.job_id = any(ids)
		  and not exists (select 1 from pgjob.jobs j
			where j.id = a.job_id)
		returning 1)
	select count(*) from f
$$;

create trigger jobs_attempt_ended after update of state, lease_token
	on pgjob.jobs
	for each row
	when (old.state = 'running' and new.state <> 'done'
	      and (new.state <> 'running'
	           or new.lease_token <> old.lease_token))
	execute function pgjob.attempt_ended();

-- Every attempt of job j, oldest first: its rows here, then the attempt on
-- the job's row when it is running or ended done (outcome 'running' or
-- 'done'; its worker is there, and when done its figures).  What pgjob show prints, and
-- the web console's job page.
create function pgjob.job_attempts(j bigint)
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
	  from pgjob.jobs x
	 where x.id = j and x.state in ('running', 'done') and x.attempts > 0
	order by 11, 2
$$;
