-- What each worker ended per minute: increments, not running totals, so
-- that pgjob.throughput() is a sum per minute over the rows of its window.
-- The pruning duty deletes rows older than 2 hours.
create table pgjob.worker_minutes (
	slot integer not null,
	worker_started_at timestamp with time zone not null,
	at timestamp with time zone not null,
	done bigint not null,
	failed bigint not null,
	retried bigint not null
);

alter table pgjob.worker_minutes add constraint worker_minutes_pkey primary key (slot, worker_started_at, at);

create index worker_minutes_at on pgjob.worker_minutes (at);
