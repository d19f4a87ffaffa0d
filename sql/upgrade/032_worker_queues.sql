-- pgjobd schema, version 32: the queues each worker serves, so that a job
-- that no live worker will ever claim is reported instead of waiting in
-- silence (a typo in its queue: pgjob enqueue rec '{}' --queue defualt).
--
-- A worker claims the kinds it has handlers for from the queues of those
-- handlers (docs/queues.md): a job is served by a worker whose kinds hold
-- its kind and whose queues hold its queue.  The kinds were in its row
-- already; the queues are now too, written when it registers.  Null: a
-- worker of an older pgjobd, which does not say; it counts as serving
-- every queue, so that a rolling upgrade raises no false alarm.
alter table pgjob.workers add column queues text[];

-- The available jobs that no live worker serves (a worker is live while
-- its heartbeat is younger than `live`), per kind and queue: how many, how
-- many are due, since when the oldest due one waits, and whether a live
-- worker handles the kind at all (false: no handler anywhere; true: only
-- not in this queue).  pgjob status, pgjob doctor, the console and the
-- metrics read it.  Along jobs_claim_idx, as the queue depths; the pairs
-- are few, so the workers are looked at per pair, not per job.  It runs
-- with the caller's rights: the worker role reads both tables.
create function pgjob.unserved(live interval default '30 seconds')
returns table (kind text, queue text, jobs bigint, due bigint,
	       oldest_due_at timestamptz, kind_handled boolean)
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
	with w as (
		select x.kinds, x.queues from pgjob.workers x
		 where x.heartbeat_at >= now() - live),
	p as (
		select j.kind, j.queue, count(*) as jobs,
		       count(*) filter (where j.run_at <= now()) as due,
		       min(j.run_at) filter (where j.run_at <= now())
			as oldest_due_at
		  from pgjob.jobs j
		 where j.finished_at is null
		   and coalesce(j.parents_left, 0) = 0
		   and j.state = 'available'
		 group by j.kind, j.queue)
	select p.kind, p.queue, p.jobs, p.due, p.oldest_due_at,
	       exists (select 1 from w where p.kind = any(w.kinds))
	  from p
	 where not exists (
		select 1 from w
		 where p.kind = any(w.kinds)
		   and (w.queues is null or p.queue = any(w.queues)))
	 order by p.queue, p.kind
$$;

-- Whether a live worker (heartbeat within 30 s, as pgjob status counts
-- them) serves queue_name: null when no worker is live at all.  For
-- pgjob enqueue's warning, so it runs with its owner's rights: a role
-- that may only enqueue learns this one bit and nothing else of the
-- workers.
create function pgjob.queue_served(queue_name text)
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

-- unserved() runs with the caller's rights: as 030 did for every such
-- function, the roles that read the jobs get it (a worker role, a
-- console's or an operator's read-only role); PUBLIC does not.
revoke execute on function pgjob.unserved(interval) from public;
do $$
declare
	r record;
begin
	for r in select a.rolname from pg_catalog.pg_roles a
		  where not a.rolsuper and a.rolname !~ '^pg_'
		    and a.oid <> (select n.nspowner from pg_catalog.pg_namespace n
				  where n.nspname = 'pgjob')
		    and (has_table_privilege(a.oid, 'pgjob.jobs', 'SELECT')
			 or has_table_privilege(a.oid, 'pgjob.all_jobs', 'SELECT'))
	loop
		execute format('grant execute on function pgjob.unserved(interval) to %I',
			       r.rolname);
	end loop;
end
$$;

-- Who may enqueue may ask.
revoke execute on function pgjob.queue_served(text) from public;
do $$
declare
	g text;
begin
	for g in select pg_get_userbyid(a.grantee)
		   from pg_proc p, aclexplode(p.proacl) a
		  where p.oid = 'pgjob.enqueue_many(jsonb)'::regprocedure
		    and a.privilege_type = 'EXECUTE' and a.grantee <> 0
		    and a.grantee <> p.proowner loop
		execute format('grant execute on function pgjob.queue_served(text) to %I', g);
	end loop;
end
$$;
