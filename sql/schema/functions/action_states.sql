-- The states each action takes: the console counts a filter's matches in
-- these before it acts (docs/console.md).  Retry: dead, cancelled and done
-- (run again, as River's JobRetry and Oban's retry_job do), and available
-- after a failed attempt (it skips the backoff; retry_jobs() checks the
-- failure).  Cancel: waiting and available; cancel_running adds running
-- jobs, whose worker stops them at its next lease renewal.  Delete: any
-- job that is not running or waiting (delete_jobs() leaves out the jobs
-- only the pruning duty takes).
create or replace function pgjob.action_states(action text) returns text[]
language sql
immutable
as $$
	select case action
		when 'retry' then '{dead,cancelled,done,available}'::text[]
		when 'cancel' then '{waiting,available}'::text[]
		when 'cancel_running' then '{waiting,available,running}'::text[]
		when 'delete' then '{available,done,dead,cancelled}'::text[]
	end
$$;
