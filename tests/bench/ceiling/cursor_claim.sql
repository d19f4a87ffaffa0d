-- One pgbench transaction pair, a claim that writes no row per job: the
-- queue's cursor row locked, the next 1,000 available jobs past it in id
-- order read (payloads too), the cursor moved past them and one lease row
-- written for the batch; then their end, a delete, and the batch's lease
-- row deleted.  Claims of a queue take turns on its cursor row.  Only a
-- measure: the jobs an inserting transaction commits behind the cursor,
-- retries, priorities and run_at in the future are what a real mode would
-- have to answer (docs/performance.md).
with c0 as (select upto from cursor_bench_cursors where queue = 'default' for update), ids as (select j.id, j.payload from cursor_bench_jobs j, c0 where j.queue = 'default' and j.state = 'available' and j.id > c0.upto order by j.id limit 1000), adv as (update cursor_bench_cursors set upto = coalesce((select max(id) from ids), upto) where queue = 'default' returning upto), b as (insert into cursor_bench_batches (queue, lo, hi, token, expires_at) select 'default', (select upto from c0), (select upto from adv), 1, now() + interval '5 min' returning id) select coalesce((select array_agg(id) from ids), '{}') as ids, (select count(payload) from ids) as n, (select id from b) as bid \gset
with d as (delete from cursor_bench_jobs where id = any(':ids'::bigint[])) delete from cursor_bench_batches where id = :bid;
