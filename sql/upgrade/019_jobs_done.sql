-- pgjobd schema, version 19: done jobs kept out of the hot table.
--
-- With a retention (the default keeps 7 days), a job that ended done was
-- updated in place: a new row version in pgjob.jobs, an entry in its
-- primary key and one in jobs_finished_idx, all in the table that every
-- claim reads; and later the pruning duty deleted it again, one row at a
-- time.  Now the end of a plain job (done at its first claim, with no
-- workflow, batch, parent or child: nothing that reads its row later) deletes
-- its row, as retention 0 does, and appends a copy to pgjob.jobs_done in
-- the same statement.  That table is written only at its end: a btree on
-- id (a job by id, newest first) and a BRIN index on finished_at (a
-- summary per 128 pages, nothing per row).  On the test machine drains of
-- 200,000 no-op jobs with 2 workers ran 82,700 jobs/s with the update and
-- 87,843 with the move (medians of three; 92,085 without the btree on id,
-- 102,086 at retention 0): docs/performance.md.
--
-- Every other end stays in pgjob.jobs as before (dead, cancelled, a retry's
-- success, a workflow's step, a batch's job, a parent or a child, an sql
-- handler's job), and the pruning duty deletes those as before.
--
-- Pruning without deletes.  jobs_done is partitioned by list on ring, 0 to
-- 15: a job's ring is the period of its end, floor(epoch / width) mod 16,
-- with width pgjob.done_width(retention), a twelfth of the retention and
-- at least a minute.  A ring is written for one width and then not again
-- for 15 more, so it holds the ends of one period, all past the retention
-- a width or so after its last row was written; then the pruning duty
-- truncates it, whole, with no dead rows and no vacuum (pgjob.prune_done()).
-- It truncates only a ring whose every row is past the cutoff, under an
-- exclusive lock taken first: so nothing younger than the retention is ever
-- deleted, whatever width the ring's rows were written with (workers whose
-- retention differ, a retention changed), and a ring the duty could not
-- empty in time (it was down) is only kept longer.  A done job is so kept
-- for its retention and at most about a twelfth more.
--
-- Reading.  pgjob.all_jobs is every job: pgjob.jobs and pgjob.jobs_done.
-- `pgjob show`, `pgjob jobs`, the console and the attempt history read it;
-- an application that reads a finished job's row (its result) reads it
-- there.  A later version that adds a column to pgjob.jobs adds it here too
-- (to jobs_done and to the view).
create table pgjob.jobs_done (like pgjob.jobs including defaults,
	ring smallint not null)
	partition by list (ring);
do $$
begin
	for i in 0..15 loop
		execute format('create table pgjob.jobs_done_%s partition of'
			' pgjob.jobs_done for values in (%s)', i, i);
		-- Each ring is written in bursts and emptied whole: it
		-- needs autovacuum for its statistics and the BRIN summary
		-- alone.
		execute format('alter table pgjob.jobs_done_%s set'
			' (autovacuum_vacuum_insert_scale_factor = 0.05,'
			' autovacuum_analyze_scale_factor = 0.02)', i);
	end loop;
end
$$;
create index jobs_done_id_idx on pgjob.jobs_done (id);
create index jobs_done_finished_idx on pgjob.jobs_done using brin (finished_at)
	with (autosummarize = on);

-- Seconds per ring period for a retention of retention_ms.
create function pgjob.done_width(retention_ms bigint) returns bigint
language sql
immutable
as $$
	select greatest(60, ceil(retention_ms / 12000.0))::bigint
$$;

-- The ring of a job that ended at t under a retention of retention_ms.
create function pgjob.done_ring(t timestamptz, retention_ms bigint)
returns smallint
language sql
stable
as $$
	select (floor(extract(epoch from t)
		/ pgjob.done_width(retention_ms))::bigint % 16)::smallint
$$;

create view pgjob.all_jobs as
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status
  from pgjob.jobs
union all
select id, queue, kind, payload, priority, run_at, state, attempts,
	max_attempts, locked_by, locked_until, lease_token, unique_key,
	ordering_key, last_error, result, created_at, finished_at,
	lost_attempts, limit_key, cost, attempted_at, children, parents_left,
	on_parent_failure, workflow_id, step, batch_id, last_wall_ms,
	last_cpu_ms, last_max_rss_kb, last_status
  from pgjob.jobs_done;

-- What a job kept here is: lets the planner leave the table out of a read
-- of pgjob.all_jobs for another state, a workflow's steps or a batch's jobs
-- (constraint exclusion covers the branches of a UNION ALL), where it
-- would otherwise read every ring for none.
alter table pgjob.jobs_done add constraint jobs_done_plain_check
	check (state = 'done' and workflow_id is null and batch_id is null
		and parents_left is null and children is not true);

-- How many jobs of each queue and kind jobs_done got since t: the console's
-- overview, `pgjob status` and `pgjob top` (which add the ends that stayed
-- in pgjob.jobs, from jobs_finished_idx).  From the BRIN summary: the
-- ranges written before t are not read, whatever the statistics of a
-- ring say (a scan of every ring would read the whole retention).
create function pgjob.done_since(t timestamptz)
returns table (queue text, kind text, n bigint)
language sql
stable
set enable_seqscan = off
as $$
	select d.queue, d.kind, count(*) from pgjob.jobs_done d
	 where d.finished_at > t group by d.queue, d.kind
$$;

-- Empties every ring of jobs_done whose rows all ended before cutoff, and
-- with batch > 0 deletes up to batch rows older than cutoff from each ring
-- that also holds newer ones (`pgjob prune DURATION`; the duty passes 0 and
-- only truncates).  A ring it cannot lock within 100 ms (a reader holds it)
-- is left for the next call.  Returns how many rows went: exact for the
-- rows deleted, the statistics' estimate for a ring emptied.  It runs with its
-- owner's rights: TRUNCATE is a right of the table's owner, not one to
-- grant the worker role.  Sequential scans are off: "a row past the
-- cutoff?" is answered from the BRIN summary (an old ring: no range to
-- read) where a scan would read the whole ring to find none.
create function pgjob.prune_done(cutoff timestamptz, batch int default 0)
returns bigint
language plpgsql
volatile
security definer
set search_path = pg_catalog, pg_temp
set enable_seqscan = off
as $$
declare
	n bigint := 0;
	k bigint;
	newer boolean;
	part regclass;
begin
	if cutoff is null then
		raise exception 'pgjob.prune_done: the cutoff must not be null'
			using errcode = '22004';
	end if;
	for i in 0..15 loop
		part := format('pgjob.jobs_done_%s', i)::regclass;
		execute format('select exists (select 1 from %s where'
			' finished_at >= $1)', part) into newer using cutoff;
		if newer then
			if batch > 0 then
				execute format('with d as (delete from %s where ctid in'
					' (select ctid from %s where finished_at < $1'
					' limit $2) returning 1) select count(*) from d',
					part, part) into k using cutoff, batch;
				n := n + k;
			end if;
			continue;
		end if;
		execute format('select exists (select 1 from %s)', part)
			into newer;
		if not newer then
			continue;
		end if;
		-- How many it holds, for the log: the statistics' estimate
		-- (autovacuum analyzes a ring as it fills), or for a ring never
		-- analyzed a count of a million rows at most.  Never a count of
		-- the whole ring: this runs on a worker's connection, ahead of
		-- its claims and lease renewals, and a ring can hold a
		-- twelfth of the retention's jobs.
		select c.reltuples::bigint into k from pg_class c
		 where c.oid = part and c.reltuples >= 0;
		if k is null then
			execute format('select count(*) from (select 1 from %s'
				' limit 1000000) x', part) into k;
		end if;
		begin
			perform set_config('lock_timeout', '100ms', true);
			execute format('lock table %s in access exclusive mode', part);
		exception when lock_not_available then
			perform set_config('lock_timeout', '0', true);
			continue;
		end;
		perform set_config('lock_timeout', '0', true);
		execute format('select exists (select 1 from %s where'
			' finished_at >= $1)', part) into newer using cutoff;
		if not newer then
			execute format('truncate %s', part);
			n := n + k;
		end if;
	end loop;
	return n;
end
$$;

-- The attempt history (sql/013_attempts.sql) of a job in either table.
create or replace function pgjob.job_attempts(j bigint)
returns table (attempt int, started_at timestamptz, finished_at timestamptz,
	worker text, outcome text, status int, error text, wall_ms int,
	cpu_ms int, max_rss_kb int, token bigint)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
	select a.attempt, a.started_at, a.finished_at, a.worker, a.outcome,
		a.status, a.error, a.wall_ms, a.cpu_ms, a.max_rss_kb, a.token
	  from pgjob.attempts a where a.job_id = j
	union all
	-- While it runs, the figures on the row are an earlier attempt's.
	select x.attempts, x.attempted_at,
		case when x.state = 'done' then x.finished_at end, x.locked_by,
		x.state,
		null, null,
		case when x.state = 'done' then x.last_wall_ms end,
		case when x.state = 'done' then x.last_cpu_ms end,
		case when x.state = 'done' then x.last_max_rss_kb end,
		x.lease_token
	  from pgjob.all_jobs x
	 where x.id = j and x.state in ('running', 'done') and x.attempts > 0
	order by 11, 2
$$;

-- The jobs of ids kept in jobs_done back in pgjob.jobs, as they are, done:
-- before a retry of a done job (the console's) and before a child is
-- attached to a parent kept here (below).  Returns how many moved.
create function pgjob.restore_done(ids bigint[]) returns bigint
language sql
volatile
as $$
	with m as (delete from pgjob.jobs_done x where x.id = any(ids)
		returning x.id, x.queue, x.kind, x.payload, x.priority, x.run_at,
			x.state, x.attempts, x.max_attempts, x.locked_by,
			x.locked_until, x.lease_token, x.unique_key, x.ordering_key,
			x.last_error, x.result, x.created_at, x.finished_at,
			x.lost_attempts, x.limit_key, x.cost, x.attempted_at,
			x.children, x.parents_left, x.on_parent_failure,
			x.workflow_id, x.step, x.batch_id, x.last_wall_ms,
			x.last_cpu_ms, x.last_max_rss_kb, x.last_status),
	i as (insert into pgjob.jobs (id, queue, kind, payload, priority,
		run_at, state, attempts, max_attempts, locked_by, locked_until,
		lease_token, unique_key, ordering_key, last_error, result,
		created_at, finished_at, lost_attempts, limit_key, cost,
		attempted_at, children, parents_left, on_parent_failure,
		workflow_id, step, batch_id, last_wall_ms, last_cpu_ms,
		last_max_rss_kb, last_status)
	overriding system value select * from m returning 1)
	select count(*) from i
$$;

-- A parent that ended done as a plain job is in jobs_done: it goes back to
-- pgjob.jobs first (pgjob.restore_done()), done, where its children's edges, the release of a
-- retried child (pgjob.parents_of()) and the pruning that waits for its
-- children (prune.c) find it.  Otherwise version 11's function as it was.
create or replace function pgjob.attach(child bigint, deps bigint[], pol text,
	out state text, out parents_left int, out why text, out add jsonb)
language plpgsql
as $$
declare
	p record;
	n int := 0;
	missing bigint;
	failed boolean;
	dn text[] := '{}';      -- parents that ended done: names, results
	dr jsonb[] := '{}';
	fn_ text[] := '{}';     -- that failed, for a 'run' child
	fo jsonb[] := '{}';
begin
	state := 'available';
	parents_left := 0;
	deps := array(select distinct d from unnest(deps) d where d is not null order by d);
	perform pgjob.restore_done(deps);
	select d into missing from unnest(deps) d
	 where not exists (select 1 from pgjob.jobs j where j.id = d) limit 1;
	if missing is not null then
		raise exception 'pgjob.enqueue: depends_on: no job %', missing
			using errcode = '23503',
			hint = 'A parent must exist when its child is enqueued: a pruned job is gone, and under retention 0 so is a job that ended done.';
	end if;
	for p in select j.id, j.state, j.result, j.last_error,
			coalesce(j.step, j.id::text) as name
		   from pgjob.jobs j where j.id = any(deps)
		  order by j.id for update loop
		n := n + 1;
		failed := p.state in ('dead', 'cancelled');
		if p.state in ('waiting', 'available', 'running')
		   or (failed and pol = 'wait') then
			parents_left := parents_left + 1;
			insert into pgjob.job_deps values (p.id, child, null);
		elsif failed and pol = 'cancel' then
			state := 'cancelled';
			why := coalesce(why, format('parent %s ended %s', p.name, p.state));
			insert into pgjob.job_deps values (p.id, child, p.state);
		else
			insert into pgjob.job_deps values (p.id, child, p.state);
			if failed then
				fn_ := fn_ || p.name;
				fo := fo || jsonb_build_object('state', p.state,
					'error', p.last_error);
			else
				dn := dn || p.name;
				dr := dr || p.result;
			end if;
		end if;
	end loop;
	add := case when cardinality(dn) > 0
		then jsonb_build_object('parents', (select jsonb_object_agg(x.n, x.r)
			from unnest(dn, dr) x(n, r)))
		else '{}' end
	    || case when cardinality(fn_) > 0
		then jsonb_build_object('failed', (select jsonb_object_agg(x.n, x.o)
			from unnest(fn_, fo) x(n, o)))
		else '{}' end;
	if n < cardinality(deps) then
		-- Deleted while this waited for its lock (retention 0, a
		-- prune, by hand).
		raise exception 'pgjob.enqueue: depends_on: a parent was deleted'
			using errcode = '23503',
			hint = 'Under retention 0 a job that ended done is deleted: enqueue its children in the same transaction as the parent, or as a workflow.';
	end if;
	update pgjob.jobs j set children = true
	 where j.id = any(deps) and j.children is not true;
	if state <> 'cancelled' and parents_left > 0 then
		state := 'waiting';
	end if;
end
$$;
