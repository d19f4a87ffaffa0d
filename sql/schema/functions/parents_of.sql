-- What a child's payload gains from its ended parents, under "pgjob":
-- {"parents": {name: result}} for those that ended done, {"failed":
-- {name: {"state", "error"}}} for those that did not and that it runs
-- after anyway; a key only when it has entries.  For many children at
-- once: one pass over their edges, never a lookup per child (a plan made
-- before job_deps had statistics would scan the whole table for each).
create or replace function pgjob.parents_of(children bigint[])
returns table (child bigint, add jsonb)
language sql
stable
as $$
	-- The edges, then their parents by their keys, each once (a
	-- fan-out's ten thousand edges have one parent), then the two short
	-- lists joined: never a join with pgjob.jobs itself, whose plan a
	-- job_deps without statistics made a read of jobs_pkey whole.
	with d as materialized (
		select e.child, e.parent, e.resolved from pgjob.job_deps e
		 where e.child = any(parents_of.children)
		   and e.resolved is not null),
	p as materialized (
		select p.id, p.step, p.result, p.last_error
		  from pgjob.jobs p
		 where p.id = any(array(select distinct d.parent from d)))
	select d.child, case when bool_or(d.resolved = 'done')
		then jsonb_build_object('parents',
			jsonb_object_agg(coalesce(p.step, p.id::text), p.result)
			filter (where d.resolved = 'done'))
		else '{}' end
	    || case when bool_or(d.resolved <> 'done')
		then jsonb_build_object('failed',
			jsonb_object_agg(coalesce(p.step, p.id::text),
				jsonb_build_object('state', d.resolved, 'error', p.last_error))
			filter (where d.resolved <> 'done'))
		else '{}' end
	  from d join p on p.id = d.parent
	 group by d.child
$$;
