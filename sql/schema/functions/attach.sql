-- Attaches child to its parents deps.  A parent the session may not act on
-- is no job to it: the same error as a parent that does not exist, before
-- anything is read, moved or locked.
create or replace function pgjob.attach(child bigint, deps bigint[], pol text,
	out state text, out parents_left int, out why text, out add jsonb)
language plpgsql
-- Its statements read each parent by its key.  Their plans are cached for
-- the session, and those made while pgjob.jobs is small (a new install, a
-- table just truncated) read it whole: the children of a graph enqueued one
-- by one in a transaction (a fan-out of 10,000) each read every job
-- enqueued before them, 32 s for the fan-out (test_plans).  And planned once:
-- the custom plan an application's session made at each call took half a
-- millisecond (the 32 partitions of pgjob.jobs_done).
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
as $$
declare
	p record;
	n int := 0;
	attempt int;
	missing bigint;
	away boolean;
	failed boolean;
	reads boolean := pgjob.session_reads();
	dn text[] := '{}';      -- parents that ended done: names, results
	dr jsonb[] := '{}';
	fn_ text[] := '{}';     -- that failed, for a 'run' child
	fo jsonb[] := '{}';
begin
	state := 'available';
	parents_left := 0;
	deps := array(select distinct d from unnest(deps) d where d is not null order by d);
	-- The first parent that is no job to it, and whether any is not in
	-- pgjob.jobs.  Each a subquery by the parent's key, not a join: made
	-- while the table was small, a join's plan read it whole.
	select (array_agg(t.d) filter (where not t.mine))[1],
	       coalesce(bool_or(not t.here), false)
	  into missing, away
	  from (select u.d,
		       exists (select 1 from pgjob.jobs j where j.id = u.d) as here,
		       exists (select 1 from pgjob.jobs j where j.id = u.d
			       and pgjob.session_may(j.enqueued_by, reads))
		       or exists (select 1 from pgjob.jobs_done x
				  where x.id = u.d
				    and pgjob.session_may(x.enqueued_by, reads))
			 as mine
		  from unnest(deps) u(d)) t;
	-- A parent that ended done and was moved to pgjob.jobs_done comes
	-- back into pgjob.jobs (its child's edge is kept there), and may have
	-- been deleted meanwhile.  Only then: pgjob.restore_done() is planned
	-- at each call, half a millisecond of every child's enqueue when it
	-- was called for parents still queued (most are).
	if missing is null and away then
		perform pgjob.restore_done(deps);
		select d into missing from unnest(deps) d
		 where not exists (select 1 from pgjob.jobs j where j.id = d) limit 1;
	end if;
	if missing is not null then
		raise exception 'pgjob.enqueue: depends_on: no job %', missing
			using errcode = '23503',
			hint = 'A parent must exist when its child is enqueued: a pruned job is gone, and under retention 0 so is a job that ended done.';
	end if;
	-- The parents locked.  A parent that was in pgjob.jobs when read
	-- above can end done while this waits for its lock, and the end of a
	-- plain job moves it to pgjob.jobs_done (a delete here, in the same
	-- statement): the lock then finds no row.  Committed by then, the
	-- move shows to the next statement: the parent comes back, and is
	-- locked again.  Until version 46 such a child's enqueue failed ("a
	-- parent was deleted") when its parent ended at that moment
	-- (test_enqueue's test_parent_moved_while_locking).
	for attempt in 1 .. 3 loop
		select count(*) into n from (select 1 from pgjob.jobs j
			where j.id = any(deps) order by j.id for update) l;
		exit when n = cardinality(deps);
		perform pgjob.restore_done(deps);
	end loop;
	n := 0;
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
		-- prune, by hand): which one, for the operator.
		select d into missing from unnest(deps) d
		 where not exists (select 1 from pgjob.jobs j where j.id = d)
		 limit 1;
		raise exception 'pgjob.enqueue: depends_on: parent % was deleted',
			missing
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
