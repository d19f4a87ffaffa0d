-- pgjobd schema, version 26: an unfinished job waits exactly when it has
-- parents left.
--
-- A job enqueued with parents that have not ended waits (state 'waiting',
-- parents_left the count of them); the end of its last parent releases it
-- (parents_left 0, state 'available'); a retry of one cancelled while it
-- waited sets both again from its edges.  Every writer keeps that; now
-- the table does too.  With version 23's check it makes "finished_at is
-- null and coalesce(parents_left, 0) = 0" say exactly what
-- "state in ('available', 'running')" says, in columns the claim does not
-- write: what indexes restated for a claim that writes no index entry
-- need (docs/performance.md, "The switch").  Finished jobs are left out:
-- one cancelled while it waited keeps its parents_left.
--
-- Rows that break it are mended first, by their state: an available or
-- running job's parents_left becomes 0; a waiting job without a count gets
-- the count of its edges no end has resolved, and is made available when
-- there are none (its payload then lacks its parents' results: such a row
-- was not written by pgjobd).  The check reads the whole table under the
-- lock ALTER TABLE takes, as version 23's did.
update pgjob.jobs set parents_left = 0
 where state in ('available', 'running') and parents_left > 0;
update pgjob.jobs j set parents_left = d.n
  from (select d.child, count(*)::int as n from pgjob.job_deps d
	 where d.resolved is null group by d.child) d
 where j.id = d.child and j.state = 'waiting'
   and coalesce(j.parents_left, 0) = 0;
update pgjob.jobs set state = 'available', parents_left = 0
 where state = 'waiting' and coalesce(parents_left, 0) = 0;
alter table pgjob.jobs add constraint jobs_waiting_check
	check (finished_at is not null
		or (state = 'waiting') = (coalesce(parents_left, 0) > 0));
