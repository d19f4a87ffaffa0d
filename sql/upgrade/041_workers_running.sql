-- Version 41: each worker writes the number of jobs it holds with every
-- heartbeat (pgjob.workers.running; src/db/lease.c), and `pgjob status`
-- shows it: counting them from pgjob.jobs (state 'running', locked_by)
-- read every unfinished job, seconds behind a backlog of millions
-- (docs/performance.md, "A huge backlog").  Null until a worker of this
-- release writes it; `pgjob status --exact` still counts them.
alter table pgjob.workers add column running integer;
