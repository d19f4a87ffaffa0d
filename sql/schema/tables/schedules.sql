-- The last tick enqueued per schedule.  The worker that holds the
-- scheduler lease advances last_tick and enqueues the tick's job in one
-- transaction, fenced by its lease token, so a tick is enqueued once across
-- the cluster even across failovers.
create table pgjob.schedules (
	name text not null,
	last_tick timestamp with time zone not null,
	enabled boolean default true not null,
	run_requested_at timestamp with time zone
);

alter table pgjob.schedules add constraint schedules_pkey primary key (name);
