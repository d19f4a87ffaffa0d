-- The attempt history (docs/operations.md, "The attempt history"): one row
-- per attempt that did not end done: failed (to be retried), dead, lost
-- (its lease expired), cancelled (pgjob cancel while it ran), interrupted
-- (the worker shut down and gave the attempt back).  The attempt that ends
-- done has no row: its figures are on the job row.  Written by the AFTER
-- UPDATE trigger jobs_attempt_ended (triggers/jobs.sql), so that every path
-- that ends an attempt is caught, whoever wrote it, but for the worker's
-- ends that leave the job available or dead, whose statement writes their
-- rows itself (pgjob.attempts_add(), since version 40); a job's rows go
-- with it (pgjob.forget_attempts()).  sql/upgrade/013_attempts.sql says why
-- at length.
create table pgjob.attempts (
	job_id bigint not null,
	attempt integer not null,
	token bigint not null,
	started_at timestamp with time zone,
	finished_at timestamp with time zone not null,
	worker text,
	outcome text not null,
	status integer,
	error text,
	wall_ms integer,
	cpu_ms integer,
	max_rss_kb integer,
	constraint attempts_outcome_check check ((outcome = any (array['failed'::text, 'dead'::text, 'lost'::text, 'cancelled'::text, 'interrupted'::text, 'snoozed'::text])))
);

create index attempts_job_idx on pgjob.attempts (job_id, attempt);
