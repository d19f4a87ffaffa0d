-- Whether a live worker (heartbeat within 30 s, as pgjob status counts
-- them) serves queue_name: null when no worker is live at all.  For
-- pgjob enqueue's warning, so it runs with its owner's rights: a role
-- that may only enqueue learns this one bit and nothing else of the
-- workers.
create or replace function pgjob.queue_served(queue_name text)
returns boolean
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
	select case
		when not exists (select 1 from pgjob.workers w
				  where w.heartbeat_at >= now() - interval '30 seconds')
		then null
		else exists (select 1 from pgjob.workers w
			      where w.heartbeat_at >= now() - interval '30 seconds'
				and (w.queues is null
				     or queue_name = any(w.queues)))
	end
$$;
