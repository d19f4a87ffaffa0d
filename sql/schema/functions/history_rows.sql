-- The rows of the history (tables/history.sql) from oldest on: the minutes,
-- and the hours that the pruning duty rolled them up to.  A minute is in
-- one table or the other, never both (pgjob.history_prune() moves it in
-- one statement).  of_queue and of_kind: null for all.
create or replace function pgjob.history_rows(oldest timestamptz,
	of_queue text default null, of_kind text default null)
returns table (at timestamptz, queue text, kind text, done bigint,
	failed bigint, retried bigint, wait_ms integer[], run_ms integer[])
language sql
stable
as $$
	select m.at, m.queue, m.kind, m.done, m.failed, m.retried, m.wait_ms,
	       m.run_ms
	  from pgjob.history_minutes m
	 where m.at >= oldest
	   and (of_queue is null or m.queue = of_queue)
	   and (of_kind is null or m.kind = of_kind)
	union all
	select h.at, h.queue, h.kind, h.done, h.failed, h.retried, h.wait_ms,
	       h.run_ms
	  from pgjob.history_hours h
	 where h.at >= date_trunc('hour', oldest)
	   and (of_queue is null or h.queue = of_queue)
	   and (of_kind is null or h.kind = of_kind);
$$;
