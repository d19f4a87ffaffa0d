-- pgjobd schema, version 14: what the web console needs that the database
-- did not keep (docs/console.md): throughput per minute over the last
-- hours, and schedules that an operator can steer (docs/schedules.md).
--
-- Throughput.  Each worker counts, in its own memory, the attempts it
-- ended: done, failed (retried or dead) and retried (a part of failed).
-- Its heartbeat (the existing periodic update of its pgjob.workers row,
-- every 10 s or a third of the lease: no new round trip, nothing on the
-- path of a job) writes its totals into that row and, when they changed,
-- into the row of the current minute of pgjob.worker_minutes.  A row there
-- holds the worker's totals as of its last heartbeat in that minute, so
-- the difference between two rows of one worker is what it did between
-- them.  The totals count from 0 at each registration of the worker
-- (slot, started_at: a worker that reconnects or is restarted begins a
-- new series), and pgjob.throughput() adds up the differences.  The
-- pruning duty deletes rows older than 2 hours.

alter table pgjob.workers
	add column done_total bigint not null default 0,
	add column failed_total bigint not null default 0,
	add column retried_total bigint not null default 0;

create table pgjob.worker_minutes (
	slot int not null,
	worker_started_at timestamptz not null,
	-- The minute (date_trunc('minute', the heartbeat's now())).
	at timestamptz not null,
	-- The series' totals as of the worker's last heartbeat in the minute.
	done bigint not null,
	failed bigint not null,
	retried bigint not null,
	primary key (slot, worker_started_at, at)
);

-- Per minute of the window that ends with the current minute (one row per
-- minute, oldest first, zeros where nothing ended): the attempts that ended
-- done, failed (retried or dead) and retried, summed over every worker.  A
-- minute gets what the workers' heartbeats counted in it; a worker that
-- could not write for a while (its connection lost) has its count of that
-- time in the minute it wrote again.  At most 2 hours back: older rows are
-- pruned.
create function pgjob.throughput(since interval)
returns table (at timestamptz, done bigint, failed bigint, retried bigint)
language plpgsql
stable
as $$
#variable_conflict use_column
begin
	if since is null or since <= interval '0' or since > interval '2 hours' then
		raise exception 'pgjob.throughput: the window must be more than 0 and at most 2 hours, not %',
			coalesce(since::text, 'null')
			using errcode = '22023';
	end if;
	return query
	with d as (
		select m.at, m.worker_started_at,
			m.done - lag(m.done) over s as done,
			m.failed - lag(m.failed) over s as failed,
			m.retried - lag(m.retried) over s as retried,
			m.done as done0, m.failed as failed0,
			m.retried as retried0
		  from pgjob.worker_minutes m
		 window s as (partition by m.slot, m.worker_started_at
			      order by m.at)),
	-- The first row of a series counts from 0 when the series began
	-- after the pruning horizon (none of its rows can have been pruned);
	-- an older series' first remaining row is only a starting point.
	e as (
		select d.at,
			coalesce(d.done, case when fresh then d.done0 end) as done,
			coalesce(d.failed, case when fresh then d.failed0 end)
				as failed,
			coalesce(d.retried, case when fresh then d.retried0 end)
				as retried
		  from d, lateral (select date_trunc('minute', d.worker_started_at)
				>= now() - interval '2 hours' as fresh) f)
	select g.at, coalesce(sum(greatest(e.done, 0)), 0)::bigint,
		coalesce(sum(greatest(e.failed, 0)), 0)::bigint,
		coalesce(sum(greatest(e.retried, 0)), 0)::bigint
	  from generate_series(
		date_trunc('minute', now() - since) + interval '1 minute',
		date_trunc('minute', now()), interval '1 minute') g(at)
	  left join e on e.at = g.at
	 group by g.at
	 order by g.at;
end
$$;

-- Schedules.  enabled: false skips its ticks (the scheduler still moves
-- last_tick past them, so enabling it again fires no burst of the ticks
-- missed meanwhile).  run_requested_at: an operator asked for one run now;
-- the scheduler lease's holder enqueues one job of the schedule and clears
-- it, in one transaction fenced by its lease token.
alter table pgjob.schedules
	add column enabled boolean not null default true,
	add column run_requested_at timestamptz;

-- Every schedule that a worker defines (pgjob.workers.schedules, by the
-- definition of the worker that started last, as the scheduler picks it)
-- or that has a row in pgjob.schedules, with its state.  definer: the
-- host/pid of the defining worker, and definer_heartbeat_at its last
-- heartbeat (a worker that died still has its row for a day); cron and the
-- rest are null for a schedule that no worker defines any more.
create view pgjob.schedule_list as
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

-- The row of schedule name, made if it has not ticked yet (its ticks then
-- count from now on, as when the scheduler first sees it); refuses a name
-- that no worker defines and no row has.
create function pgjob.schedule_row(name text) returns void
language plpgsql
as $$
#variable_conflict use_variable
declare
	known text;
begin
	if exists (select 1 from pgjob.schedules s where s.name = name) then
		return;
	end if;
	if not exists (select 1 from pgjob.workers w
			where w.schedules ? name) then
		select string_agg(quote_literal(l.name), ', ' order by l.name)
		  into known
		  from (select l.name from pgjob.schedule_list l
			 order by l.name limit 20) l;
		raise exception 'pgjob: unknown schedule %',
			quote_literal(coalesce(name, 'null'))
			using errcode = '42704',
			hint = 'Known schedules: ' || coalesce(known, 'none yet') ||
				'.  A schedule is known once a worker whose config defines it has connected.';
	end if;
	insert into pgjob.schedules (name, last_tick)
	values (name, date_trunc('second', now()))
	on conflict do nothing;
end
$$;

-- Enables or disables schedule name; returns whether it was enabled
-- before.
create function pgjob.schedule_enable(name text, enabled boolean default true)
returns boolean
language plpgsql
as $$
#variable_conflict use_variable
declare
	was boolean;
begin
	if enabled is null then
		raise exception 'pgjob.schedule_enable: enabled must be true or false'
			using errcode = '22004';
	end if;
	perform pgjob.schedule_row(name);
	select s.enabled into was from pgjob.schedules s
	 where s.name = name for update;
	update pgjob.schedules s set enabled = schedule_enable.enabled
	 where s.name = name;
	return was;
end
$$;

-- Asks for one run of schedule name now (also when it is disabled: an
-- operator asked); returns the time of the request.  A request that has
-- not been served yet stays the one request: asking twice before the
-- scheduler's next round runs it once.
create function pgjob.schedule_run(name text) returns timestamptz
language plpgsql
as $$
#variable_conflict use_variable
declare
	at timestamptz;
begin
	perform pgjob.schedule_row(name);
	update pgjob.schedules s
	   set run_requested_at = coalesce(s.run_requested_at, now())
	 where s.name = name
	returning s.run_requested_at into at;
	return at;
end
$$;
