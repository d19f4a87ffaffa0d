-- pgjobd schema, version 31: snoozes (docs/handlers.md, "Snoozing").
--
-- A handler that asks for its job to run later (an exec handler's exit 75
-- with retry_in, a plugin's PGJOBD_RETRY with retry_in_ms, an http 429 or
-- 503 with Retry-After) snoozes it: that is not a failure.  The worker
-- gives the attempt back (attempts - 1, as at a shutdown), leaves
-- last_error as it was, and counts the snooze here.  A job may snooze at
-- most 1,000 times (QUEUE_MAX_SNOOZES in src/db/queue.h): the worker's
-- finish makes the end of the snooze past that dead, with last_error
-- saying so, so that a handler that snoozes forever does not run forever.
-- pgjob retry starts the count again, as it does the attempts.
--
-- snoozes: not null with a constant default, a change of the catalog
-- only.  pgjob.jobs_done has no such column: a job that ends done keeps
-- its snoozes in its attempt history, not on its row.

alter table pgjob.jobs add column snoozes integer not null default 0;

alter table pgjob.attempts drop constraint attempts_outcome_check;
alter table pgjob.attempts add constraint attempts_outcome_check
	check (outcome in ('failed', 'dead', 'lost', 'cancelled',
		'interrupted', 'snoozed'));

-- Version 13's, with the snooze: the worker's end that counted one more
-- (new.snoozes > old.snoozes) and left the job available is 'snoozed',
-- with its figures but no error (last_error, which it left as it was, is
-- an earlier attempt's).
create or replace function pgjob.attempt_ended() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	-- The worker's end (a failure, dead, interrupted, snoozed) carries
	-- its figures; the others were written by someone else.
	ended boolean := new.state in ('available', 'dead')
		and new.lease_token = old.lease_token;
	snoozed boolean := new.state = 'available'
		and new.lease_token = old.lease_token
		and new.snoozes > old.snoozes;
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
			when snoozed then 'snoozed'
			when new.attempts < old.attempts then 'interrupted'
			else 'failed' end,
		case when ended then new.last_status end,
		case when ended and not snoozed then new.last_error end,
		case when ended then new.last_wall_ms
			when new.state = 'cancelled' then least(round(extract(
				epoch from now() - old.attempted_at) * 1000),
				2147483647)::int end,
		case when ended then new.last_cpu_ms end,
		case when ended then new.last_max_rss_kb end);
	return null;
end
$$;
