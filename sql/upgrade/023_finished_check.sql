-- pgjobd schema, version 23: a job is finished exactly when its state says
-- so.
--
-- finished_at is null while a job waits, is available or runs, and set
-- once it is done, dead or cancelled.  Every writer of the daemon, pgjob
-- and these functions keeps that; now the table does too, for rows
-- written by hand or by an application's own SQL.  It is also what lets a
-- later version index the unfinished jobs by finished_at, a column the
-- claim does not write, where today's indexes name state, which it does
-- (docs/performance.md, "The finish of a dense batch; what the claim's
-- index entries cost").
--
-- Rows that break it are mended first, by their state: a finished state
-- without a time gets now(), an unfinished one loses its time.  The
-- updates and the check read the whole table, the check under the lock
-- ALTER TABLE takes, which holds the workers' claims until the migration
-- commits: seconds for a table of millions (docs/operations.md).
update pgjob.jobs set finished_at = now()
 where state in ('done', 'dead', 'cancelled') and finished_at is null;
update pgjob.jobs set finished_at = null
 where state in ('waiting', 'available', 'running')
   and finished_at is not null;
alter table pgjob.jobs add constraint jobs_finished_check
	check ((finished_at is null) = (state in ('waiting', 'available',
		'running')));
