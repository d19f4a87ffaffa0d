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
	-- An end like the worker's (a failure, dead, interrupted, snoozed)
	-- carries its figures; the others were written by someone else.
	-- The worker's own, which clear locked_until, do not come here: the
	-- statement that writes them writes their rows (src/db/finish.c,
	-- the trigger's WHEN); those by hand that leave it do.
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
