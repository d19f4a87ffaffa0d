-- The triggers of pgjob.jobs; their functions are in functions/, named
-- after what the trigger calls.

-- A statement's new jobs wake the workers of their queues
-- (pgjob.jobs_notify()).
create or replace trigger jobs_notify after insert on pgjob.jobs
	referencing new table as new_jobs
	for each statement execute function pgjob.jobs_notify();

-- An attempt that ends other than done, or whose lease is taken over,
-- goes to pgjob.attempts (pgjob.attempt_ended()).  But for the worker's
-- own ends that leave the job available or dead (a failure, a dead end,
-- an attempt given back, a snooze: the same lease token, locked_until
-- cleared), and its failures retried at once in place (version 43: still
-- running, a new lease token, but no lost attempt counted, which every
-- claim that takes over an expired lease counts): the statement that
-- writes them writes their rows too, a batch at a time
-- (pgjob.attempts_add(), src/db/finish.c), and a call of the function per
-- row would cost more than the rest of such an end.
create or replace trigger jobs_attempt_ended
	after update of state, lease_token on pgjob.jobs
	for each row
	when (old.state = 'running' and new.state <> 'done'
	      and (new.state <> 'running'
	           or (new.lease_token <> old.lease_token
	               and new.lost_attempts <> old.lost_attempts))
	      and not (new.state in ('available', 'dead')
	               and new.lease_token = old.lease_token
	               and new.locked_until is null))
	execute function pgjob.attempt_ended();

-- A parent, a workflow's step or a batch's job that ends counts for its
-- children, workflow and batch: the row trigger notes it
-- (pgjob.jobs_ended()), the statement trigger after it counts all the
-- statement's ends at once (pgjob.jobs_ended_flush(), pgjob.ends_count()).
--
-- These three fire on updates that name finished_at (version 47; "update
-- of state" until then).  An end and a reopen always do:
-- jobs_finished_check ties finished_at to the state, so a statement that
-- moves a job into a finished state or out of one must write it.  A claim
-- (state and lease, src/db/claim.c, pgjob.claim_write(), pgjob.claim_ids())
-- and a child's release (pgjob.parents_ended()) do not, so they no longer
-- compile the two conditions below nor call the statement trigger's
-- function: 150 -> 120 us a claim of one job on the server
-- (docs/performance.md, "Changes to the design").
create or replace trigger jobs_ended after update of finished_at on pgjob.jobs
	for each row
	when ((new.children or new.workflow_id is not null
	       or new.batch_id is not null)
	      and new.state in ('done', 'dead', 'cancelled')
	      and old.state not in ('done', 'dead', 'cancelled'))
	execute function pgjob.jobs_ended();

create or replace trigger jobs_ended_flush after update of finished_at on pgjob.jobs
	for each statement
	execute function pgjob.jobs_ended_flush();

-- A job of a workflow or a batch that had ended runs again (pgjob retry):
-- its end no longer counts (pgjob.jobs_reopened()).
create or replace trigger jobs_reopened after update of finished_at on pgjob.jobs
	for each row
	when ((new.workflow_id is not null or new.batch_id is not null)
	      and old.state in ('done', 'dead', 'cancelled')
	      and new.state not in ('done', 'dead', 'cancelled'))
	execute function pgjob.jobs_reopened();
