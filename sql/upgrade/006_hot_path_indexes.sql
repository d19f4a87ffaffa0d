-- pgjobd schema, version 6: fewer index entries written per claim.
--
-- A claim moves a row from 'available' to 'running', and PostgreSQL writes
-- the new row version into every index whose predicate it matches.  Until
-- now that was three: the primary key, jobs_lease_idx and
-- jobs_queue_order_idx (available and running rows).  Now it is two: the
-- primary key and jobs_running_idx.  The serial-mode head is found as the
-- lowest available id of its queue (jobs_queue_order_idx, now written only
-- at enqueue), provided no running job of that queue has a lower id
-- (jobs_running_idx: a serial queue has at most one running job).
-- docs/performance.md counts the index entries per job.

-- Running jobs by queue and lease end: the claim takes expired leases of
-- its queues from here, and the serial head checks the running jobs of its
-- queue.
create index jobs_running_idx on pgjob.jobs (queue, locked_until)
	where state = 'running';
drop index pgjob.jobs_lease_idx;

-- Available jobs of a queue in id order: the serial head.
drop index pgjob.jobs_queue_order_idx;
create index jobs_queue_order_idx on pgjob.jobs (queue, id)
	where state = 'available';
