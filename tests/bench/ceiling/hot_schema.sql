-- The claim without an index entry (tests/bench/cursor.sh, docs/performance.md
-- "A claim that writes no index entry"): a copy of pgjob.jobs's columns
-- with the primary key and one index for the claim alone, whose predicate
-- is a column the claim does not write (finished_at, not state), and no
-- index at all on the columns it does write (state, locked_until,
-- lease_token, locked_by, attempts, attempted_at).  So the claim's update
-- can be HOT: the new version on the same page, no index entry.  Only
-- where the page has room for it: fillfactor 50 leaves room for one more
-- version of every row.  The cursor and batch tables are there for
-- cursor.sh's checks (nothing writes them here).
-- The first run has nothing to drop: no notice for that.
set client_min_messages = warning;
drop table if exists cursor_bench_jobs, cursor_bench_cursors,
	cursor_bench_batches;
create table cursor_bench_jobs (like pgjob.jobs including defaults
	including constraints including identity) with (fillfactor = 50);
alter table cursor_bench_jobs add primary key (id);
create index cursor_bench_jobs_hot_claim_idx on cursor_bench_jobs
	(queue, priority, run_at, id) where finished_at is null;
create table cursor_bench_cursors (queue text primary key, upto bigint not null);
create table cursor_bench_batches (id bigserial primary key);
