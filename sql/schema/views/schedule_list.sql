-- Every schedule that a worker defines (pgjob.workers.schedules, by the
-- definition of the worker that started last, as the scheduler picks it)
-- or that has a row in pgjob.schedules, with its state.  definer: the
-- host/pid of the defining worker, and definer_heartbeat_at its last
-- heartbeat (a worker that died still has its row for a day); cron and the
-- rest are null for a schedule that no worker defines any more.
create or replace view pgjob.schedule_list as
with d as (
	select distinct on (s.key) s.key as name, s.value as def,
		w.host || '/' || w.pid as definer, w.heartbeat_at
	  from pgjob.workers w, jsonb_each(w.schedules) s
	 order by s.key, w.defined_at desc nulls last,
		w.host || '/' || w.pid desc)
select coalesce(d.name, s.name) as name,
	d.def->>'cron' as cron, d.def->>'timezone' as timezone,
	d.def->>'kind' as kind, d.def->>'queue' as queue,
	d.def->'payload' as payload, d.def->>'catch_up' as catch_up,
	coalesce(s.enabled, true) as enabled, s.last_tick, s.run_requested_at,
	d.definer, d.heartbeat_at as definer_heartbeat_at
  from d full join pgjob.schedules s on s.name = d.name;
