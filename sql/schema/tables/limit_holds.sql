-- Concurrency slots an application holds outside jobs
-- (pgjob.acquire_slot()): they count against the queue's limits until
-- released or expired, as a job's lease does.
create table pgjob.limit_holds (
	id bigint generated always as identity,
	queue text not null,
	key text,
	holder text,
	expires_at timestamp with time zone not null,
	held_by oid
);

alter table pgjob.limit_holds add constraint limit_holds_pkey primary key (id);

create index limit_holds_queue_idx on pgjob.limit_holds (queue, expires_at);
