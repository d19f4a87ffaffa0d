create table pgjob.schedules (
	name text not null,
	last_tick timestamp with time zone not null,
	enabled boolean default true not null,
	run_requested_at timestamp with time zone
);

alter table pgjob.schedules add constraint schedules_pkey primary key (name);
