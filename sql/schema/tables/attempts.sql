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
