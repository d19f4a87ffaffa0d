-- Parent p (named pn) ended in state ps: what each of its unresolved
-- children makes of it.  Returns the children it cancelled (their own
-- children are the caller's next round) and how many it made due.
create or replace function pgjob.parent_ended(p bigint, ps text, pn text,
	out cancelled bigint[], out due int)
language plpgsql
as $$
declare
	c record;
	kids bigint[];
	rel bigint[];
begin
	cancelled := '{}';
	due := 0;
	if ps = 'done' then
		kids := array(select d.child from pgjob.job_deps d
			       where d.parent = p and d.resolved is null
			       order by d.child);
	else
		-- A parent that failed: each waiting child as its policy says.
		-- 'wait' leaves the edge unresolved until a retry of the
		-- parent ends done; 'cancel' cancels the child; 'run' counts
		-- the end as a done one, below, with the children that no
		-- longer wait (cancelled by hand or by another parent).
		kids := '{}';
		for c in select d.child, coalesce(j.on_parent_failure, 'cancel') as policy,
				j.state
			   from pgjob.job_deps d join pgjob.jobs j on j.id = d.child
			  where d.parent = p and d.resolved is null
			  order by d.child
			  for update of j loop
			if c.state = 'waiting' and c.policy = 'wait' then
				continue;
			elsif c.state = 'waiting' and c.policy = 'cancel' then
				update pgjob.job_deps set resolved = ps
				 where parent = p and child = c.child;
				update pgjob.jobs set state = 'cancelled',
					finished_at = now(),
					last_error = format('parent %s ended %s', pn, ps)
				 where id = c.child;
				cancelled := cancelled || c.child;
			else
				kids := kids || c.child;
			end if;
		end loop;
	end if;
	if cardinality(kids) = 0 then
		return;
	end if;
	-- Set by set: a fan-out of thousands is a few statements, not a few
	-- per child.  The children are locked in id order (two ends that
	-- share children take them in the same order); the edges are settled
	-- first, so that the payload of a child released here reads this
	-- parent's end too.
	perform 1 from pgjob.jobs j where j.id = any(kids)
	 order by j.id for update;
	update pgjob.job_deps set resolved = ps
	 where parent = p and child = any(kids);
	-- Those that waited for this one only are released, their payload
	-- written once, from every edge; the others count this end.
	rel := array(select j.id from pgjob.jobs j
		      where j.id = any(kids) and j.state = 'waiting'
			and j.parents_left <= 1);
	update pgjob.jobs j set parents_left = j.parents_left - 1
	 where j.id = any(kids) and j.state = 'waiting'
	   and j.parents_left > 1;
	if cardinality(rel) > 0 then
		update pgjob.jobs j set parents_left = 0, state = 'available',
			run_at = greatest(j.run_at, now()),
			payload = pgjob.with_parent(j.payload, x.add)
		  from pgjob.parents_of(rel) x
		 where j.id = x.child;
		due := cardinality(rel);
	end if;
end
$$;
