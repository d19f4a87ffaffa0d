-- Version 39: the ends of parents, workflow steps and batch jobs are
-- counted once per statement, set by set (pgjob.ends_count(),
-- pgjob.parents_ended(), the statement trigger jobs_ended_flush; all
-- restated from their files), rather than one row at a time: a fan-in's
-- child, a workflow's row and a batch's row are written once per
-- statement that ends some of their jobs, not once per job.
drop function pgjob.parent_ended(bigint, text, text);
-- Room on each page for every edge's one update (resolved), so that it is
-- HOT; edges written before keep their pages until they are rewritten.
alter table pgjob.job_deps set (fillfactor = '50');
