-- The pruning duty's part of the history (tables/history.sql): the minutes
-- of every whole hour that ended 24 hours before clock are summed into
-- their hour of pgjob.history_hours and deleted, in one statement, and the
-- hours older than 30 days deleted.  Returns how many minute rows were
-- rolled up.  A worker writes only into the current minute, so no minute
-- comes in after its hour was rolled up.
create or replace function pgjob.history_prune(clock timestamptz default now())
returns bigint
language sql
as $$
	with moved as (
		delete from pgjob.history_minutes m
		 where m.at < date_trunc('hour', clock - interval '24 hours')
		returning m.*),
	rolled as (
		insert into pgjob.history_hours as h
			(at, queue, kind, done, failed, retried, wait_ms, run_ms)
		select date_trunc('hour', at), queue, kind, sum(done), sum(failed),
		       sum(retried), pgjob.history_merge(wait_ms)::integer[],
		       pgjob.history_merge(run_ms)::integer[]
		  from moved
		 group by 1, 2, 3
		on conflict (at, queue, kind) do update
		   set done = h.done + excluded.done,
		       failed = h.failed + excluded.failed,
		       retried = h.retried + excluded.retried,
		       wait_ms = pgjob.history_add(h.wait_ms, excluded.wait_ms),
		       run_ms = pgjob.history_add(h.run_ms, excluded.run_ms)
		returning 1),
	old as (
		delete from pgjob.history_hours o
		 where o.at < clock - interval '30 days'
		returning 1)
	select count(*) from moved;
$$;
