-- The SQL-only ceiling's table: the jobs table of the seed design, as
-- narrow as it comes (no queue, state, token or retention columns), with the
-- one partial index its claim reads.  tests/bench/suite.sh fills it with
-- generate_series and drains it with pgbench running claim_update.sql or
-- claim_delete.sql: the naive statements, batches of 100, no daemon.
drop schema if exists ceiling cascade;
create schema ceiling;
create table ceiling.jobs (
	id bigserial primary key,
	kind text not null,
	payload jsonb not null default '{}',
	run_at timestamptz not null default now(),
	attempts int not null default 0,
	locked_by text,
	locked_until timestamptz,
	done_at timestamptz
);
create index jobs_ready on ceiling.jobs (run_at) where done_at is null;
