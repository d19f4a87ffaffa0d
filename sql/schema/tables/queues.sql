-- The queues some worker's config defines, written by each worker when it
-- connects: a limit or a pause of a queue that no config defines and no job
-- uses is refused as a typo.
create table pgjob.queues (
	name text not null,
	seen_at timestamp with time zone default now() not null
);

alter table pgjob.queues add constraint queues_pkey primary key (name);
