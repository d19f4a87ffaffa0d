-- pgjobd schema, version 12: what a job's last attempt used
-- (docs/handlers.md, "Attempt figures").
--
-- last_usage is one small jsonb object, {"wall_ms": 1204, "cpu_ms": 1180,
-- "max_rss_kb": 5520}, written by the statement that ends the attempt (the
-- worker's batch of ends, or an sql handler's transaction): one more
-- parameter there, no statement, index or trigger of its own.  One column
-- rather than three because the figures depend on the handler type: an
-- exec attempt has all three (its child's, from wait4()), a plugin's has
-- no RSS of its own, an http or sql attempt only its wall time; a key that
-- is absent was not measured, where a 0 would be a figure.  Like
-- last_error, it describes the last attempt only.
--
-- A nullable column with no default: a change of the catalog only, no
-- rewrite of the table, however many jobs it holds.

alter table pgjob.jobs add column last_usage jsonb;
