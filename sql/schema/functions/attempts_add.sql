-- The attempt rows of a worker's batch of ends, written by the statement
-- that ends them (src/db/finish.c): a failure, a dead end, an attempt
-- given back at a shutdown (interrupted), a snooze.  Those ends are the
-- ones the row trigger jobs_attempt_ended leaves out (triggers/jobs.sql):
-- running to available or dead under the same lease token, with
-- locked_until cleared.  One insert for the whole batch instead of a
-- trigger call per row: the call of a security definer plpgsql function,
-- its search_path set and its INSERT run through SPI, was most of what a
-- failed attempt cost the finish (docs/performance.md, "What the hot path
-- does").  It runs with its owner's rights, so no role needs a right on
-- pgjob.attempts; EXECUTE is the worker role's alone (grants.sql), which
-- may write these ends anyway.  Returns how many rows it wrote.
create or replace function pgjob.attempts_add(rows pgjob.attempts[])
returns bigint
language sql
volatile
security definer
set search_path = pg_catalog, pg_temp
as $$
	with a as (insert into pgjob.attempts select * from unnest(rows)
		returning 1)
	select count(*) from a
$$;
