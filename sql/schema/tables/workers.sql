-- One row per slot: who holds it, and a heartbeat from the database clock.
create table pgjob.workers (
	slot integer not null,
	host text not null,
	pid integer not null,
	supervisor_pid integer not null,
	version text not null,
	kinds text[] default '{}'::text[] not null,
	started_at timestamp with time zone default now() not null,
	heartbeat_at timestamp with time zone default now() not null,
	tasks jsonb default '{}'::jsonb not null,
	schedules jsonb default '{}'::jsonb not null,
	defined_at timestamp with time zone,
	done_total bigint default 0 not null,
	failed_total bigint default 0 not null,
	retried_total bigint default 0 not null,
	queues text[],
	-- A process handler's copies that ended unasked (the count /metrics
	-- has) and the kinds in a crash loop now, from each heartbeat
	-- (docs/handlers.md): pgjob status and the console show them.
	process_crashes bigint default 0 not null,
	crash_loops text[],
	-- The jobs the worker holds, from each heartbeat (schema 41):
	-- pgjob status shows it without counting pgjob.jobs.
	running integer,
	constraint workers_schedules_check check ((jsonb_typeof(schedules) = 'object'::text)),
	constraint workers_tasks_check check ((jsonb_typeof(tasks) = 'object'::text))
);

alter table pgjob.workers add constraint workers_pkey primary key (slot);
