-- pgjobd schema, version 33: one path for each operator action.
--
-- Retry, cancel and delete by hand were statements of pgjob and of the web
-- console, with rules of their own: the console retried done jobs and
-- pgjob retry refused them; pgjob retry looked for the holder of a job's
-- unique_key itself, and the console's bulk retry sent seven statements a
-- batch.  Now each action is one function, which pgjob and the console
-- call alike, one call per job (pgjob) or per batch of up to 10,000 ids
-- (the console): its rules are here and nowhere else (docs/cli.md,
-- "retry", "cancel"; docs/console.md, "Jobs").
--
-- Each takes ids, acts on those it may, leaves the others as they are, and
-- answers one row per distinct id, in id order: was, the job's state
-- before (null: no such job, or one the session may not act on); then
-- what the action did.  Each runs with its caller's rights (no SECURITY
-- DEFINER): a role acts on what its grants let it write, and on a job by
-- its id only as version 30's functions do (pgjob.session_may(): its
-- enqueuer, a member of that role, or a role that reads pgjob.jobs;
-- docs/security.md, "Who may act on a job by its id").  Each locks the
-- rows it decides about (FOR UPDATE, in id order, so that two bulk
-- actions over the same jobs never deadlock), so that a claim (FOR UPDATE
-- SKIP LOCKED) cannot take a job meanwhile; an sql handler keeps its job's
-- row locked while it runs, which is waited for 10 s at most
-- (lock_timeout: 55P03 after that).  last_error and lease_token stay: the
-- error is the operator's evidence, and the token never goes back
-- (docs/daemon.md, "Leases").

-- The states each action takes: the console counts a filter's matches in
-- these before it acts (docs/console.md).  Retry: dead, cancelled and done
-- (run again, as River's JobRetry and Oban's retry_job do), and available
-- after a failed attempt (it skips the backoff; retry_jobs() checks the
-- failure).  Cancel: waiting and available; cancel_running adds running
-- jobs, whose worker stops them at its next lease renewal.  Delete: any
-- job that is not running or waiting (delete_jobs() leaves out the jobs
-- only the pruning duty takes).
create function pgjob.action_states(action text) returns text[]
language sql
immutable
as $$
	select case action
		when 'retry' then '{dead,cancelled,done,available}'::text[]
		when 'cancel' then '{waiting,available}'::text[]
		when 'cancel_running' then '{waiting,available,running}'::text[]
		when 'delete' then '{available,done,dead,cancelled}'::text[]
	end
$$;

-- The jobs of ids run again, attempts, lost attempts and snoozes 0, due
-- now.  It takes a job in a state of action_states('retry'), an available
-- one only after a failed attempt (attempts > 0 or an error).  A plain
-- job done, kept in pgjob.jobs_done (sql/019_jobs_done.sql), goes back to
-- pgjob.jobs first.
--
-- Unique keys: jobs_unique_key_idx allows one unfinished, released job per
-- unique_key, and a retry never makes a second.  Of the jobs of ids with
-- one key, the one that holds it now (an available job after a failed
-- attempt) is retried, or when none does the newest; the others are left
-- as they are, with holder the job that holds the key (or will, from this
-- retry).
--
-- A job that was cancelled while it waited for its parents (parents_left
-- > 0: it was never released) goes back to waiting for those whose end it
-- has not counted (edges not resolved), as pgjob.attach() would have it;
-- when none is left it is released as pgjob.parent_ended() releases, its
-- parents' results merged into its payload.  Edges that a parent's end
-- resolved while the job was cancelled stay resolved: such a failed parent
-- shows under "failed" in the payload, whatever the job's
-- on_parent_failure.
--
-- state: the job's state now, available or waiting (null: not retried).
-- A retry notifies channel pgjob in its transaction, so idle workers
-- claim the jobs when it commits.
create function pgjob.retry_jobs(ids bigint[])
returns table (id bigint, was text, state text, holder bigint,
	       unique_key text)
language plpgsql
volatile
set lock_timeout = '10s'
as $$
#variable_conflict use_column
declare
	reads boolean := pgjob.session_reads();
	jid bigint[];
	jwas text[];
	jholder bigint[];
	jkey text[];
	pick bigint[];
begin
	perform pgjob.restore_done(array(
		select d.id from pgjob.jobs_done d
		 where d.id = any(ids) and pgjob.session_may(d.enqueued_by, reads)));
	with c as (
		select j.id, j.state, j.unique_key,
		       j.state = any(pgjob.action_states('retry'))
			and (j.state <> 'available' or j.attempts > 0
			     or j.last_error is not null) as takes
		  from pgjob.jobs j
		 where j.id = any(ids) and pgjob.session_may(j.enqueued_by, reads)
		 order by j.id
		   for update),
	-- The unfinished, released job that holds each key: one at most
	-- (along jobs_unique_key_idx, whose predicate this repeats).
	k as (
		select o.unique_key, o.id from pgjob.jobs o
		 where o.unique_key in (select c.unique_key from c
					 where c.takes and c.unique_key is not null)
		   and o.unique_key is not null and o.finished_at is null
		   and coalesce(o.parents_left, 0) = 0),
	n as (
		select c.unique_key, max(c.id) as id from c
		 where c.takes and c.unique_key is not null
		 group by c.unique_key),
	r as (
		select c.id, c.state, c.unique_key, c.takes,
		       coalesce(k.id, n.id) as keeper
		  from c
		  left join k on k.unique_key = c.unique_key
		  left join n on n.unique_key = c.unique_key)
	select coalesce(array_agg(r.id), '{}'), array_agg(r.state),
	       array_agg(case when r.takes and r.keeper <> r.id
			 then r.keeper end),
	       array_agg(r.unique_key),
	       coalesce(array_agg(r.id) filter (where r.takes
			and (r.unique_key is null or r.keeper = r.id)), '{}')
	  into jid, jwas, jholder, jkey, pick
	  from r;

	return query
	-- e.n: the edges of each job whose parent's end it has not counted.
	with e as (
		select p.id, count(d.child) filter (where d.resolved is null) as n
		  from unnest(pick) p(id)
		  left join pgjob.job_deps d on d.child = p.id
		 group by p.id),
	u as (
		update pgjob.jobs j set
			state = case when j.parents_left > 0 and e.n > 0
				then 'waiting' else 'available' end,
			parents_left = case when j.parents_left > 0 then e.n::int
				else j.parents_left end,
			payload = case when j.parents_left > 0 and e.n = 0
				then pgjob.with_parent(j.payload, coalesce((select x.add
					from pgjob.parents_of(array[j.id]) x), '{}'))
				else j.payload end,
			run_at = now(), attempts = 0, lost_attempts = 0, snoozes = 0,
			finished_at = null, locked_by = null, locked_until = null
		  from e where j.id = e.id
		returning j.id, j.state)
	select x.id, x.was, u.state, x.holder,
	       case when x.holder is not null then x.unique_key end
	  from unnest(jid, jwas, jholder, jkey) x(id, was, holder, unique_key)
	  left join u on u.id = x.id
	union all
	select i.id, null, null, null, null
	  from (select distinct unnest(ids)) i(id)
	 where i.id is not null and i.id <> all(jid)
	 order by 1;

	if cardinality(pick) > 0 then
		perform pg_notify('pgjob', '');
	end if;
end
$$;

-- The jobs of ids in a state of action_states('cancel'), or with
-- stop_running of action_states('cancel_running'), cancelled: finished
-- now, never claimed, their unique_key free, their children following
-- their on_parent_failure.  A running job's worker sees it at its next
-- lease renewal, stops the handler and writes nothing more (every write of
-- a worker requires state = 'running').  state: cancelled, or null when
-- the job was left as it was.
create function pgjob.cancel_jobs(ids bigint[],
	stop_running boolean default false)
returns table (id bigint, was text, state text)
language plpgsql
volatile
set lock_timeout = '10s'
as $$
#variable_conflict use_column
declare
	reads boolean := pgjob.session_reads();
	takes text[] := pgjob.action_states(case when stop_running
		then 'cancel_running' else 'cancel' end);
	jid bigint[];
	jwas text[];
begin
	-- A plain job done (pgjob.jobs_done) is never cancelled: read, so
	-- that its answer says done.
	select coalesce(array_agg(c.id), '{}'), array_agg(c.state)
	  into jid, jwas
	  from (select j.id, j.state from pgjob.jobs j
		 where j.id = any(ids) and pgjob.session_may(j.enqueued_by, reads)
		 order by j.id
		   for update) c;
	return query
	with u as (
		update pgjob.jobs j set state = 'cancelled', finished_at = now(),
			locked_by = null, locked_until = null
		 where j.id = any(jid) and j.state = any(takes)
		returning j.id)
	select x.id, x.was, case when u.id is not null then 'cancelled' end
	  from unnest(jid, jwas) x(id, was)
	  left join u on u.id = x.id
	union all
	select d.id, d.state, null from pgjob.jobs_done d
	 where d.id = any(ids) and d.id <> all(jid)
	   and pgjob.session_may(d.enqueued_by, reads)
	union all
	select i.id, null, null
	  from (select distinct unnest(ids)) i(id)
	 where i.id is not null and i.id <> all(jid)
	   and not exists (select 1 from pgjob.jobs_done d where d.id = i.id
			    and pgjob.session_may(d.enqueued_by, reads))
	 order by 1;
end
$$;

-- The jobs of ids in a state of action_states('delete') deleted, from
-- either table, with their attempt history; except those that only the
-- pruning duty deletes, as it keeps the counts of their workflow or batch
-- and the edges of their parents and children (src/db/prune.c): a step of
-- a workflow, a job of a batch, a parent or a child.  deleted: whether the
-- job is gone.
create function pgjob.delete_jobs(ids bigint[])
returns table (id bigint, was text, deleted boolean)
language plpgsql
volatile
set lock_timeout = '10s'
as $$
#variable_conflict use_column
declare
	reads boolean := pgjob.session_reads();
	jid bigint[];
	jwas text[];
	gone bigint[];
begin
	select coalesce(array_agg(c.id), '{}'), array_agg(c.state),
	       coalesce(array_agg(c.id) filter (where c.takes), '{}')
	  into jid, jwas, gone
	  from (select j.id, j.state,
		       j.state = any(pgjob.action_states('delete'))
			and j.workflow_id is null and j.batch_id is null
			and j.children is not true and j.parents_left is null
			as takes
		  from pgjob.jobs j
		 where j.id = any(ids) and pgjob.session_may(j.enqueued_by, reads)
		 order by j.id
		   for update) c;
	delete from pgjob.jobs j where j.id = any(gone);
	-- pgjob.jobs_done holds plain jobs done only: each may go.
	with dd as (
		delete from pgjob.jobs_done d
		 where d.id = any(ids) and d.id <> all(jid)
		   and pgjob.session_may(d.enqueued_by, reads)
		returning d.id)
	select jid || coalesce(array_agg(dd.id), '{}'),
	       jwas || array_agg('done'::text),
	       gone || coalesce(array_agg(dd.id), '{}')
	  into jid, jwas, gone
	  from dd;
	perform pgjob.forget_attempts(gone);
	return query
	select x.id, x.was, x.id = any(gone)
	  from unnest(jid, jwas) x(id, was)
	union all
	select i.id, null, false
	  from (select distinct unnest(ids)) i(id)
	 where i.id is not null and i.id <> all(jid)
	 order by 1;
end
$$;

-- They run with the caller's rights: as 030 did for every such function,
-- the roles that read the jobs get them (a worker role; a console's or an
-- operator's read-only role, whose writes its grants refuse); PUBLIC does
-- not (docs/security.md, "Functions any role may call").
revoke execute on function pgjob.action_states(text),
	pgjob.retry_jobs(bigint[]), pgjob.cancel_jobs(bigint[], boolean),
	pgjob.delete_jobs(bigint[]) from public;
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
		execute format('grant execute on function'
			' pgjob.action_states(text), pgjob.retry_jobs(bigint[]),'
			' pgjob.cancel_jobs(bigint[], boolean),'
			' pgjob.delete_jobs(bigint[]) to %I', r.rolname);
	end loop;
end
$$;
