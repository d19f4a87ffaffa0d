-- pgjobd schema, version 14: what the web console needs that the database
-- did not keep (docs/console.md): throughput per minute over the last
-- hours, and schedules that an operator can steer (docs/schedules.md).
--
-- Throughput.  Each worker counts, in its own memory, the attempts it
-- ended: done, failed (retried or dead) and retried (a part of failed).
-- Its heartbeat (the existing periodic update of its pgjob.workers row,
-- every 10 s or a third of the lease: nothing on the path of a job) writes
-- its totals since it registered into that row and, when they moved, adds
-- what it ended since its last write to the row of the current minute of
-- pgjob.worker_minutes (a statement of its own in the same pipeline, so
-- that a missing grant never fails the heartbeat).  A row holds
-- increments, not running totals: pgjob.throughput() is a sum per minute
-- over the rows of its window (an index range, no window function, no
-- "previous row" to find), a restarted worker needs no special case, and
-- an idle worker writes nothing.  (Running totals with per-worker lag()
-- took 100 to 250 ms over 256 workers' two hours on the test machine; the
-- sum of an hour's rows takes about 4 ms, under 1 ms for 16 workers.)  The pruning duty deletes rows older than 2 hours.

alter table pgjob.workers
	add column done_total bigint not null default 0,
	add column failed_total bigint not null default 0,
	add column retried_total bigint not null default 0;

create table pgjob.worker_minutes (
	slot int not null,
	-- The worker's registration (pgjob.workers.started_at): one row per
	-- minute for each.
	worker_started_at timestamptz not null,
	-- The minute (date_trunc('minute', the write's now())).
	at timestamptz not null,
	-- What the worker ended in the minute, as its writes in it said.
	done bigint not null,
	failed bigint not null,
	retried bigint not null,
	primary key (slot, worker_started_at, at)
);
create index worker_minutes_at on pgjob.worker_minutes (at);

-- Per minute of the window that ends with the current minute (one row per
-- minute, oldest first, zeros where nothing ended): the attempts that ended
-- done, failed (retried or dead) and retried, summed over every worker.  A
-- minute gets what the workers wrote in it: an attempt is counted in the
-- minute of the first heartbeat after its end (10 s at most, while the
-- worker is connected), and a worker that could not write for a while has
-- what it ended then counted in the minute it writes again.  At most 2
-- hours back: older rows are pruned.
create function pgjob.throughput(since interval)
returns table (at timestamptz, done bigint, failed bigint, retried bigint)
language plpgsql
stable
as $$
#variable_conflict use_column
declare
	oldest timestamptz := date_trunc('minute', now() - since)
		+ interval '1 minute';
begin
	if since is null or since <= interval '0' or since > interval '2 hours' then
		raise exception 'pgjob.throughput: the window must be more than 0 and at most 2 hours, not %',
			coalesce(since::text, 'null')
			using errcode = '22023';
	end if;
	-- The rows of the window by the index on at, summed, then every
	-- minute.
	return query
	select g.at, coalesce(x.done, 0)::bigint, coalesce(x.failed, 0)::bigint,
		coalesce(x.retried, 0)::bigint
	  from generate_series(oldest, date_trunc('minute', now()),
			interval '1 minute') g(at)
	  left join (select m.at, sum(m.done) as done,
			sum(m.failed) as failed, sum(m.retried) as retried
		       from pgjob.worker_minutes m
		      where m.at >= oldest
		      group by m.at) x on x.at = g.at
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
