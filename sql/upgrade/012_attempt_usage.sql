-- pgjobd schema, version 12: what a job's last attempt used
-- (docs/handlers.md, "Attempt figures").
--
-- Three integer columns, written by the statement that ends the attempt
-- (the worker's batch of ends, or an sql handler's transaction): three more
-- arrays there, no statement, index or trigger of their own.
--   last_wall_ms     its wall time, every handler
--   last_cpu_ms      CPU time, user and system: exec (the command's, from
--                    wait4()) and plugin (the calling thread's)
--   last_max_rss_kb  peak resident set size: exec only
-- NULL where the handler type measures no such figure (a 0 is a figure).
-- Integers rather than one jsonb object: a finish writes them for every
-- job, and three int4 are 12 bytes of row with nothing to parse, where the
-- jsonb was about 50 and a parse per row (measured: about 5% of the no-op
-- throughput).  Values past 2^31-1 are stored as 2^31-1 (24.8 days of wall
-- or CPU time, 2 TiB of RSS).  Like last_error, they describe the last
-- attempt only.
--
-- Nullable columns with no default: a change of the catalog only, no
-- rewrite of the table, however many jobs it holds.

alter table pgjob.jobs
	add column last_wall_ms integer,
	add column last_cpu_ms integer,
	add column last_max_rss_kb integer;
