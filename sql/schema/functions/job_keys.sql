-- The keys a job object of pgjob.enqueue_many() may have.
create or replace function pgjob.job_keys() returns text[]
language sql
immutable
parallel safe
as $$
	select array['kind', 'payload', 'queue', 'run_at', 'priority',
		'max_attempts', 'unique_key', 'ordering_key', 'limit_key',
		'cost']
$$;
