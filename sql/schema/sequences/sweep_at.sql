-- One sweep a second per queue, cluster-wide (sql/upgrade/029_sweep_tickets.sql
-- says why at length).  A worker whose second has come asks for the
-- queue's ticket in its claim, which reads the queue from its head only if
-- no worker of its kinds has swept it within that second: the ticket is
-- the time of the last sweep, in milliseconds since the epoch, in a
-- sequence (setval() when granted; see claim_sql in src/db/queue.c).
--
-- A sequence, not a row: not transactional, no row version left behind
-- for a snapshot held open to keep, and no lock for a claim to wait on.
-- 32 of them, by the hash of the queue's name and the worker's kinds.
do $$
begin
	for i in 0..31 loop
		execute format('create sequence pgjob.sweep_at_%s'
			' as bigint minvalue 0 start 0', i);
	end loop;
end
$$;
