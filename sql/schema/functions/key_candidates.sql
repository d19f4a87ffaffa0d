-- A key's jobs, expired leases among them (the key-by-key claim has no
-- restart scan of its own any more).
create or replace function pgjob.key_candidates(q text, k text, kinds text[],
	paused_kinds text[], clk timestamptz, room int, queue_mode text)
returns bigint[]
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
	return array(select j.id from pgjob.jobs j
		where j.queue = q and j.finished_at is null
		  and coalesce(j.parents_left, 0) = 0
		  and (j.state = 'available' or j.locked_until < clk)
		  and (j.limit_key is not null or j.ordering_key is not null)
		  and j.cost is not null
		  and coalesce(j.limit_key, j.ordering_key) = k
		  and j.run_at <= clk and j.kind = any(kinds)
		  and j.kind <> all(paused_kinds)
		  and (queue_mode <> 'per_key' or j.ordering_key is null
		   or not exists (select 1 from pgjob.jobs o
			where o.queue = q and o.ordering_key = j.ordering_key
			  and o.id < j.id and o.finished_at is null
			  and coalesce(o.parents_left, 0) = 0))
		order by j.priority, j.run_at, j.id
		limit room for update skip locked);
end
$$;
