-- Two claims side by side (tests/bench/cursor.sh, docs/performance.md
-- "A claim that writes no row per job"): a copy of pgjob.jobs with every
-- index and constraint of the schema it was migrated to, a cursor per
-- queue (up to which id jobs are taken) and a lease row per batch.  The
-- extra index is the one a cursor reads: the queue's available jobs in id
-- order.
-- The first run has nothing to drop: no notice for that.
set client_min_messages = warning;
drop table if exists cursor_bench_jobs, cursor_bench_cursors,
	cursor_bench_batches;
create table cursor_bench_jobs (like pgjob.jobs including all);
create index cursor_bench_jobs_cursor_idx on cursor_bench_jobs (queue, id)
	where state = 'available';
create table cursor_bench_cursors (queue text primary key, upto bigint not null);
insert into cursor_bench_cursors values ('default', 0);
create table cursor_bench_batches (
	id bigserial primary key,
	queue text not null,
	lo bigint not null,
	hi bigint not null,
	token bigint not null,
	expires_at timestamptz not null
);
