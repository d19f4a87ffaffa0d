-- One pgbench transaction pair, the claim of row_claim.sql on the table of
-- hot_schema.sql: candidates from the claim index, whose rows stay in it
-- while they run (the claim writes no column the index reads), so a claim
-- passes over the running rows before its own; each updated to running
-- under a lease, in place (HOT); then their end, a delete.  Only a
-- measure: expired leases, the serial and per-key heads, unique keys,
-- limits and the console's running jobs all read indexes on state or
-- locked_until today, which this table has none of (docs/performance.md).
with c as (select ctid from cursor_bench_jobs where finished_at is null and queue = 'default' and (state = 'available' or locked_until < now()) order by priority, run_at, id limit 1000 for update skip locked), u as (update cursor_bench_jobs set state = 'running', locked_until = now() + interval '5 min', lease_token = lease_token + 1, attempts = attempts + 1, attempted_at = now(), locked_by = 'w' || :client_id where ctid = any(array(select ctid from c)) returning id, payload) select coalesce(array_agg(id), '{}') as ids, count(payload) as n from u \gset
delete from cursor_bench_jobs where id = any(':ids'::bigint[]) and state = 'running';
