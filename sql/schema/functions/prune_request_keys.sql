-- Deletes up to batch expired keys, oldest first, and returns how many.  One
-- batch per call, each in the caller's transaction: call it again while it
-- returns batch.  Skips rows that a request is taking over right now.
create or replace function pgjob.prune_request_keys(batch int default 10000)
returns bigint
language sql
as $$
	with d as (
		delete from pgjob.request_keys k
		 where (k.scope, k.key) in (
			select e.scope, e.key from pgjob.request_keys e
			 where e.expires_at <= now()
			 order by e.expires_at
			 limit greatest(coalesce(batch, 10000), 0)
			 for update skip locked)
		   and k.expires_at <= now()
		returning 1)
	select count(*) from d;
$$;
