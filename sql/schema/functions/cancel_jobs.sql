-- The jobs of ids in a state of action_states('cancel'), or with
-- stop_running of action_states('cancel_running'), cancelled: finished
-- now, never claimed, their unique_key free, their children following
-- their on_parent_failure.  A running job's worker sees it at its next
-- lease renewal, stops the handler and writes nothing more (every write of
-- a worker requires state = 'running').  state: cancelled, or null when
-- the job was left as it was.
create or replace function pgjob.cancel_jobs(ids bigint[],
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
