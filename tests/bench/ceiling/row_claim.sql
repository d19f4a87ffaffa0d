-- One pgbench transaction pair, the claim as pgjobd makes it: up to 1,000
-- available jobs in priority, run_at and id order, FOR UPDATE SKIP LOCKED,
-- each updated to running under a lease (a new row version, and its
-- entries in jobs_pkey and jobs_running_idx's copy); then their end, a
-- delete (retention 0).  The payloads are read, as a worker reads them.
with c as (select ctid from cursor_bench_jobs where state = 'available' and queue = 'default' order by priority, run_at, id limit 1000 for update skip locked), u as (update cursor_bench_jobs set state = 'running', locked_until = now() + interval '5 min', lease_token = lease_token + 1, attempts = attempts + 1, attempted_at = now(), locked_by = 'w' || :client_id where ctid = any(array(select ctid from c)) returning id, payload) select coalesce(array_agg(id), '{}') as ids, count(payload) as n from u \gset
delete from cursor_bench_jobs where id = any(':ids'::bigint[]) and state = 'running';
