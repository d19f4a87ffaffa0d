-- As version 10's, and each claimed job's id added to its key's holders
-- where they are known (pgjob.key_room() made them so for the key of every
-- job a queue with per_key_concurrency claims; the only callers are the
-- key-by-key claims of pgjob.claim_limited()).
create or replace function pgjob.claim_ids(ids bigint[], holder text,
	lease_ms bigint, clk timestamptz) returns void
-- plpgsql with generic plans, where version 10's was SQL: a SQL
-- function's statement is planned at every call, and this one's plan cost
-- more than its run (pgjob.key_busy() says why generic).
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
	with u as (
		update pgjob.jobs j set state = 'running', locked_by = holder,
			locked_until = clk + lease_ms * interval '1 millisecond',
			lease_token = j.lease_token + 1, attempts = j.attempts + 1,
			lost_attempts = j.lost_attempts
				+ case when j.state = 'running' then 1 else 0 end,
			attempted_at = clk
		 where j.id = any(ids)
		returning j.id, j.queue, coalesce(j.limit_key, j.ordering_key) as k)
	update pgjob.limit_keys lk set holders = lk.holders || t.ids
	  from (select u.queue, u.k, array_agg(u.id order by u.id) as ids
		  from u where u.k is not null group by u.queue, u.k) t
	 where lk.queue = t.queue and lk.key = t.k and lk.holders is not null;
end
$$;
