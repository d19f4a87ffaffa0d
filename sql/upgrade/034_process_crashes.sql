-- Schema version 34: a crash loop of a process handler seen outside the
-- host (docs/handlers.md, "Crashes"; docs/console.md).  Each heartbeat
-- writes the worker's count of copies that ended unasked (the figure its
-- /metrics counts as pgjobd_process_crashes_total) and the kinds whose
-- program keeps ending without answering a job now, so that the console
-- and `pgjob status` show them from the database, as they show the rest.
alter table pgjob.workers
	add column process_crashes bigint not null default 0,
	add column crash_loops text[];

-- And pgjob.parse_rate() (sql/schema/functions/parse_rate.sql) takes
-- ASCII white space only around a rate's parts, as the config's reader
-- does: \s followed the server's locale (tests/fixtures/rates.txt).

-- And the limited claim (sql/schema/functions/claim_limited.sql): an
-- unlocked claim spends a rate's tokens only at a clock not older than the
-- bucket's last spend, so that over any stretch of start times the starts
-- cost no more than the bucket allows.
