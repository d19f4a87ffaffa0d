-- The jobs of ids in a state of action_states('delete') deleted, from
-- either table, with their attempt history; except those that only the
-- pruning duty deletes, as it keeps the counts of their workflow or batch
-- and the edges of their parents and children (src/db/prune.c): a step of
-- a workflow, a job of a batch, a parent or a child.  deleted: whether the
-- job is gone.
create or replace function pgjob.delete_jobs(ids bigint[])
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
