-- The parents ps ended (each with children): what each of their
-- unresolved children makes of it, for all of them at once.  Returns how
-- many children it made due; the children it cancels end by its update,
-- and their row trigger notes them for pgjob.ends_count()'s next round.
--
-- Set by set: a fan-out of thousands, or a fan-in whose parents end in one
-- statement, is five statements at most, whatever the number of edges; a child
-- shared by many of the parents is locked and written once, by all of
-- their ends together.
--
-- A child of one parent, which ended done, goes first, in one statement
-- (version 45): a chain's next step, each child of a fan-out.  No other
-- end counts for such a child, so there is nothing another transaction
-- may be writing that it must wait to read; the update locks it, and one
-- changed meanwhile (cancelled by hand) is read again at its newest version
-- by the update's own recheck and, no longer waiting, left to the rest
-- below, its edge unresolved.  The rest, when there is any:
--
-- The children are locked first, in id order (two ends that share
-- children take them in the same order), and what decides is read from
-- the locked rows, in the next statement (a snapshot taken once the locks
-- are held): a parent that ended at the same moment in another
-- transaction was counted there, and its count is on the row.  Each edge
-- is settled (resolved: how the parent ended) in the statement that
-- decides for its child, and a child is released by the next one, so the
-- payload of a child released here reads all its parents' ends
-- (pgjob.parents_of()).  A parent that ended dead or cancelled does what
-- its child's on_parent_failure says (docs/workflows.md): 'wait' leaves
-- the edge unresolved until a retry of the parent ends done; 'cancel'
-- cancels the waiting child (once, whichever of its failed parents names
-- it); 'run' counts the end as a done one.  A child that no longer waits
-- (cancelled by hand, or by another parent) has its edges settled and
-- nothing else.
create or replace function pgjob.parents_ended(ps bigint[]) returns int
language plpgsql
as $$
declare
	cids bigint[];
	whys text[];
	dids bigint[];
	dns int[];
	rel bigint[];
	pids bigint[];
	adds jsonb[];
	unresolved bigint;
	due int;
begin
	-- The children of one edge each whose parent ended done, with what
	-- parents_of() would give them: that parent's result; and how many
	-- edges of ps are unresolved.  The edges by their key; each child
	-- once, its edges counted by its index up to the second (a fan-in's
	-- child has thousands, and a batch's ends reach it by a thousand of
	-- them); what each of their parents gives, by the parents' key, in
	-- one object.  No join of lists whose sizes the planner guesses: a
	-- job_deps without statistics (a graph enqueued a moment ago), or
	-- with a past graph's, made a join with a table read it whole
	-- (test_plans), and a nested loop over two lists of 10,000 edges took
	-- 10 s; nor a parents' index read for each edge (with a batch's
	-- thousand ids, a million probes).
	with e as materialized (
		select d.parent, d.child from pgjob.job_deps d
		 where d.parent = any(ps) and d.resolved is null),
	one as materialized (
		select min(e.parent) as parent, e.child from e
		 group by e.child
		having count(*) = 1
		   and (select count(*) from (select from pgjob.job_deps o
			 where o.child = e.child limit 2) x) = 1),
	p as materialized (
		select jsonb_object_agg(j.id::text, jsonb_build_object('parents',
			jsonb_build_object(coalesce(j.step, j.id::text),
			j.result))) as adds
		  from pgjob.jobs j
		 where j.id = any(array(select distinct one.parent from one))
		   and j.state = 'done')
	select array_agg(one.child order by one.child)
		 filter (where p.adds ? one.parent::text),
	       array_agg(p.adds -> one.parent::text order by one.child)
		 filter (where p.adds ? one.parent::text),
	       (select count(*) from e)
	  into rel, adds, unresolved
	  from one, p;
	due := 0;
	if rel is not null then
		-- Released, and their edges settled.  The update locks each
		-- child, in id order as the rest below does (two transactions
		-- that lock the same children, a bulk cancel among them, take
		-- them in one order): one changed meanwhile (cancelled by hand)
		-- is read again at its newest version, and no longer waiting,
		-- is left to the rest below, its edge unresolved.
		with r as (
			update pgjob.jobs c set parents_left = 0,
				state = 'available',
				run_at = greatest(c.run_at, now()),
				payload = pgjob.with_parent(c.payload, x.add)
			  from unnest(rel, adds) x(id, add)
			 where c.id = x.id and c.state = 'waiting'
			   and c.parents_left = 1
			returning c.id
		), e as (
			update pgjob.job_deps d set resolved = 'done'
			 where d.parent = any(ps)
			   and d.child = any(array(select r.id from r))
			returning 1
		)
		select count(*) into due from e;
	end if;
	if due = unresolved then
		return due;
	end if;
	perform 1 from pgjob.jobs j
	 where j.id = any(array(select d.child from pgjob.job_deps d
			 where d.parent = any(ps) and d.resolved is null))
	 order by j.id
	   for update;
	-- Joins with the jobs by their key only, never with a list of the
	-- children built here: with no statistics on job_deps yet (a graph
	-- enqueued a moment ago) the planner counts one row for such a list
	-- and reads it whole for every edge.
	with s as (
		update pgjob.job_deps d set resolved = p.state
		  from pgjob.jobs p, pgjob.jobs c
		 where d.parent = any(ps) and d.resolved is null
		   and p.id = d.parent and c.id = d.child
		   and (p.state = 'done' or c.state <> 'waiting'
			or coalesce(c.on_parent_failure, 'cancel') <> 'wait')
		returning d.parent, d.child, p.state as pst,
			  coalesce(p.step, p.id::text) as pn, c.state,
			  c.parents_left,
			  coalesce(c.on_parent_failure, 'cancel') as policy
	), k as (
		select s.child,
		       case when bool_or(s.pst <> 'done' and s.policy = 'cancel')
			    then 'c'
			    when min(s.parents_left) <= count(*) then 'r'
			    else 'd' end as act,
		       count(*)::int as n,
		       (array_agg(format('parent %s ended %s', s.pn, s.pst)
			order by s.parent) filter (where s.pst <> 'done'))[1] as why
		  from s
		 where s.state = 'waiting'
		 group by s.child
	)
	select array_agg(k.child order by k.child) filter (where k.act = 'c'),
	       array_agg(k.why order by k.child) filter (where k.act = 'c'),
	       array_agg(k.child order by k.child) filter (where k.act = 'd'),
	       array_agg(k.n order by k.child) filter (where k.act = 'd'),
	       array_agg(k.child order by k.child) filter (where k.act = 'r')
	  into cids, whys, dids, dns, rel
	  from k;
	-- Each update below reads its list once, each row of it finding its
	-- job by jobs_pkey.
	if cids is not null then
		update pgjob.jobs j set state = 'cancelled', finished_at = now(),
			last_error = x.why
		  from unnest(cids, whys) x(id, why)
		 where j.id = x.id;
	end if;
	-- Those that still wait for others count these ends.
	if dids is not null then
		update pgjob.jobs j set parents_left = j.parents_left - x.n
		  from unnest(dids, dns) x(id, n)
		 where j.id = x.id;
	end if;
	-- Those that waited for these only are released, their payload
	-- written once, from every edge.
	if rel is null then
		return due;
	end if;
	-- What each gains from its parents, then the rows by their ids, as
	-- the updates above.  Not a join with parents_of(): its plan came
	-- from job_deps' statistics, and with none yet (a graph enqueued in
	-- the last minute, before autovacuum's first ANALYZE) it hashed the
	-- children and read jobs_pkey whole for them, every job of the
	-- table for each release: a chain's hop grew with the table
	-- (docs/performance.md, "Two builds side by side").  Not the
	-- payloads' array read at each row's place either: an element of a
	-- jsonb[] is found by walking the ones before it, quadratic in a
	-- fan-out.
	select array_agg(x.child), array_agg(x.add)
	  into pids, adds
	  from pgjob.parents_of(rel) x;
	update pgjob.jobs j set parents_left = 0, state = 'available',
		run_at = greatest(j.run_at, now()),
		payload = pgjob.with_parent(j.payload, x.add)
	  from unnest(pids, adds) x(id, add)
	 where j.id = x.id;
	return due + cardinality(rel);
end
$$;
