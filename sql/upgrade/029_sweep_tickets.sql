-- pgjobd schema, version 29: one sweep a second per queue, cluster-wide.
--
-- A claim from a worker's position passes over a job that comes to sort
-- behind it without a NOTIFY that says so (another claimer gave it back, a
-- lock left its xmax) and a job whose worker died (its lease expired): a
-- claim from the queue's head, the sweep, finds them (src/db/queue.c,
-- claim_sql).  Every worker used to sweep each of its queues once a second.
-- A sweep reads past every running job of the queue (16,000 with 16
-- workers of 1,000), and it locks the rows claimed after its snapshot
-- that it meets (FOR UPDATE follows them to their newest version, finds
-- them running, drops them, and keeps the lock to its commit), so the ends
-- of those jobs wait for it: with 16 workers, 16 sweeps a second, and
-- ends waiting on Lock:transactionid in 10-17 % of their samples.
--
-- Now a worker whose second has come asks for the queue's ticket in its
-- claim, which reads the queue from its head only if no worker of its
-- kinds has swept it within that second: the ticket is the time of the
-- last sweep, in milliseconds since the epoch, in a sequence (setval()
-- when granted; see claim_sql in src/db/queue.c).  Two workers that read it at once may both
-- sweep: harmless, as two sweeps always were.
--
-- A sequence, not a row: not transactional, no row version left behind
-- for a snapshot held open to keep, and no lock for a claim to wait on
-- (as sql/022_claim_stops.sql).  32 of them, by the hash of the queue's
-- name and the worker's kinds: a sweep takes only the kinds its worker
-- handles, so workers of other kinds keep a ticket of their own (two that
-- meet in one sequence share it, and each then sweeps less often than
-- once a second: a job they pass over waits longer, for a sweep).
do $$
begin
	for i in 0..31 loop
		execute format('create sequence pgjob.sweep_at_%s'
			' as bigint minvalue 0 start 0', i);
	end loop;
end
$$;
