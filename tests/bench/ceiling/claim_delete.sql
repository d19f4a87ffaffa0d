-- As claim_update.sql, but a finished job is deleted.
with c as (update ceiling.jobs set locked_by = 'c' || :client_id, locked_until = now() + interval '5 min', attempts = attempts + 1 where id in (select id from ceiling.jobs where done_at is null and run_at <= now() and (locked_until is null or locked_until < now()) order by run_at limit 100 for update skip locked) returning id) select coalesce(array_agg(id), '{}') as ids, count(*) as n from c \gset
\if :n > 0
delete from ceiling.jobs where id = any(:ids::bigint[]) and locked_by = 'c' || :client_id;
\endif
