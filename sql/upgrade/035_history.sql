-- Schema version 35: the history per queue and kind
-- (docs/operations.md, "History"): per minute, what the workers ended and
-- histograms of how long the jobs waited and ran, rolled up to hours after
-- 24 hours and kept 30 days (sql/schema/tables/history.sql says why so).
-- The functions that read and prune it are in sql/schema/functions/
-- (history*.sql).
create table pgjob.history_minutes (
	at timestamp with time zone not null,
	queue text not null,
	kind text not null,
	done bigint not null default 0,
	failed bigint not null default 0,
	retried bigint not null default 0,
	wait_ms integer[] not null default '{}',
	run_ms integer[] not null default '{}'
);

alter table pgjob.history_minutes add constraint history_minutes_pkey primary key (at, queue, kind);

create table pgjob.history_hours (
	at timestamp with time zone not null,
	queue text not null,
	kind text not null,
	done bigint not null default 0,
	failed bigint not null default 0,
	retried bigint not null default 0,
	wait_ms integer[] not null default '{}',
	run_ms integer[] not null default '{}'
);

alter table pgjob.history_hours add constraint history_hours_pkey primary key (at, queue, kind);
