-- Schema version 33: a crash loop of a process handler seen outside the
-- host (docs/handlers.md, "Crashes"; docs/console.md).  Each heartbeat
-- writes the worker's count of copies that ended unasked (the figure its
-- /metrics counts as pgjobd_process_crashes_total) and the kinds whose
-- program keeps ending without answering a job now, so that the console
-- and `pgjob status` show them from the database, as they show the rest.
alter table pgjob.workers
	add column process_crashes bigint not null default 0,
	add column crash_loops text[];
