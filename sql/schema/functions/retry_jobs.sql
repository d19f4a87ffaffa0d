-- The jobs of ids run again, attempts, lost attempts and snoozes 0, due
-- now.  It takes a job in a state of action_states('retry'), an available
-- one only after a failed attempt (attempts > 0 or an error).  A plain
-- job done, kept in pgjob.jobs_done (sql/schema/tables/jobs_done.sql), goes back to
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
-- when none is left it is released as pgjob.parents_ended() releases, its
-- parents' results merged into its payload.  Edges that a parent's end
-- resolved while the job was cancelled stay resolved: such a failed parent
-- shows under "failed" in the payload, whatever the job's
-- on_parent_failure.
--
-- state: the job's state now, available or waiting (null: not retried).
-- A retry notifies channel pgjob in its transaction, so idle workers
-- claim the jobs when it commits.
create or replace function pgjob.retry_jobs(ids bigint[])
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
