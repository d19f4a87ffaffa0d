-- The history per queue and kind (docs/operations.md, "History"): what the
-- workers ended per minute, and how long the jobs waited and ran, kept for
-- the console, `pgjob stats` and pgjob.history().  Each worker adds to the
-- row of the current minute at its heartbeat (every 10 s), one statement
-- for every (queue, kind) it ran since: nothing is written per job, and no
-- trigger is on the claim or the end.
--
-- wait_ms and run_ms are histograms over fixed log-scale buckets (element
-- i, from 1, counts the times up to 2^((i-1)/2) ms, the 55th the longer
-- ones: pgjob.history_bound()), so that two rows merge by adding their
-- arrays element by element (pgjob.history_add()): cheap to write, to
-- roll up and to merge over any range, with p50/p95/p99 to within a
-- bucket (a factor of 1.41).  An array stops at its last bucket that is
-- not zero.
--
-- The pruning duty (pgjob.history_prune()) rolls the minutes older than
-- 24 hours up to whole hours (pgjob.history_hours) and deletes the hours
-- older than 30 days.
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
