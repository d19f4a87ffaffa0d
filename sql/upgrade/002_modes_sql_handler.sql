-- pgjobd schema, version 2: what queue modes and the sql handler need.

-- Queues in mode serial take the lowest unfinished id of the queue; queues
-- in mode per_key the lowest unfinished id of each ordering_key.
create index jobs_queue_order_idx on pgjob.jobs (queue, id)
	where state in ('available', 'running');
create index jobs_key_order_idx on pgjob.jobs (queue, ordering_key, id)
	where state in ('available', 'running') and ordering_key is not null;

-- The first statement of an sql handler's transaction: locks the job row and
-- raises SQLSTATE PJ001 unless (id, token) still holds a running lease, so
-- the handler's statement and the job's end commit together or not at all.
create function pgjob.lock_lease(job_id bigint, token bigint)
returns void
language plpgsql
as $$
begin
	perform 1 from pgjob.jobs j
	  where j.id = job_id and j.lease_token = token and j.state = 'running'
	  for update;
	if not found then
		raise exception 'pgjob: the lease of job % (token %) was lost',
			job_id, token using errcode = 'PJ001';
	end if;
end
$$;
